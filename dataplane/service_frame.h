// A frame of a service-port TCP flow as the flow engine takes it (its flow's
// key and hash, the side it came from, how far its buffer lets it grow) and
// what becomes of it (forwarded, perhaps cut short or grown, or dropped).
#pragma once

#include <bitset>
#include <cstdint>

#include "flow_key.h"
#include "frame.h"
#include "packet_sink.h"
#include "segment_writer.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

enum class FrameAction : uint8_t { kForward, kDrop };

struct FrameResult {
  FrameAction action = FrameAction::kForward;
  uint32_t frame_len = 0;           // the frame's length after any cut
  TcpFlow* answer_after = nullptr;  // send this flow's answer once the frame is on its way
};

[[nodiscard]] inline FrameResult forward_frame(const FrameView& v) noexcept {
  return {FrameAction::kForward, v.frame_len, nullptr};
}
[[nodiscard]] inline FrameResult drop_frame(const FrameView& v) noexcept {
  return {FrameAction::kDrop, v.frame_len, nullptr};
}
// `r` forwards only the first `keep` bytes of the segment's payload (0:
// none, so it drops the segment).
inline void forward_prefix(uint8_t* frame, FrameView& v, uint32_t keep, FrameResult& r) noexcept {
  if (keep == 0) {
    r.action = FrameAction::kDrop;
    return;
  }
  if (keep < v.payload_len) r.frame_len = cut_payload(frame, v, keep);
}

struct ServiceFrame {
  Side from;
  FlowKey key;
  uint64_t hash;
  // Bytes the frame's buffer holds from the frame's start (its length plus
  // the room after it); 0: the frame may not grow. An origin segment the
  // fields go into grows in place when they fit (FrameResult::frame_len is
  // then larger than the frame was).
  uint32_t room = 0;
};

// Whether `v` (a kTcp or kTcpFragment frame from `from`) belongs to a service
// port, and if so its flow, hashed with `seed` (flow_key.h).
[[nodiscard]] inline bool service_frame(const FrameView& v, Side from, const std::bitset<65536>& ports,
                                        ServiceFrame& out, uint64_t seed = 0) noexcept {
  if (v.kind != FrameKind::kTcp && v.kind != FrameKind::kTcpFragment) return false;
  out.from = from;
  if (from == Side::kClient) {
    if (!ports.test(v.dport)) return false;
    out.key = FlowKey{v.src, v.dst, v.sport, v.dport};
  } else {
    if (!ports.test(v.sport)) return false;
    out.key = FlowKey{v.dst, v.src, v.dport, v.sport};
  }
  out.hash = flow_hash(out.key, seed);
  return true;
}

}  // namespace sluice::dataplane
