// Connections the appliance does not know, adopted at a request head
// (flow_adopter.h): FlowEngine's members for an untracked client segment and
// for an adopted flow's origin until it has given its numbers. Kept apart
// from the per-segment dispatcher (flow_engine.cpp), which calls them only
// for such segments.
#include "flow_engine.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

FrameResult FlowEngine::untracked_client(const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                                         const PolicySnapshot& snap, Nanos now, PacketSink& out) noexcept {
  TcpFlow* flow = nullptr;
  if (snap.policy.adoption && v.has(flag::kAck) && !v.has(flag::kRst) &&
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

FrameResult FlowEngine::adoption_unproved(TcpFlow& flow, const FrameView& v, Nanos now) noexcept {
  // Its probe is out (the sweep sends it again each second): whatever the
  // client sends meanwhile is dropped unread, to be sent again.
  flow.last_seen = now;
  (void)v;
  return drop_frame(v);
}

FrameResult FlowEngine::adopted_origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, Nanos now,
                                       PacketSink& out) noexcept {
  if (flow.state == FlowState::kClosed) return drop_frame(v);
  flow.last_seen = now;
  if (v.has(flag::kRst)) {
    // The origin has no such connection (a forged segment, or it is gone).
    counters_.adoption_failed.add();
    binding_failed(flow, out);
    return drop_frame(v);
  }
  if (v.has(flag::kSyn) || !v.has(flag::kAck)) return drop_frame(v);
  if (v.payload_len != 0 || v.has(flag::kFin)) {
    // Mid-response, or closing: the client's acknowledgement did not cover
    // all the origin sent, so the client's view of its stream is not the
    // origin's. Its acknowledgement field is the next byte it expects:
    // where a RST is accepted.
    counters_.adoption_failed.add();
    binding_failed(flow, out);
    proxy_.reset_origin(flow, v, out);
    return drop_frame(v);
  }
  const FlowAdopter::Moved moved = adopter_.answered(flow, frame, v);
  counters_.adoption_proved.add();
  if (flow.context >= 0) {
    ParseContext& ctx = lender_.context(flow);
    ctx.to_client.renumber_sender(moved.origin_stream);
    ctx.to_origin.renumber_receiver(moved.client_stream);
  }
  send_stash(flow, lender_.stash_start(flow) + moved.client_stream, flow.origin.next, flow.adoption.window, out);
  return drop_frame(v);
}

FrameResult FlowEngine::adopted_too_late(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  counters_.adoption_failed.add();
  return abort(flow, v, out);
}

void FlowEngine::expiring(TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.context < 0 || flow.state != FlowState::kEstablished || flow.bind.state != Binding::kBound) return;
  if (owes(flow, &lender_.context(flow)) == Owes::kBody) sender_.abort(flow, out);
}

}  // namespace sluice::dataplane
