// Writes the TCP segments the appliance sends in a flow's name: the 429 (or
// other answer) to the client as if from the origin, the RST that releases
// the origin's socket, the ACK of a client's FIN. And shortens a forwarded
// segment whose tail belongs to a refused request. Raw bytes, no DPDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "frame.h"
#include "net/ip_address.h"

namespace sluice::dataplane {

struct SegmentSpec {
  std::span<const uint8_t> l2;  // Ethernet header with its VLAN tags and EtherType, as sent
  uint8_t ip_version = 4;
  net::IpAddress src, dst;
  uint16_t sport = 0, dport = 0;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  uint16_t window = 0;
  bool timestamp = false;  // add the timestamp option (RFC 7323) when the flow negotiated it
  uint32_t tsval = 0, tsecr = 0;
  // A SYN's other options (the SYN proxy's SYN-ACK, and its SYN to the
  // origin): MSS when not 0, window scale when not -1, SACK-permitted.
  uint16_t mss = 0;
  int8_t wscale = -1;
  bool sack_permitted = false;
  uint16_t ip_id = 0;
  std::span<const uint8_t> payload;
};

inline constexpr size_t kTimestampOptionBytes = 12;  // NOP, NOP, kind 8 length 10

// The TCP options' length for `s`, a multiple of 4: as Linux lays a SYN's
// options out, MSS; SACK-permitted and the timestamp together (12 bytes),
// or either padded with NOPs; NOP and window scale. Inline: every segment
// the engine writes asks.
[[nodiscard]] inline size_t options_size(const SegmentSpec& s) noexcept {
  if (s.mss == 0 && s.wscale < 0 && !s.sack_permitted) return s.timestamp ? kTimestampOptionBytes : 0;
  size_t n = s.mss != 0 ? 4 : 0;
  if (s.timestamp || s.sack_permitted) n += s.timestamp ? kTimestampOptionBytes : 4;
  if (s.wscale >= 0) n += 4;
  return n;
}

[[nodiscard]] size_t segment_size(const SegmentSpec& s) noexcept;

// Writes the whole frame, checksums included. Returns its length, or 0 if
// `out` is too small.
[[nodiscard]] size_t write_segment(std::span<uint8_t> out, const SegmentSpec& s) noexcept;

// Cuts the TCP payload of the segment in `frame` to its first `keep` bytes,
// fixing the IP length and both checksums. Returns the new frame length.
[[nodiscard]] uint32_t trim_payload(uint8_t* frame, FrameView& view, uint32_t keep) noexcept;

// trim_payload() for a segment cut short on purpose: a FIN after the cut is
// cleared as well, as the sender's side is still open past it.
[[nodiscard]] uint32_t cut_payload(uint8_t* frame, FrameView& view, uint32_t keep) noexcept;

// Urgent data goes on as ordinary data: URG and the urgent pointer cleared
// (dataplane/README.md, "What reaches the origin").
void clear_urgent(uint8_t* frame, FrameView& view) noexcept;

// Cuts the first `drop` bytes (fewer than it has) off the TCP payload of the
// segment in `frame`: the rest moves up, the sequence number moves on by
// `drop`, lengths and checksums follow. Returns the new frame length.
[[nodiscard]] uint32_t trim_front(uint8_t* frame, FrameView& view, uint32_t drop) noexcept;

// The segment's payload is `delta` bytes longer (or shorter) than `view`
// says: the IP length field, the IPv4 header checksum, view.payload_len and
// view.frame_len follow. The TCP checksum is the caller's.
void change_payload_length(uint8_t* frame, FrameView& view, int32_t delta) noexcept;

}  // namespace sluice::dataplane
