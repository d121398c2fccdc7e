// Admission's steps: see admission.h.
#include "admission.h"

#include <utility>

#include "limiter/client_ip.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

FrameResult Admission::client_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                  const limiter::CompiledPolicy& policy, Nanos now, PacketSink& out) noexcept {
  if (policy.syn_proxy) return proxy_syn(flow, sf, frame, v, policy.delayed_binding, now, out);
  return track_syn(flow, sf, frame, v, now, out) ? forward_frame(v) : drop_frame(v);
}

bool Admission::track_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v, Nanos now,
                          PacketSink& out) noexcept {
  using Outcome = TcpTracker::SynOutcome;
  Outcome o = tracker_.client_syn(flow, sf, frame, v, now);
  if (o == Outcome::kTableFull && make_room_for_flow(now, out)) o = tracker_.client_syn(nullptr, sf, frame, v, now);
  if (o == Outcome::kTableFull) counters_.flow_table_full.add();
  return o == Outcome::kTracked;
}

bool Admission::make_room_for_flow(Nanos now, PacketSink& out) noexcept {
  // The flow slow the longest makes room, if one has been slow long enough;
  // a SYN flood's own half-open flows (without the SYN proxy) are the first.
  const Victim victim = evictor_.for_flow(tracker_, now);
  if (victim.flow == nullptr) return false;
  switch (victim.why) {
    case Evict::kOver: counters_.evicted_over.add(); break;
    case Evict::kHalfOpen: counters_.evicted_half_open.add(); break;
    default:
      // Established, without a context: idle, or never sent a request. The
      // client gets a FIN and the origin a RST before the flow is forgotten.
      counters_.evicted_idle_flow.add();
      sender_.end_without_answer(*victim.flow, out);
      break;
  }
  tracker_.erase(*victim.flow);
  return true;
}

FrameResult Admission::proxy_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                 bool delayed_binding, Nanos now, PacketSink& out) noexcept {
  if (flow != nullptr) {
    // A SYN on a live connection changes nothing (tcp_tracker.h); on one
    // that is over, a new connection on the same ports begins.
    if (flow->state != FlowState::kClosed && flow->state != FlowState::kAnswered) {
      // RFC 5961 4.2: whatever its number, the peer that really holds the
      // connection answers a challenge ACK with a RST at the right number.
      if (flow->state != FlowState::kPassThrough) {
        counters_.syn_challenged.add();
        resets_.challenge(*flow, now, out);
      }
      return drop_frame(v);
    }
    tracker_.erase(*flow);
  }
  proxy_.answer_syn(frame, v, sf.key, delayed_binding, now, out);
  return drop_frame(v);
}

Admission::Unknown Admission::unknown_client(const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                             const limiter::CompiledPolicy& policy, Nanos now,
                                             PacketSink& out) noexcept {
  if (policy.syn_proxy && v.has(flag::kAck) && !v.has(flag::kRst)) {
    TcpFlow* flow = nullptr;
    switch (handshake_ack(sf, frame, v, policy.delayed_binding, flow, now, out)) {
      case Handshake::kDone: return {nullptr, drop_frame(v)};
      case Handshake::kSegment: return {flow, forward_frame(v)};
      case Handshake::kUntracked: break;
    }
  } else if (v.payload_len == 0) {
    return {nullptr, forward_frame(v)};
  }
  // A trusted proxy's connection carried a PROXY header at its start, long
  // gone: whom it relays cannot be known, so it is not adopted (reset, and
  // the balancer connects again).
  bool adopt = policy.adoption;
  if (adopt && policy.client_ip.spec.proxy_protocol != policy::ClientIpSpec::ProxyProtocol::kOff &&
      v.payload_len != 0 && limiter::trusted_proxy(policy.client_ip.spec, sf.key.client)) [[unlikely]] {
    counters_.proxy_not_adopted.add();
    adopt = false;
  }
  return {nullptr, adoption_.untracked_client(sf, frame, v, adopt, now, out)};
}

Admission::Handshake Admission::handshake_ack(const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                              bool delayed_binding, TcpFlow*& flow, Nanos now,
                                              PacketSink& out) noexcept {
  const std::optional<SynCookieGrant> grant = proxy_.check_ack(sf.key, v, now);
  if (!grant) {
    // Not a handshake this worker answered: a connection it lost track of
    // (both ends reset, so the client comes back through the proxy), or a
    // forgery (dropped; a reset costs the origin nothing). Data that may
    // have overtaken its handshake's ACK is dropped, not reset, unless it
    // is of a connection the restart did not carry on (forgotten_flows.h).
    if (v.payload_len != 0 && proxy_.may_follow_handshake(sf.key, v, now) && !forgotten_.contains(sf.key)) {
      counters_.syn_cookie_early_data.add();
    } else if (v.payload_len != 0) {
      return Handshake::kUntracked;
    }
    return Handshake::kDone;
  }
  using Outcome = TcpTracker::SynOutcome;
  Outcome o = Outcome::kTableFull;
  flow = tracker_.insert(sf, o);
  if (o == Outcome::kTableFull && make_room_for_flow(now, out)) flow = tracker_.insert(sf, o);
  if (flow == nullptr) {
    if (o == Outcome::kTableFull) counters_.flow_table_full.add();
    return Handshake::kDone;
  }
  flow->last_seen = now;
  counters_.flows_created.add();
  if (delayed_binding && lender_.take_stash(*flow)) {
    proxy_.accept(*flow, *grant, frame, v, now);
    // Its first bytes may come with it (or be what completes the handshake,
    // its ACK lost): taken as any segment of the flow.
    if (v.payload_len == 0 && !v.has(flag::kFin)) return Handshake::kDone;
    return Handshake::kSegment;
  }
  if (delayed_binding) counters_.bind_stash_exhausted.add();
  flow->bind.syn_sent_at = now;
  flow->client.progress = now;  // the handshake's: the origin's answer is due from here
  // Any payload with the ACK goes too: the client's window was shut, and
  // it sends the bytes again once the appliance opens it.
  proxy_.open(*flow, *grant, frame, v, out);
  return Handshake::kDone;
}

FrameResult Admission::proxied_client(TcpFlow& flow, const FrameView& v, Nanos now, PacketSink& out) noexcept {
  // The client is connected as far as it knows, with its window shut: its
  // probes (and copies of its ACK) wait for the origin. Each says the
  // origin's SYN may have been lost.
  static constexpr Nanos kResendAfter = 200'000'000;
  if (now - flow.bind.syn_sent_at >= kResendAfter) {
    flow.bind.syn_sent_at = now;
    proxy_.resend_syn(flow, out);
  }
  return drop_frame(v);
}

FrameResult Admission::proxied_origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, Nanos now,
                                      PacketSink& out) noexcept {
  if (!v.has(flag::kSyn)) {
    // The origin's answer to a SYN the appliance sent: only its SYN-ACK
    // or a refusal means anything.
    if (v.has(flag::kRst) && v.has(flag::kAck) && v.ack == flow.client.isn + 1) {
      counters_.syn_proxy_refused.add();
      proxy_.reset_client(flow, out);
      tracker_.reset(flow);
    }
    return drop_frame(v);
  }
  flow.last_seen = now;
  if (!v.has(flag::kAck) || v.ack != flow.client.isn + 1) return drop_frame(v);
  if (flow.state == FlowState::kSynSent) {
    if (!proxy_.origin_answered(flow, frame, v, now, out)) {
      proxy_.reset_both(flow, v, out);
      tracker_.reset(flow);
    }
  } else if (v.seq == flow.origin.isn) {
    proxy_.acknowledge_again(flow, out);
  }
  return drop_frame(v);
}

bool Admission::lend_context(TcpFlow& flow, const PolicySnapshot& snap, Nanos now, PacketSink& out) noexcept {
  Lent lent = lender_.borrow(flow, snap);
  if (lent == Lent::kNoneFree) {
    const Victim victim = evictor_.for_context(lender_.contexts(), tracker_, now);
    if (victim.flow != nullptr) {
      switch (victim.why) {
        case Evict::kSlowHead: counters_.evicted_slow_head.add(); break;
        case Evict::kStalledBody: counters_.evicted_stalled_body.add(); break;
        case Evict::kSlowReader: counters_.evicted_slow_reader.add(); break;
        default: counters_.evicted_idle_context.add(); break;
      }
      end_slow(*victim.flow, owes(*victim.flow, &lender_.context(*victim.flow)), out);
      lent = lender_.borrow(flow, snap);
    }
  }
  switch (lent) {
    case Lent::kYes: return true;
    case Lent::kNoneFree: counters_.contexts_exhausted.add(); return false;
    case Lent::kShareFull: counters_.share_contexts_refused.add(); return false;
    case Lent::kCannotCarry: return false;  // only a restart's carry_context() says it
  }
  return false;
}

void Admission::end_slow(TcpFlow& flow, Owes what, PacketSink& out) noexcept {
  ParseContext& ctx = lender_.context(flow);
  if (what == Owes::kHead && ctx.responses.outstanding() == 0) {
    const RequestPlan plan = requests_.time_out(flow, ctx);
    sender_.answer_later(flow, ctx, plan);
    sender_.send_answer(flow, out);
  } else if (what == Owes::kNothing || what == Owes::kFirstHead) {
    sender_.end_without_answer(flow, out);
  } else {
    sender_.abort(flow, out);
  }
}

bool Admission::deadline_due(const TcpFlow& flow, const PolicySnapshot& snap, Nanos now) const noexcept {
  if (flow.proxy.active && flow.state == FlowState::kSynSent) {
    return now - flow.client.progress > SynProxy::kOriginAnswerDeadline;
  }
  const ParseContext* ctx = flow.context >= 0 ? &std::as_const(lender_).context(flow) : nullptr;
  return overdue(flow, ctx, snap.policy.deadlines, now) != Overdue::kNone;
}

void Admission::keep_deadlines(TcpFlow& flow, const PolicySnapshot& snap, Nanos now, PacketSink& out) noexcept {
  if (flow.proxy.active && flow.state == FlowState::kSynSent) {
    // The origin has not answered the SYN sent (and sent again) in the
    // client's name: the client, connected as far as it knows, would probe
    // its shut window for minutes. It is told now.
    if (now - flow.client.progress > SynProxy::kOriginAnswerDeadline) {
      counters_.syn_proxy_refused.add();
      proxy_.reset_client(flow, out);
      tracker_.reset(flow);
    }
    return;
  }
  ParseContext* ctx = flow.context >= 0 ? &lender_.context(flow) : nullptr;
  switch (overdue(flow, ctx, snap.policy.deadlines, now)) {
    case Overdue::kNone:
      return;
    case Overdue::kHead: {
      counters_.deadline_head.add();
      const RequestPlan plan = requests_.time_out(flow, *ctx);
      sender_.answer_later(flow, *ctx, plan);
      // After responses still outstanding, the 408 waits for them as any
      // closing answer does.
      if (ctx->responses.outstanding() == 0) sender_.send_answer(flow, out);
      return;
    }
    case Overdue::kFirstHead:
      counters_.deadline_first_head.add();
      sender_.end_without_answer(flow, out);
      return;
    case Overdue::kKeepAlive:
      counters_.deadline_keep_alive.add();
      sender_.end_without_answer(flow, out);
      return;
    case Overdue::kBody:
      // The origin has the head and part of the body: there is no answer
      // to give in its place.
      counters_.deadline_body.add();
      sender_.abort(flow, out);
      return;
    case Overdue::kResponse:
      counters_.deadline_response.add();
      sender_.abort(flow, out);
      return;
  }
}

void Admission::expiring(TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.context < 0 || flow.state != FlowState::kEstablished || flow.bind.state != Binding::kBound) return;
  if (owes(flow, &lender_.context(flow)) == Owes::kBody) sender_.abort(flow, out);
}

}  // namespace sluice::dataplane
