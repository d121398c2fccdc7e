// Delayed binding (syn_proxy.h): a flow the SYN proxy accepted is parsed
// like any other, but until its origin has a connection what it would
// forward waits in the flow's stash; the first of it sends the SYN, the
// origin's SYN-ACK renumbers the flow and releases the stash. FlowEngine's
// members for that, kept apart from the per-segment dispatcher
// (flow_engine.cpp), which calls them only for flows not yet bound.
#include "flow_engine.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

namespace {

// How often a binding flow's SYN goes again while the origin is silent:
// when the client's own segments show it waiting, and from the sweep.
constexpr Nanos kResendOnClient = 200'000'000;
constexpr Nanos kResendOnSweep = time::kNanosPerSecond;

}  // namespace

FrameResult FlowEngine::unbound_client(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r, Nanos now,
                                       PacketSink& out) noexcept {
  const bool forward = r.action == FrameAction::kForward;
  r.action = FrameAction::kDrop;  // (an answer due, in answer_after, still goes)
  if (!forward) return r;
  if (v.payload_len != 0) {
    // Not taken (bytes the stash has, or past it): the client, which nothing
    // acknowledged, sends them again, and once bound they go on as sent. A
    // FIN right after them goes with them.
    if (lender_.stash(flow, v.seq, {frame + v.payload_offset, v.payload_len}) && v.has(flag::kFin)) {
      (void)lender_.stash_fin(flow, v.seq + v.payload_len);
    }
    if (flow.bind.state == Binding::kUnbound) {
      start_binding(flow, now, out);
      return r;
    }
  } else if (v.has(flag::kFin) && flow.bind.state == Binding::kBinding) {
    (void)lender_.stash_fin(flow, v.seq);
  } else if (v.has(flag::kFin)) {
    // The client closes before a byte went through: its connection ends
    // here, and the origin never hears of it.
    sender_.end_without_answer(flow, out);
    sender_.after_answer(flow, v, out);
    return r;
  }
  // Waiting on the origin.
  if (flow.bind.state == Binding::kBinding && now - flow.bind.syn_sent_at >= kResendOnClient) {
    flow.bind.syn_sent_at = now;
    bind_again(flow, out);
  }
  return r;
}

void FlowEngine::stash_held(TcpFlow& flow, const ParseContext& ctx, const FrameView& v, Nanos now,
                            PacketSink& out) noexcept {
  if (!seq_lt(flow.client.held_seq, v.seq)) return;
  // No removal lies inside a held head: its numbers move as one. The stash
  // has room for it (bind_stash.h), and must: it was acknowledged.
  const uint32_t count = v.seq - flow.client.held_seq;
  (void)lender_.stash(flow, editor_.to_origin_seq(flow, flow.client.held_seq),
                      {reinterpret_cast<const uint8_t*>(ctx.head.get()), count});
  if (flow.bind.state == Binding::kUnbound) start_binding(flow, now, out);
}

FrameResult FlowEngine::unbound_origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, Nanos now,
                                       PacketSink& out) noexcept {
  // Unbound, the origin has no connection: nothing can come from it.
  if (flow.bind.state == Binding::kUnbound) return drop_frame(v);
  if (flow.adoption.active) return adopted_origin(flow, frame, v, now, out);
  if (!v.has(flag::kAck) || v.ack != flow.client.isn + 1) return drop_frame(v);
  flow.last_seen = now;
  if (v.has(flag::kSyn)) {
    bind_answered(flow, frame, v, out);
  } else if (v.has(flag::kRst)) {
    counters_.syn_proxy_refused.add();
    binding_failed(flow, out);
  }
  return drop_frame(v);
}

void FlowEngine::bind_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, PacketSink& out) noexcept {
  uint32_t delta = 0;
  if (!proxy_.bound(flow, frame, v, delta)) {
    // The origin cannot do what the client was promised: both ends reset
    // (the origin's half-open connection at the number it expects).
    binding_failed(flow, out);
    proxy_.reset_origin(flow, v, out);
    return;
  }
  // Edits made while unbound (kept answers) are at the appliance's numbers
  // of the origin's stream: moved to the origin's. (A flow gets an edit hold
  // only for the fields of a response, and it has had none.)
  if (flow.context >= 0) lender_.context(flow).to_client.renumber_sender(delta);
  proxy_.acknowledge_again(flow, out);
  send_stash(flow, lender_.stash_start(flow), flow.origin.isn + 1, SynProxy::window_to_origin(flow), out);
}

void FlowEngine::send_stash(TcpFlow& flow, uint32_t seq, uint32_t ack, uint16_t window, PacketSink& out) noexcept {
  const std::span<const uint8_t> stashed = lender_.stashed(flow);
  if (!stashed.empty()) {
    SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
    s.seq = seq;
    s.ack = ack;
    s.flags = flag::kAck;
    s.window = window;
    const bool fin = lender_.stash_closed(flow);
    emitter_.emit_split(out, Side::kOrigin, s, stashed, payload_per_segment(flow.origin.mss, flow.timestamps),
                        fin ? flag::kAck | flag::kPsh | flag::kFin : flag::kAck | flag::kPsh);
    if (fin) tracker_.client_fin(flow);
  }
  lender_.release_stash(flow);
}

void FlowEngine::start_binding(TcpFlow& flow, Nanos now, PacketSink& out) noexcept {
  if (flow.adoption.active) {
    adopter_.bind(flow, now, out);
  } else {
    proxy_.bind(flow, now, out);
  }
}

void FlowEngine::bind_again(const TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.adoption.active) {
    adopter_.probe(flow, out);
  } else {
    proxy_.resend_syn(flow, out);
  }
}

void FlowEngine::binding_failed(TcpFlow& flow, PacketSink& out) noexcept {
  editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kRst | flag::kAck);
  tracker_.reset(flow);
}

void FlowEngine::keep_binding(TcpFlow& flow, Nanos now, PacketSink& out) noexcept {
  if (now - flow.bind.since > SynProxy::kOriginAnswerDeadline) {
    if (flow.adoption.active) {
      counters_.adoption_failed.add();
    } else {
      counters_.syn_proxy_refused.add();
    }
    binding_failed(flow, out);
  } else if (now - flow.bind.syn_sent_at >= kResendOnSweep) {
    flow.bind.syn_sent_at = now;
    bind_again(flow, out);
  }
}

}  // namespace sluice::dataplane
