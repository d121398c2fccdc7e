// Internet checksums (RFC 1071) for the segments the appliance writes or
// shortens itself: the AF_PACKET driver has no transmit checksum offload, and
// a segment cut short must be summed again anyway.
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

// True if the TCP checksum of the segment is right (used by tests).
[[nodiscard]] bool tcp_checksum_ok(const uint8_t* frame, const FrameView& view) noexcept;
[[nodiscard]] bool ipv4_checksum_ok(const uint8_t* frame, const FrameView& view) noexcept;

}  // namespace sluice::dataplane
