// 16-bit one's-complement sums, eight bytes at a time.
#include "checksum.h"

#include <bit>
#include <cstring>

namespace sluice::dataplane {

uint64_t checksum_add(uint64_t sum, const uint8_t* p, size_t n) noexcept {
  // The one's-complement sum does not depend on byte order: sum the words as
  // the CPU loads them, eight bytes at a time (as two 32-bit halves, so a
  // 64-bit accumulator cannot overflow for any frame), fold, and swap the two
  // bytes of the result into the big-endian words `sum` counts in.
  static_assert(std::endian::native == std::endian::little, "checksum_add sums little-endian loads");
  uint64_t native = 0;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    native += (w & 0xffffffffu) + (w >> 32);
    p += 8;
    n -= 8;
  }
  while (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    native += w;
    p += 2;
    n -= 2;
  }
  if (n == 1) native += p[0];  // the high byte of a big-endian word padded with zero
  while (native >> 16) native = (native & 0xffff) + (native >> 16);
  return sum + static_cast<uint16_t>((native << 8) | (native >> 8));
}

uint16_t checksum_fold(uint64_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

void set_ipv4_checksum(uint8_t* ip, size_t ihl) noexcept {
  store16(ip + 10, 0);
  store16(ip + 10, static_cast<uint16_t>(~checksum_fold(checksum_add(0, ip, ihl))));
}

namespace {

uint64_t pseudo_header(const uint8_t* frame, const FrameView& v, uint32_t tcp_len) noexcept {
  const uint8_t* ip = frame + v.l3_offset;
  uint64_t sum = 0;
  if (v.ip_version == 4) {
    sum = checksum_add(sum, ip + 12, 8);
  } else {
    sum = checksum_add(sum, ip + 8, 32);
  }
  return sum + 6 + tcp_len;
}

}  // namespace

void set_tcp_checksum(uint8_t* frame, const FrameView& v) noexcept {
  uint8_t* tcp = frame + v.l4_offset;
  const uint32_t tcp_len = v.frame_len - v.l4_offset;
  store16(tcp + 16, 0);
  const uint64_t sum = checksum_add(pseudo_header(frame, v, tcp_len), tcp, tcp_len);
  uint16_t c = static_cast<uint16_t>(~checksum_fold(sum));
  store16(tcp + 16, c);
}

bool tcp_checksum_ok(const uint8_t* frame, const FrameView& v) noexcept {
  const uint32_t tcp_len = v.frame_len - v.l4_offset;
  const uint64_t sum = checksum_add(pseudo_header(frame, v, tcp_len), frame + v.l4_offset, tcp_len);
  return checksum_fold(sum) == 0xffff;
}

bool ipv4_checksum_ok(const uint8_t* frame, const FrameView& v) noexcept {
  const uint8_t* ip = frame + v.l3_offset;
  return checksum_fold(checksum_add(0, ip, static_cast<size_t>(ip[0] & 0x0f) * 4)) == 0xffff;
}

}  // namespace sluice::dataplane
