// Delayed binding and an adopted flow's binding: see binder.h.
#include "binder.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

namespace {

// How often a binding flow's SYN goes again while the origin is silent:
// when the client's own segments show it waiting, and from the sweep.
constexpr Nanos kResendOnClient = 200'000'000;
constexpr Nanos kResendOnSweep = time::kNanosPerSecond;

}  // namespace

FrameResult Binder::client(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r, Nanos now,
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
      start(flow, now, out);
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
    again(flow, out);
  }
  return r;
}

void Binder::stash_held(TcpFlow& flow, const ParseContext& ctx, uint32_t end, Nanos now, PacketSink& out) noexcept {
  if (!seq_lt(flow.client.held_seq, end)) return;
  // No removal lies inside a held head: its numbers move as one. The stash
  // has room for it (bind_stash.h), and must: it was acknowledged.
  const uint32_t count = end - flow.client.held_seq;
  (void)lender_.stash(flow, editor_.to_origin_seq(flow, flow.client.held_seq),
                      {reinterpret_cast<const uint8_t*>(ctx.head), count});
  if (flow.bind.state == Binding::kUnbound) start(flow, now, out);
}

FrameResult Binder::origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, Nanos now,
                           PacketSink& out) noexcept {
  // Unbound, the origin has no connection: nothing can come from it.
  if (flow.bind.state == Binding::kUnbound) return drop_frame(v);
  if (flow.adoption.active) return adoption_answered(flow, frame, v, now, out);
  if (!v.has(flag::kAck) || v.ack != flow.client.isn + 1) return drop_frame(v);
  flow.last_seen = now;
  if (v.has(flag::kSyn)) {
    answered(flow, frame, v, out);
  } else if (v.has(flag::kRst)) {
    counters_.syn_proxy_refused.add();
    failed(flow, out);
  }
  return drop_frame(v);
}

void Binder::answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, PacketSink& out) noexcept {
  uint32_t delta = 0;
  if (!proxy_.bound(flow, frame, v, delta)) {
    // The origin cannot do what the client was promised: both ends reset
    // (the origin's half-open connection at the number it expects).
    failed(flow, out);
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

void Binder::send_stash(TcpFlow& flow, uint32_t seq, uint32_t ack, uint16_t window, PacketSink& out) noexcept {
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

void Binder::start(TcpFlow& flow, Nanos now, PacketSink& out) noexcept {
  if (flow.adoption.active) {
    adopter_.bind(flow, now, out);
  } else {
    proxy_.bind(flow, now, out);
  }
}

void Binder::again(const TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.adoption.active) {
    adopter_.probe(flow, out);
  } else {
    proxy_.resend_syn(flow, out);
  }
}

void Binder::failed(TcpFlow& flow, PacketSink& out) noexcept {
  editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kRst | flag::kAck);
  tracker_.reset(flow);
}

bool Binder::due(const TcpFlow& flow, Nanos now) noexcept {
  return flow.state != FlowState::kClosed &&
         (now - flow.bind.since > SynProxy::kOriginAnswerDeadline || now - flow.bind.syn_sent_at >= kResendOnSweep);
}

void Binder::keep(TcpFlow& flow, Nanos now, PacketSink& out) noexcept {
  // One that failed stays binding, closed, until it is forgotten.
  if (flow.state == FlowState::kClosed) return;
  if (now - flow.bind.since > SynProxy::kOriginAnswerDeadline) {
    if (flow.adoption.active) {
      counters_.adoption_failed.add();
    } else {
      counters_.syn_proxy_refused.add();
    }
    failed(flow, out);
  } else if (now - flow.bind.syn_sent_at >= kResendOnSweep) {
    flow.bind.syn_sent_at = now;
    again(flow, out);
  }
}

FrameResult Binder::adoption_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, Nanos now,
                                      PacketSink& out) noexcept {
  if (flow.state == FlowState::kClosed) return drop_frame(v);
  flow.last_seen = now;
  if (v.has(flag::kRst)) {
    // The origin has no such connection (a forged segment, or it is gone).
    counters_.adoption_failed.add();
    failed(flow, out);
    return drop_frame(v);
  }
  if (v.has(flag::kSyn) || !v.has(flag::kAck)) return drop_frame(v);
  if (v.payload_len != 0 || v.has(flag::kFin)) {
    // Mid-response, or closing: the client's acknowledgement did not cover
    // all the origin sent, so the client's view of its stream is not the
    // origin's. Its acknowledgement field is the next byte it expects:
    // where a RST is accepted.
    counters_.adoption_failed.add();
    failed(flow, out);
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

}  // namespace sluice::dataplane
