// The per-64-byte classification that the head scan is built on, and the
// instruction sets it can run on. A kernel turns 64 bytes into one bit per byte
// for each class below; everything after that is the same scalar code for every
// instruction set, so all kernels give identical results by construction (and
// tests check the kernels against each other on every byte value).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "http/token_chars.h"

namespace sluice::http {

struct BlockMasks {
  uint64_t lf;        // '\n'
  uint64_t cr;        // '\r'
  uint64_t ctl;       // CTL except HTAB, and DEL (includes CR and LF)
  uint64_t nontchar;  // not a token character: ends a method or a field name
  uint64_t nonvchar;  // <= 0x20 or >= 0x7F: ends a request-target
  uint64_t qmark;     // '?'
  uint64_t colon;     // ':'
};

enum class Isa : uint8_t { kScalar, kSse42, kAvx2, kAvx512 };
inline constexpr std::array<Isa, 4> kAllIsas = {Isa::kScalar, Isa::kSse42, Isa::kAvx2, Isa::kAvx512};

[[nodiscard]] bool isa_supported(Isa isa) noexcept;
// The widest supported instruction set, unless the environment variable
// SLUICE_ISA (scalar, sse42, avx2, avx512) names a narrower supported one.
[[nodiscard]] Isa best_isa() noexcept;
[[nodiscard]] std::string_view to_string(Isa isa) noexcept;

// Nibble tables for the token class: a byte is a tchar iff
// kTcharLow[byte & 15] & kTcharHigh[byte >> 4] is non-zero. Each high nibble
// 2..7 owns one bit, so the product is exact.
inline constexpr std::array<uint8_t, 16> kTcharHigh = {0, 0, 1, 2, 4, 8, 16, 32, 0, 0, 0, 0, 0, 0, 0, 0};
inline constexpr std::array<uint8_t, 16> kTcharLow = [] {
  std::array<uint8_t, 16> t{};
  for (unsigned lo = 0; lo < 16; ++lo) {
    for (unsigned hi = 2; hi < 8; ++hi) {
      if (is_tchar(static_cast<unsigned char>(hi << 4 | lo))) t[lo] |= static_cast<uint8_t>(1u << (hi - 2));
    }
  }
  return t;
}();

// The same tables repeated to 64 bytes, for one full-width load in the kernels.
inline constexpr std::array<uint8_t, 64> kTcharLow64 = [] {
  std::array<uint8_t, 64> t{};
  for (size_t i = 0; i < 64; ++i) t[i] = kTcharLow[i % 16];
  return t;
}();
inline constexpr std::array<uint8_t, 64> kTcharHigh64 = [] {
  std::array<uint8_t, 64> t{};
  for (size_t i = 0; i < 64; ++i) t[i] = kTcharHigh[i % 16];
  return t;
}();

}  // namespace sluice::http
