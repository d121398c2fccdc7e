// Case-insensitive comparison of ASCII header names and tokens against a
// lowercase reference, a word at a time. Field names, transfer codings and
// connection options are compared this way on every request.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace sluice::http {

// Lowercases the ASCII letters of 8 bytes at once; no other byte changes.
[[gnu::always_inline]] inline uint64_t lower_ascii8(uint64_t x) noexcept {
  constexpr uint64_t k7f = 0x7f7f7f7f7f7f7f7full, k80 = 0x8080808080808080ull;
  const uint64_t heptets = x & k7f;
  const uint64_t ge_a = heptets + 0x3f3f3f3f3f3f3f3full;  // high bit set where byte >= 'A'
  const uint64_t gt_z = heptets + 0x2525252525252525ull;  // high bit set where byte > 'Z'
  const uint64_t upper = ge_a & ~gt_z & ~x & k80;
  return x | (upper >> 2);
}

template <typename Word>
[[gnu::always_inline]] inline Word load_word(const char* p) noexcept {
  Word w;
  std::memcpy(&w, p, sizeof w);  // fixed size: one unaligned load
  return w;
}

// True iff `s` equals `lower` (already lowercase) ignoring ASCII case.
// Compares whole words, the last one overlapping the one before, so no byte
// outside either string is read and nothing is copied.
[[gnu::always_inline]] inline bool iequals_lower(std::string_view s, std::string_view lower) noexcept {
  const size_t n = s.size();
  if (n != lower.size()) return false;
  const char* p = s.data();
  const char* q = lower.data();
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (lower_ascii8(load_word<uint64_t>(p + i)) != load_word<uint64_t>(q + i)) return false;
    }
    return lower_ascii8(load_word<uint64_t>(p + n - 8)) == load_word<uint64_t>(q + n - 8);
  }
  if (n >= 4) {
    return static_cast<uint32_t>(lower_ascii8(load_word<uint32_t>(p))) == load_word<uint32_t>(q) &&
           static_cast<uint32_t>(lower_ascii8(load_word<uint32_t>(p + n - 4))) == load_word<uint32_t>(q + n - 4);
  }
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<char>(lower_ascii8(static_cast<unsigned char>(p[i]))) != q[i]) return false;
  }
  return true;
}

}  // namespace sluice::http
