// See authority.h. Runs once per request with a host (and once more when a
// rule keys on it), over a few dozen bytes: plain loops, no allocation.
#include "net/authority.h"

#include <array>

#include "net/ip_address.h"

namespace sluice::net {

namespace {

constexpr size_t kNpos = std::string_view::npos;

// unreserved and sub-delims (RFC 3986 2.2, 2.3): the bytes a reg-name may
// hold besides a percent-encoding.
inline constexpr std::array<bool, 256> kRegName = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    t[static_cast<size_t>(c)] = alnum;
  }
  for (const char c : std::string_view("-._~!$&'()*+,;=")) t[static_cast<unsigned char>(c)] = true;
  return t;
}();

constexpr bool is_unreserved(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

constexpr bool is_hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

constexpr unsigned hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
  return static_cast<unsigned>((c | 0x20) - 'a' + 10);
}

constexpr char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c;
}
constexpr char upper(char c) noexcept {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c & ~0x20) : c;
}

struct Split {
  std::string_view host;  // with the brackets of an IP-literal
  std::string_view port;  // after the ':', empty without one
  bool well_formed;       // an IP-literal is closed and followed by nothing or ':'
};

Split split(std::string_view a) noexcept {
  if (!a.empty() && a.front() == '[') {
    const size_t close = a.find(']');
    if (close == kNpos) return {a, {}, false};
    const std::string_view rest = a.substr(close + 1);
    if (rest.empty()) return {a, {}, true};
    return {a.substr(0, close + 1), rest.substr(1), rest.front() == ':'};
  }
  const size_t colon = a.find(':');
  if (colon == kNpos) return {a, {}, true};
  return {a.substr(0, colon), a.substr(colon + 1), true};
}

bool valid_reg_name(std::string_view host) noexcept {
  if (host.empty()) return false;
  for (size_t i = 0; i < host.size(); ++i) {
    const auto c = static_cast<unsigned char>(host[i]);
    if (c == '%') {
      if (i + 2 >= host.size() || !is_hex_digit(host[i + 1]) ||
          !is_hex_digit(host[i + 2])) {
        return false;
      }
      i += 2;
    } else if (!kRegName[c]) {
      return false;
    }
  }
  return true;
}

// The port's number, or -1 when it is not 1 to 5 digits up to 65535.
int32_t port_number(std::string_view port) noexcept {
  if (port.empty() || port.size() > 5) return -1;
  int32_t n = 0;
  for (const char c : port) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n <= 65535 ? n : -1;
}

// Appends to `out` up to its size; `n` counts on past it, so the caller
// tells an overflow by n > out.size().
struct Writer {
  std::span<char> out;
  size_t n = 0;
  char last = 0;
  void put(char c) noexcept {
    if (n < out.size()) out[n] = c;
    ++n;
    last = c;
  }
  void put_hex(unsigned v) noexcept {  // no leading zeros
    static constexpr char kDigits[] = "0123456789abcdef";
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const unsigned d = (v >> shift) & 0xf;
      if (d != 0 || started || shift == 0) {
        put(kDigits[d]);
        started = true;
      }
    }
  }
  void put_decimal(uint32_t v) noexcept {
    char digits[10];
    int k = 0;
    do {
      digits[k++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (k > 0) put(digits[--k]);
  }
};

}  // namespace

bool valid_authority(std::string_view authority) noexcept {
  if (authority.empty()) return true;
  const Split s = split(authority);
  if (!s.well_formed) return false;
  if (s.host.front() == '[') {
    if (!parse_ipv6(s.host.substr(1, s.host.size() - 2))) return false;
  } else if (!valid_reg_name(s.host)) {
    return false;
  }
  return s.port.empty() || port_number(s.port) >= 0;
}

std::string_view authority_port(std::string_view authority) noexcept {
  return split(authority).port;
}

size_t normalise_authority(std::string_view authority, uint16_t default_port, std::span<char> out) noexcept {
  const Split s = split(authority);
  if (!s.well_formed || s.host.empty()) return 0;
  Writer w{out};
  if (s.host.front() == '[') {
    // One text per address: "[::1]" and "[0:0::1]" are one host.
    const auto ip = parse_ipv6(s.host.substr(1, s.host.size() - 2));
    if (!ip) return 0;
    w.put('[');
    for (size_t g = 0; g < 8; ++g) {
      if (g != 0) w.put(':');
      w.put_hex(static_cast<unsigned>(ip->bytes[2 * g] << 8 | ip->bytes[2 * g + 1]));
    }
    w.put(']');
  } else {
    for (size_t i = 0; i < s.host.size(); ++i) {
      char c = s.host[i];
      if (c == '%' && i + 2 < s.host.size()) {
        const char h1 = s.host[i + 1], h2 = s.host[i + 2];
        i += 2;
        const auto decoded = static_cast<unsigned char>(hex_value(h1) << 4 | hex_value(h2));
        if (!is_unreserved(decoded)) {
          w.put('%');
          w.put(upper(h1));
          w.put(upper(h2));
          continue;
        }
        c = static_cast<char>(decoded);
      }
      w.put(lower(c));
    }
    // "example.com." is the same name written fully qualified.
    if (w.n != 0 && w.last == '.') --w.n;
    if (w.n == 0) return 0;
  }
  if (!s.port.empty()) {
    const int32_t port = port_number(s.port);
    if (port != default_port) {
      w.put(':');
      if (port >= 0) {
        w.put_decimal(static_cast<uint32_t>(port));
      } else {
        for (const char c : s.port) w.put(c);  // not a valid authority: kept as sent
      }
    }
  }
  return w.n <= out.size() ? w.n : 0;
}

}  // namespace sluice::net
