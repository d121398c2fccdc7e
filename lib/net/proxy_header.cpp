// See proxy_header.h.
#include "net/proxy_header.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace sluice::net {

namespace {

constexpr std::string_view kV1 = "PROXY ";
constexpr size_t kV1Max = 107;  // the spec's worst case, CRLF included
constexpr char kV2[12] = {'\r', '\n', '\r', '\n', '\0', '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};

// Whether `have` is `sig`'s beginning (all of it, or as much as there is).
bool starts_like(std::span<const char> have, std::span<const char> sig) noexcept {
  const size_t n = std::min(have.size(), sig.size());
  return std::memcmp(have.data(), sig.data(), n) == 0;
}

// A port as v1 writes it: 1 to 5 digits, no leading zero (but "0" itself).
bool read_port(std::string_view s, uint16_t& out) noexcept {
  if (s.empty() || s.size() > 5 || (s.size() > 1 && s[0] == '0')) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535) return false;
  out = static_cast<uint16_t>(v);
  return true;
}

ProxyHeader malformed(uint8_t version) noexcept {
  ProxyHeader h;
  h.status = ProxyHeader::Status::kMalformed;
  h.version = version;
  return h;
}

ProxyHeader read_v1(std::span<const char> bytes) noexcept {
  const std::string_view all(bytes.data(), std::min(bytes.size(), kV1Max));
  // The first CR or LF must be the line's CRLF.
  const size_t cr = all.find_first_of("\r\n");
  if (cr == std::string_view::npos || (cr + 1 == all.size() && all[cr] == '\r')) {
    if (all.size() >= kV1Max) return malformed(1);
    ProxyHeader h;
    h.status = ProxyHeader::Status::kIncomplete;
    h.version = 1;
    return h;
  }
  if (all.compare(cr, 2, "\r\n") != 0) return malformed(1);
  std::string_view line = all.substr(kV1.size(), cr - kV1.size());
  ProxyHeader h;
  h.version = 1;
  h.length = static_cast<uint32_t>(cr + 2);
  if (line.substr(0, 7) == "UNKNOWN") {
    // Whatever follows is to be ignored (the spec); the line must still end.
    h.status = ProxyHeader::Status::kLocal;
    return line.size() == 7 || line[7] == ' ' ? h : malformed(1);
  }
  // Five fields, one space between each, none after the last.
  std::string_view parts[5];
  for (size_t i = 0; i < 5; ++i) {
    const size_t sp = line.find(' ');
    if ((sp == std::string_view::npos) != (i == 4)) return malformed(1);
    parts[i] = line.substr(0, sp);
    if (parts[i].empty()) return malformed(1);
    if (i != 4) line = line.substr(sp + 1);
  }
  const bool v4 = parts[0] == "TCP4";
  if (!v4 && parts[0] != "TCP6") return malformed(1);
  const auto src = v4 ? parse_ipv4(parts[1]) : parse_ipv6(parts[1]);
  const auto dst = v4 ? parse_ipv4(parts[2]) : parse_ipv6(parts[2]);
  uint16_t dport = 0;
  if (!src || !dst || !read_port(parts[3], h.source_port) || !read_port(parts[4], dport)) return malformed(1);
  // A v4-mapped address in TCP6 would pass for an IPv4 client.
  if (!v4 && src->is_v4()) return malformed(1);
  h.source = *src;
  h.status = ProxyHeader::Status::kRelayed;
  return h;
}

ProxyHeader read_v2(std::span<const char> bytes) noexcept {
  if (bytes.size() < 16) {
    ProxyHeader h;
    h.status = ProxyHeader::Status::kIncomplete;
    h.version = 2;
    return h;
  }
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if ((byte(12) >> 4) != 2) return malformed(2);
  const uint8_t command = byte(12) & 0x0f;
  if (command > 1) return malformed(2);
  const uint32_t rest = (uint32_t{byte(14)} << 8) | byte(15);
  if (16 + rest > kMaxProxyHeader) return malformed(2);
  if (bytes.size() < 16 + rest) {
    ProxyHeader h;
    h.status = ProxyHeader::Status::kIncomplete;
    h.version = 2;
    return h;
  }
  ProxyHeader h;
  h.version = 2;
  h.length = 16 + rest;
  const uint8_t family = byte(13);
  if (command == 0) {
    // LOCAL: the balancer speaking for itself; the address block, if any,
    // is to be ignored.
    h.status = ProxyHeader::Status::kLocal;
    return h;
  }
  if (family == 0x11) {  // TCP over IPv4
    if (rest < 12) return malformed(2);
    uint32_t a;
    std::memcpy(&a, bytes.data() + 16, 4);
    h.source = IpAddress::v4(__builtin_bswap32(a));
    h.source_port = static_cast<uint16_t>((uint32_t{byte(24)} << 8) | byte(25));
  } else if (family == 0x21) {  // TCP over IPv6
    if (rest < 36) return malformed(2);
    std::array<uint8_t, 16> a;
    std::memcpy(a.data(), bytes.data() + 16, 16);
    h.source = IpAddress::v6(a);
    if (h.source.is_v4()) return malformed(2);
    h.source_port = static_cast<uint16_t>((uint32_t{byte(48)} << 8) | byte(49));
  } else {
    // UNSPEC with PROXY, UDP, UNIX sockets: nothing a TCP service's client
    // can be keyed by.
    return malformed(2);
  }
  h.status = ProxyHeader::Status::kRelayed;
  return h;
}

}  // namespace

ProxyHeader read_proxy_header(std::span<const char> bytes) noexcept {
  if (bytes.empty()) return {};
  if (starts_like(bytes, {kV1.data(), kV1.size()})) {
    if (bytes.size() < kV1.size()) {
      ProxyHeader h;
      h.status = ProxyHeader::Status::kIncomplete;
      return h;
    }
    return read_v1(bytes);
  }
  if (starts_like(bytes, kV2)) {
    if (bytes.size() < sizeof kV2) {
      ProxyHeader h;
      h.status = ProxyHeader::Status::kIncomplete;
      return h;
    }
    return read_v2(bytes);
  }
  return {};
}

}  // namespace sluice::net
