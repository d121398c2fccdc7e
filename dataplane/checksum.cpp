// 16-bit one's-complement sums: 32 bytes a step with AVX2 where the CPU has
// it (chosen once), eight bytes a step otherwise. Every segment of a parsed
// flow is summed on receipt (unless the port verified it), so this is on the
// per-byte path.
#include "checksum.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace sluice::dataplane {

// The one's-complement sum does not depend on byte order: both sums below
// add the words as the CPU loads them (little-endian) and leave the folding
// and the swap into big-endian words to checksum_add. Any grouping of the
// 16-bit words into wider ones sums the same modulo 0xffff.
namespace {

[[gnu::always_inline]] inline uint64_t words_sum(const uint8_t* p, size_t n) noexcept {
  // 64-bit words, their carries counted apart (add, adc), two a step: a
  // frame of any length cannot overflow the count.
  uint64_t sum = 0, carries = 0;
  while (n >= 16) {
    uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    sum += a;
    carries += sum < a;
    sum += b;
    carries += sum < b;
    p += 16;
    n -= 16;
  }
  if (n & 8) {
    uint64_t a;
    std::memcpy(&a, p, 8);
    sum += a;
    carries += sum < a;
    p += 8;
  }
  // The last 0-7 bytes, zero-padded, in their places in a 64-bit word: an
  // odd last byte is the high byte of a big-endian word, the low one loaded.
  uint64_t tail = 0;
  unsigned shift = 0;
  if (n & 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    tail = w;
    p += 4;
    shift = 32;
  }
  if (n & 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    tail |= uint64_t{w} << shift;
    p += 2;
    shift += 16;
  }
  if (n & 1) tail |= uint64_t{p[0]} << shift;
  sum += tail;
  carries += sum < tail;
  // Each carry out of bit 63 is worth 2^64, which is 1 modulo 0xffff: add
  // them back, then fold 64 bits into 33.
  sum += carries;
  carries = sum < carries;
  return carries + (sum & 0xffffffffu) + (sum >> 32);
}

}  // namespace

namespace checksum_detail {

uint64_t native_sum_scalar(const uint8_t* p, size_t n) noexcept { return words_sum(p, n); }

[[gnu::target("avx2")]] uint64_t native_sum_avx2(const uint8_t* p, size_t n) noexcept {
  // Each 32-bit lane adds the 16-bit halves of its dwords: at most 2^15
  // blocks per round keeps a lane (two halves' sums) below 2^32.
  constexpr size_t kRound = size_t{1} << 15;
  const __m256i low = _mm256_set1_epi32(0xffff);
  const __m256i zero = _mm256_setzero_si256();
  uint64_t total = 0;
  while (n >= 32) {
    size_t blocks = std::min(n / 32, kRound);
    n -= blocks * 32;
    __m256i a = zero, b = zero;
    for (; blocks != 0; --blocks, p += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      a = _mm256_add_epi32(a, _mm256_and_si256(v, low));
      b = _mm256_add_epi32(b, _mm256_srli_epi32(v, 16));
    }
    a = _mm256_add_epi32(a, b);
    const __m256i wide = _mm256_add_epi64(_mm256_unpacklo_epi32(a, zero), _mm256_unpackhi_epi32(a, zero));
    const __m128i half = _mm_add_epi64(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
    total += static_cast<uint64_t>(_mm_cvtsi128_si64(half)) + static_cast<uint64_t>(_mm_extract_epi64(half, 1));
  }
  return total + words_sum(p, n);
}

}  // namespace checksum_detail

namespace {

[[gnu::always_inline]] inline uint64_t native_sum(const uint8_t* p, size_t n) noexcept {
  static const bool wide = __builtin_cpu_supports("avx2");
  return wide && n >= 64 ? checksum_detail::native_sum_avx2(p, n) : words_sum(p, n);
}

// A native sum folded to 16 bits, still as loaded: a big-endian word's bytes
// swapped. Stored little-endian it is the big-endian sum; compared with
// 0xffff it needs no swap.
[[gnu::always_inline]] inline uint16_t fold_native(uint64_t native) noexcept {
  while (native >> 16) native = (native & 0xffff) + (native >> 16);
  return static_cast<uint16_t>(native);
}

// The pseudo-header's words (RFC 9293 3.1; RFC 8200 8.1) as a native sum:
// the two addresses, the protocol and the TCP length, each a big-endian
// word, so loaded swapped.
[[gnu::always_inline]] inline uint64_t pseudo_native(const uint8_t* frame, const FrameView& v, uint32_t tcp_len) noexcept {
  const uint8_t* ip = frame + v.l3_offset;
  const uint64_t addresses = v.ip_version == 4 ? words_sum(ip + 12, 8) : words_sum(ip + 8, 32);
  const uint64_t length = ((tcp_len & 0xff) << 8) | ((tcp_len >> 8) & 0xff);
  return addresses + 0x0600 + length;
}

}  // namespace

uint64_t checksum_add(uint64_t sum, const uint8_t* p, size_t n) noexcept {
  static_assert(std::endian::native == std::endian::little, "checksum_add sums little-endian loads");
  const uint16_t native = fold_native(native_sum(p, n));
  return sum + static_cast<uint16_t>((native << 8) | (native >> 8));
}

uint16_t checksum_fold(uint64_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

void set_ipv4_checksum(uint8_t* ip, size_t ihl) noexcept {
  store16(ip + 10, 0);
  const uint16_t c = static_cast<uint16_t>(~fold_native(words_sum(ip, ihl)));
  std::memcpy(ip + 10, &c, 2);
}

void set_tcp_checksum(uint8_t* frame, const FrameView& v) noexcept {
  uint8_t* tcp = frame + v.l4_offset;
  const uint32_t tcp_len = v.frame_len - v.l4_offset;
  store16(tcp + 16, 0);
  const uint16_t c = static_cast<uint16_t>(~fold_native(native_sum(tcp, tcp_len) + pseudo_native(frame, v, tcp_len)));
  std::memcpy(tcp + 16, &c, 2);
}

bool tcp_checksum_ok(const uint8_t* frame, const FrameView& v) noexcept {
  const uint32_t tcp_len = v.frame_len - v.l4_offset;
  return fold_native(native_sum(frame + v.l4_offset, tcp_len) + pseudo_native(frame, v, tcp_len)) == 0xffff;
}

bool ipv4_checksum_ok(const uint8_t* frame, const FrameView& v) noexcept {
  const uint8_t* ip = frame + v.l3_offset;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
  // The usual 20 bytes summed with the length known, unrolled.
  return fold_native(ihl == 20 ? words_sum(ip, 20) : words_sum(ip, ihl)) == 0xffff;
}

}  // namespace sluice::dataplane
