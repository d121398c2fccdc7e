// IP addresses as the limiter keys them: 16 bytes, IPv4 as IPv4-mapped IPv6
// (::ffff:a.b.c.d), so one type and one hash serve both. Parsing is strict
// (no leading zeros read as octal, no ports, no zone ids): a header value
// that is not exactly an address is not believed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <bit>
#include <cstring>
#include <string>
#include <string_view>

namespace sluice::net {

struct IpAddress {
  std::array<uint8_t, 16> bytes{};

  // Inline: the data plane makes two per frame.
  [[nodiscard]] static IpAddress v4(uint32_t host_order) noexcept {
    IpAddress a;
    a.bytes[10] = a.bytes[11] = 0xff;
    const uint32_t network_order = __builtin_bswap32(host_order);
    std::memcpy(a.bytes.data() + 12, &network_order, 4);
    return a;
  }
  [[nodiscard]] static IpAddress v6(const std::array<uint8_t, 16>& b) noexcept { return IpAddress{b}; }
  // The IPv4-mapped form, ::ffff:a.b.c.d: two 8-byte words compared.
  static_assert(std::endian::native == std::endian::little);
  [[nodiscard]] bool is_v4() const noexcept {
    uint64_t hi, lo;
    std::memcpy(&hi, bytes.data(), 8);
    std::memcpy(&lo, bytes.data() + 8, 8);
    return hi == 0 && (lo & 0xffffffffull) == 0xffff0000ull;
  }
  // The address with all but the first `bits` bits cleared (bits counted on
  // the IPv6 form for IPv6, on the IPv4 form for IPv4).
  [[nodiscard]] IpAddress prefix(unsigned bits) const noexcept;
  [[nodiscard]] std::string to_string() const;
  bool operator==(const IpAddress&) const = default;
};

[[nodiscard]] std::optional<IpAddress> parse_ipv4(std::string_view s) noexcept;
[[nodiscard]] std::optional<IpAddress> parse_ipv6(std::string_view s) noexcept;
[[nodiscard]] std::optional<IpAddress> parse_ip(std::string_view s) noexcept;

// A network: address and prefix length, as in 198.18.0.0/15 or 2001:db8::/32.
struct IpNetwork {
  IpAddress base;
  unsigned bits;  // on the IPv4 form for IPv4 networks

  [[nodiscard]] bool contains(const IpAddress& a) const noexcept;
};

[[nodiscard]] std::optional<IpNetwork> parse_network(std::string_view s) noexcept;

}  // namespace sluice::net
