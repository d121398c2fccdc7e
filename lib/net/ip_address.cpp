// See ip_address.h.
#include "net/ip_address.h"

#include <arpa/inet.h>

#include <cstring>

namespace sluice::net {

IpAddress IpAddress::prefix(unsigned bits) const noexcept {
  unsigned keep = is_v4() ? 96 + (bits > 32 ? 32 : bits) : (bits > 128 ? 128 : bits);
  IpAddress out = *this;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned from = i * 8;
    if (from >= keep) {
      out.bytes[i] = 0;
    } else if (keep - from < 8) {
      out.bytes[i] = static_cast<uint8_t>(out.bytes[i] & (0xff00u >> (keep - from)));
    }
  }
  return out;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  if (is_v4()) {
    inet_ntop(AF_INET, bytes.data() + 12, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof buf);
  }
  return buf;
}

std::optional<IpAddress> parse_ipv4(std::string_view s) noexcept {
  uint32_t value = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return std::nullopt;
    if (s[i] == '0' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9') return std::nullopt;  // no leading zeros
    unsigned octet = 0;
    size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 3) {
      octet = octet * 10 + static_cast<unsigned>(s[i] - '0');
      ++i;
      ++digits;
    }
    if (octet > 255) return std::nullopt;
    value = value << 8 | octet;
    if (++parts < 4) {
      if (i >= s.size() || s[i] != '.') return std::nullopt;
      ++i;
    }
  }
  if (i != s.size()) return std::nullopt;
  return IpAddress::v4(value);
}

std::optional<IpAddress> parse_ipv6(std::string_view s) noexcept {
  // inet_pton accepts exactly the RFC 4291 text forms (and no zone id).
  if (s.empty() || s.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  IpAddress a;
  if (inet_pton(AF_INET6, buf, a.bytes.data()) != 1) return std::nullopt;
  return a;
}

std::optional<IpAddress> parse_ip(std::string_view s) noexcept {
  if (auto a = parse_ipv4(s)) return a;
  return parse_ipv6(s);
}

bool IpNetwork::contains(const IpAddress& a) const noexcept {
  if (base.is_v4() != a.is_v4()) return false;
  return a.prefix(bits) == base;
}

std::optional<IpNetwork> parse_network(std::string_view s) noexcept {
  const size_t slash = s.find('/');
  const auto addr = parse_ip(s.substr(0, slash));
  if (!addr) return std::nullopt;
  const unsigned max = addr->is_v4() ? 32 : 128;
  unsigned bits = max;
  if (slash != std::string_view::npos) {
    const std::string_view b = s.substr(slash + 1);
    if (b.empty() || b.size() > 3) return std::nullopt;
    bits = 0;
    for (char c : b) {
      if (c < '0' || c > '9') return std::nullopt;
      bits = bits * 10 + static_cast<unsigned>(c - '0');
    }
    if (bits > max) return std::nullopt;
  }
  return IpNetwork{addr->prefix(bits), bits};
}

}  // namespace sluice::net
