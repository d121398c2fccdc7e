// Internet checksums (RFC 1071): verified on every segment of a parsed flow
// the port did not verify (a corrupted segment must not be judged, nor carry
// its bytes to the origin under a checksum the appliance wrote), and written
// for the segments the appliance writes or shortens itself (the AF_PACKET and
// AF_XDP drivers have no transmit checksum offload, and a segment cut short
// must be summed again anyway).
#pragma once

#include <cstddef>
#include <cstdint>

#include "frame.h"

namespace sluice::dataplane {

// One's-complement sum of `n` bytes added to `sum` (not folded).
[[nodiscard]] uint64_t checksum_add(uint64_t sum, const uint8_t* p, size_t n) noexcept;
[[nodiscard]] uint16_t checksum_fold(uint64_t sum) noexcept;

// Writes the IPv4 header checksum of the header at `ip` (`ihl` bytes).
void set_ipv4_checksum(uint8_t* ip, size_t ihl) noexcept;

// Writes the TCP checksum of the segment `view` describes in `frame`
// (pseudo-header of IPv4 or IPv6 included).
void set_tcp_checksum(uint8_t* frame, const FrameView& view) noexcept;

// True if the TCP checksum of the segment (pseudo-header included), or the
// IPv4 header checksum, is right.
[[nodiscard]] bool tcp_checksum_ok(const uint8_t* frame, const FrameView& view) noexcept;
[[nodiscard]] bool ipv4_checksum_ok(const uint8_t* frame, const FrameView& view) noexcept;

// The two sums checksum_add picks between, for the tests that hold them to
// each other: unfolded sums of the words as loaded (little-endian).
namespace checksum_detail {
[[nodiscard]] uint64_t native_sum_scalar(const uint8_t* p, size_t n) noexcept;
[[nodiscard]] uint64_t native_sum_avx2(const uint8_t* p, size_t n) noexcept;  // only where the CPU has AVX2
}  // namespace checksum_detail

}  // namespace sluice::dataplane
