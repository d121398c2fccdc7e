// See key_label_text.h.
#include "control/key_label_text.h"

#include <cstring>

#include "control/credential_file.h"
#include "net/ip_address.h"

namespace sluice::control {

namespace {

std::string address_text(const limiter::KeyLabel& l) {
  net::IpAddress a;
  std::memcpy(a.bytes.data(), l.bytes.data(), 16);
  std::string s = a.to_string();
  if (l.kind == limiter::KeyLabel::Kind::kDestination && l.len >= 18) {
    uint16_t port = 0;
    std::memcpy(&port, l.bytes.data() + 16, 2);
    s = (a.is_v4() ? s : "[" + s + "]") + ":" + std::to_string(port);
  }
  return s;
}

}  // namespace

std::string key_label_text(const limiter::KeyLabel& l, const UserNamer& user_name) {
  using K = limiter::KeyLabel::Kind;
  switch (l.kind) {
    case K::kClientIp:
    case K::kDestination:
      if (l.len < 16) break;
      // An IPv6 prefix keyed (X03) reads as a prefix, not as an address.
      return l.prefix != 0 ? address_text(l) + "/" + std::to_string(l.prefix) : address_text(l);
    case K::kCredential: {
      if (l.len < 16) break;
      limiter::Digest dg{};
      std::memcpy(&dg.lo, l.bytes.data(), 8);
      std::memcpy(&dg.hi, l.bytes.data() + 8, 8);
      return "credential " + digest_hex(dg);
    }
    case K::kUser: {
      if (l.len < 8) break;
      uint64_t id = 0;
      std::memcpy(&id, l.bytes.data(), 8);
      const std::string name = user_name ? user_name(id) : std::string();
      return name.empty() ? "user #" + std::to_string(id) : "user " + name;
    }
    case K::kText: {
      std::string s(reinterpret_cast<const char*>(l.bytes.data()), l.len);
      for (char& c : s) c = (c >= 0x20 && c < 0x7f) ? c : '?';
      return s;  // a key past 32 bytes shows its first 32
    }
    case K::kNone: break;
  }
  return "-";
}

}  // namespace sluice::control
