// Segments the appliance writes in one end's name of a tracked flow: the
// frame header, addresses, ports and latest timestamps that end's own frames
// carry, numbered by the caller, and bytes longer than the receiver takes
// split into several. The lowest room of the engine: it knows a flow's
// addresses and where segments go (a PacketSink), nothing of its streams.
// Every sequence and acknowledgement number it is given is already in the
// receiver's numbers (stream_editor.h maps them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "packet_sink.h"
#include "segment_writer.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

// The most payload one segment to a receiver that announced `mss` carries,
// once the timestamp option (when the flow uses it) takes its room; at
// least 1, so a split always moves on.
[[nodiscard]] inline size_t payload_per_segment(uint16_t mss, bool timestamps) noexcept {
  size_t n = mss;
  if (timestamps) n = n > kTimestampOptionBytes ? n - kTimestampOptionBytes : 1;
  return n != 0 ? n : 1;
}

// The Ethernet header (VLAN tags included) of `frame` with its MACs
// swapped: the way back to its sender, for a segment answering a frame of a
// flow the appliance does not track (a reset, a SYN cookie). Returns its
// length.
[[nodiscard]] inline uint8_t reply_l2(const uint8_t* frame, const FrameView& v, uint8_t (&out)[kMaxL2Header]) noexcept {
  const auto len = static_cast<uint8_t>(v.l3_offset < kMaxL2Header ? v.l3_offset : kMaxL2Header);
  std::memcpy(out, frame, len);
  std::memcpy(out, frame + 6, 6);
  std::memcpy(out + 6, frame, 6);
  return len;
}

class SegmentEmitter {
 public:
  // A segment in the name of `from`, towards the other end: everything but
  // its numbers, flags, window and payload.
  [[nodiscard]] static SegmentSpec from(const TcpFlow& flow, Side from) noexcept;

  // Writes `s` into a buffer of `out` and sends it towards `to`; no buffer
  // free means the segment is lost, and TCP recovers as from any loss.
  void emit(PacketSink& out, Side to, SegmentSpec& s) noexcept;

  // `bytes` (at least one) in segments of at most `max_payload` each,
  // numbered from s.seq on: every segment but the last gets s.flags, the
  // last `last_flags`.
  void emit_split(PacketSink& out, Side to, SegmentSpec& s, std::span<const uint8_t> bytes, size_t max_payload,
                  uint8_t last_flags) noexcept;

 private:
  uint16_t ip_id_ = 0;
};

}  // namespace sluice::dataplane
