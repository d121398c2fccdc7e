// An untracked client segment, adopted or reset: see adoption.h.
#include "adoption.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

FrameResult Adoption::untracked_client(const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                       bool adoption, Nanos now, PacketSink& out) noexcept {
  TcpFlow* flow = nullptr;
  if (adoption && v.has(flag::kAck) && !v.has(flag::kRst) &&
      FlowAdopter::begins_request({frame + v.payload_offset, v.payload_len}) && adopter_.allows(now)) {
    // No room is made for it: a forged segment must not cost a live flow.
    TcpTracker::SynOutcome o = TcpTracker::SynOutcome::kTracked;
    flow = tracker_.insert(sf, o);
    if (flow != nullptr && !lender_.take_stash(*flow)) {
      tracker_.erase(*flow);
      flow = nullptr;
    }
  }
  if (flow == nullptr) {
    counters_.untracked_reset.add();
    const bool tell_origin = untracked_resets_.take(now);
    if (!tell_origin) counters_.untracked_origin_resets_limited.add();
    sender_.reset_untracked(frame, v, tell_origin, out);
    return drop_frame(v);
  }
  adopter_.adopt(*flow, frame, v, now);
  counters_.flows_adopted.add();
  // Identity before charge: the head is neither parsed nor charged until
  // the origin has shown the connection exists (a forged segment's probe
  // is answered with a RST). The client, whose segment nothing
  // acknowledged, sends it again; by then the flow is bound.
  adopter_.bind(*flow, now, out);
  return drop_frame(v);
}

}  // namespace sluice::dataplane
