// See credential.h. The value is copied once, then put in canonical form in
// place, eight bytes at a time (SWAR): a credential's scheme is found and
// lowercased without a loop per byte, since every credentialed request pays
// for it before its digest.
#include "limiter/credential.h"

#include <bit>
#include <cstdint>
#include <cstring>

namespace sluice::limiter {

namespace {

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;
constexpr uint64_t kHigh = 0x8080808080808080ull;

uint64_t load8(const char* p) noexcept {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

// 0x80 in each byte of `x` that equals `b`, exactly (no false positives).
constexpr uint64_t bytes_equal(uint64_t x, uint8_t b) noexcept {
  const uint64_t y = x ^ (kOnes * b);
  return ~(((y & kLow7) + kLow7) | y | kLow7);
}

// 0x80 in each byte of `x` that is an ASCII capital.
constexpr uint64_t capitals(uint64_t x) noexcept {
  const uint64_t h = x & kLow7;  // no carries between bytes below
  const uint64_t at_least_a = h + kOnes * (0x80 - 'A');
  const uint64_t past_z = h + kOnes * (0x80 - 'Z' - 1);
  return (at_least_a ^ past_z) & ~x & kHigh;
}

constexpr bool ows(char c) noexcept { return c == ' ' || c == '\t'; }

// The first space or tab of `v`, or v.size().
size_t first_ows(std::string_view v) noexcept {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const uint64_t x = load8(v.data() + i);
    const uint64_t m = bytes_equal(x, ' ') | bytes_equal(x, '\t');
    if (m != 0) return i + static_cast<size_t>(std::countr_zero(m)) / 8;
  }
  while (i < v.size() && !ows(v[i])) ++i;
  return i;
}

// Lowercases the ASCII capitals of p[0, n), eight bytes at a time; p[0,
// room) holds the value (room >= n), so a scheme shorter than a word (or
// its last part) is done in one masked word of the value's own bytes when
// the word fits in it.
void lowercase(char* p, size_t n, size_t room) noexcept {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = load8(p + i);
    const uint64_t y = x | (capitals(x) >> 2);
    std::memcpy(p + i, &y, 8);
  }
  if (i == n) return;
  if (i + 8 <= room) {
    const uint64_t x = load8(p + i);
    const uint64_t mine = (uint64_t{1} << (8 * (n - i))) - 1;  // the bytes before p[n]
    const uint64_t y = x | ((capitals(x) >> 2) & mine);
    std::memcpy(p + i, &y, 8);
    return;
  }
  for (; i < n; ++i) {
    if (p[i] >= 'A' && p[i] <= 'Z') p[i] = static_cast<char>(p[i] | 0x20);
  }
}

}  // namespace

std::string_view normalize_credential(std::string_view v, std::span<char> out) noexcept {
  while (!v.empty() && ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && ows(v.back())) v.remove_suffix(1);
  if (v.empty() || v.size() > out.size()) return {};
  std::memcpy(out.data(), v.data(), v.size());
  const size_t space = first_ows(v);
  if (space == v.size()) return {out.data(), v.size()};  // a bare token
  // scheme, one space, token (RFC 9110 11.4: the scheme is case-insensitive).
  lowercase(out.data(), space, v.size());
  size_t t = space + 1;
  while (t < v.size() && ows(v[t])) ++t;
  out[space] = ' ';
  const size_t token = v.size() - t;
  // Usually one space: the token is in place already.
  if (t != space + 1) std::memmove(out.data() + space + 1, out.data() + t, token);
  return {out.data(), space + 1 + token};
}

}  // namespace sluice::limiter
