// Character classes of RFC 9110 5.6.2 and RFC 9112, as one 256-entry table, for
// the scalar code paths (the SIMD kernels encode the same classes in nibble
// tables; tests check they agree on every byte).
#pragma once

#include <array>
#include <cstdint>

namespace sluice::http {

enum CharClass : uint8_t {
  kTchar = 1,     // token character
  kVchar = 2,     // 0x21..0x7E
  kCtl = 4,       // 0x00..0x1F except HTAB, and DEL: never allowed inside a field line
  kHexDigit = 8,
};

inline constexpr std::array<uint8_t, 256> kCharClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    uint8_t k = 0;
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    const bool digit = c >= '0' && c <= '9';
    if (alpha || digit) k |= kTchar;
    switch (c) {
      case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
      case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        k |= kTchar;
        break;
      default:
        break;
    }
    if (c >= 0x21 && c <= 0x7e) k |= kVchar;
    if ((c < 0x20 && c != '\t') || c == 0x7f) k |= kCtl;
    if (digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) k |= kHexDigit;
    t[static_cast<size_t>(c)] = k;
  }
  return t;
}();

inline constexpr bool is_tchar(unsigned char c) noexcept { return kCharClass[c] & kTchar; }
inline constexpr bool is_vchar(unsigned char c) noexcept { return kCharClass[c] & kVchar; }
inline constexpr bool is_ctl(unsigned char c) noexcept { return kCharClass[c] & kCtl; }
inline constexpr bool is_hex_digit(unsigned char c) noexcept { return kCharClass[c] & kHexDigit; }
inline constexpr bool is_ows(unsigned char c) noexcept { return c == ' ' || c == '\t'; }

}  // namespace sluice::http
