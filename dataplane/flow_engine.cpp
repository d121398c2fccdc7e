// The per-segment dispatcher: classify the frame, track TCP, run the request
// or response path, apply its plan through the stream editor, send. See
// flow_engine.h for the rooms and dataplane/README.md for a request's walk.
#include "flow_engine.h"

#include <algorithm>

#include "checksum.h"
#include "segment_rewrite.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

namespace {

// Forwards the first `keep` bytes of the segment's payload (0: drops it).
void forward_prefix(uint8_t* frame, FrameView& v, uint32_t keep, FrameResult& r) noexcept {
  if (keep == 0) {
    r.action = FrameAction::kDrop;
    return;
  }
  if (keep < v.payload_len) r.frame_len = cut_payload(frame, v, keep);
}

// Where a segment's payload stands against a stream read up to `next`
// (tcp_flow.h), repeats and gaps counted.
Arrival counted_arrival(uint32_t next, const FrameView& v, WorkerCounters& counters) noexcept {
  const Arrival a = arrival(next, v.seq, v.payload_len);
  if (a == Arrival::kRepeat) counters.retransmits.add();
  if (a == Arrival::kAhead) counters.out_of_order.add();
  return a;
}

ShareCaps share_caps(const EngineConfig& c) noexcept {
  ShareCaps caps = default_share_caps(c.flows, c.contexts);
  if (c.flows_per_client != 0) caps.flows = c.flows_per_client;
  if (c.contexts_per_client != 0) caps.contexts = c.contexts_per_client;
  return caps;
}

std::span<const char> payload_of(const uint8_t* frame, const FrameView& v) noexcept {
  return {reinterpret_cast<const char*>(frame + v.payload_offset), v.payload_len};
}

}  // namespace

FlowEngine::FlowEngine(const EngineConfig& config, limiter::LimiterState& limiter, WorkerCounters& counters,
                       uint64_t trace_seed)
    : counters_(counters),
      shares_(config.flows, share_caps(config), config.share_seed),
      lender_(config.contexts, config.max_head_bytes, config.max_fields, config.edit_holds, config.bind_stashes,
              shares_),
      answers_(config.answer_bytes),
      proxy_(config.cookie_seed, emitter_, counters),
      adopter_(emitter_),
      tracker_(config.flows, config.timeouts, lender_, shares_, counters),
      editor_(lender_, answers_, emitter_, counters),
      sender_(lender_, editor_, answers_, emitter_, counters),
      requests_(limiter, lender_.contexts(), answers_, counters, trace_seed),
      responses_(limiter, counters) {
  set_insert_fields(config.insert_fields);
  requests_.set_spend_log(config.spends);
  responses_.set_spend_log(config.spends);
  requests_.set_refusal_sampler(config.refusals);
}

void FlowEngine::set_insert_fields(bool on) noexcept {
  requests_.set_insert_fields(on);
  lender_.set_report_status_lines(on);
}

FrameResult FlowEngine::on_frame(const ServiceFrame& sf, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                 Nanos now, PacketSink& out) noexcept {
  counters_.service_frames.add();
  if (v.kind == FrameKind::kTcpFragment) {
    counters_.fragments_dropped.add();
    return drop_frame(v);
  }
  TcpFlow* flow = tracker_.find(sf.key, sf.hash);
  if (flow != nullptr && flow->hold >= 0 && !lender_.settle_hold(*flow, sf.from, v, snap)) {
    // Its held edits need a context to act on; the sender tries again.
    counters_.contexts_exhausted.add();
    return drop_frame(v);
  }
  if (sf.from == Side::kClient) return from_client(flow, sf, frame, v, snap, now, out);
  return from_origin(flow, frame, v, sf.room, now, out);
}

FrameResult FlowEngine::from_client(TcpFlow* flow, const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                                    const PolicySnapshot& snap, Nanos now, PacketSink& out) noexcept {
  if (v.has(flag::kSyn)) {
    // With ACK it is not a client's opening SYN: it goes on untracked.
    if (v.has(flag::kAck)) return forward_frame(v);
    if (snap.policy.syn_proxy) return proxy_syn(flow, sf, frame, v, snap.policy.delayed_binding, now, out);
    return track_syn(flow, sf, frame, v, now, out) ? forward_frame(v) : drop_frame(v);
  }
  if (flow == nullptr) {
    if (snap.policy.syn_proxy && v.has(flag::kAck) && !v.has(flag::kRst)) {
      return proxy_ack(sf, frame, v, snap, now, out);
    }
    if (v.payload_len == 0) return forward_frame(v);
    return untracked_client(sf, frame, v, snap, now, out);
  }
  // Judged before anything of it is believed: a forged RST must not even
  // move the flow's timestamps.
  if (v.has(flag::kRst)) return client_reset(*flow, frame, v, now, out);
  tracker_.client_seen(*flow, v, now);
  if (flow->adoption.active && flow->bind.state != Binding::kBound) [[unlikely]] return adoption_unproved(*flow, v, now);

  const uint32_t parsed_before = flow->client.next;
  FrameResult r = client_segment(*flow, frame, v, snap, now, out);
  if (flow->seqadj.active && r.action == FrameAction::kForward) {
    if (editor_.to_origin(*flow, frame, v, parsed_before, out) != EditOutcome::kDone) return abort(*flow, v, out);
    lender_.give_back_if_done(*flow);
    r.frame_len = v.frame_len;
  }
  if (flow->bind.state != Binding::kBound) [[unlikely]] return unbound_client(*flow, frame, v, r, now, out);
  if (v.has(flag::kFin) && r.action == FrameAction::kForward) tracker_.client_fin(*flow);
  if (flow->proxy.active && r.action == FrameAction::kForward) SynProxy::to_origin(*flow, frame, v);
  return r;
}

FrameResult FlowEngine::client_reset(TcpFlow& flow, uint8_t* frame, FrameView& v, Nanos now,
                                     PacketSink& out) noexcept {
  // After an answer the origin's socket is gone already; a closed flow's
  // ends may still need each other's last word.
  const bool answered = flow.state == FlowState::kAnswered;
  if (flow.state == FlowState::kPassThrough) {
    // Bridged, no longer judged: the origin's own stack decides (RFC 5961
    // in Linux); the appliance forgets nothing it could be wrong about.
    editor_.renumber_to_origin(flow, frame, v);
    return forward_frame(v);
  }
  if (!answered && flow.state != FlowState::kClosed) {
    const bool acked = flow.bind.state == Binding::kBound && flow.state != FlowState::kSynSent &&
                       flow.state != FlowState::kSynReceived && flow.origin.ack != 0;
    const uint32_t origin_acked = acked ? editor_.to_client_ack(flow, flow.origin.ack) : flow.client.next;
    switch (judge_client_rst(flow, v.seq, origin_acked)) {
      case RstVerdict::kExact:
        break;
      case RstVerdict::kInWindow:
        counters_.rst_challenged.add();
        challenge(flow, now, out);
        return drop_frame(v);
      case RstVerdict::kOutOfWindow:
        counters_.rst_out_of_window.add();
        return drop_frame(v);
    }
  }
  tracker_.client_seen(flow, v, now);
  if (flow.bind.state == Binding::kUnbound) {
    // The origin never heard of the connection.
    tracker_.reset(flow);
    return drop_frame(v);
  }
  if (!answered) editor_.renumber_to_origin(flow, frame, v);
  tracker_.reset(flow);
  return answered ? drop_frame(v) : forward_frame(v);
}

void FlowEngine::challenge(TcpFlow& flow, Nanos now, PacketSink& out) noexcept {
  // Only a synchronized flow has numbers to put in one; before that the
  // RST or SYN is only dropped.
  if (flow.state == FlowState::kSynSent || flow.state == FlowState::kSynReceived) return;
  if (!challenges_.take(now)) {
    counters_.challenge_acks_limited.add();
    return;
  }
  editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kAck);
}

FrameResult FlowEngine::client_segment(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                       Nanos now, PacketSink& out) noexcept {
  switch (flow.state) {
    case FlowState::kSynSent:
      if (flow.proxy.active) return proxied_handshake(flow, v, now, out);
      return forward_frame(v);
    case FlowState::kSynReceived:
      if (!tracker_.established_by(flow, v)) return forward_frame(v);
      [[fallthrough]];
    case FlowState::kEstablished:
      return client_data(flow, frame, v, snap, now, out);
    case FlowState::kRefusing:
      // The answer waits for earlier responses: the client's acknowledgements
      // of those go through, nothing it sends after the refused request does.
      // What came before it, sent again, goes on again: the origin may have
      // lost it.
      if (v.payload_len != 0 && seq_lt(v.seq, flow.answer.reset_seq)) {
        FrameResult r = forward_frame(v);
        forward_prefix(frame, v, std::min(v.payload_len, flow.answer.reset_seq - v.seq), r);
        return judged_repeat(flow, frame, v, r);
      }
      if (v.payload_len != 0 || v.has(flag::kFin)) return drop_frame(v);
      return forward_frame(v);
    case FlowState::kAnswered:
      sender_.after_answer(flow, v, out);
      return drop_frame(v);
    case FlowState::kClosed:
      // A RST or both FINs ended it: bytes past what was judged are no
      // request the origin may read (it may not have taken the RST).
      if (v.payload_len != 0 && seq_lt(flow.client.next, v.seq + v.payload_len)) {
        counters_.closed_data_dropped.add();
        return drop_frame(v);
      }
      return forward_frame(v);
    case FlowState::kPassThrough:
      return forward_frame(v);
  }
  return forward_frame(v);
}

FrameResult FlowEngine::client_data(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap, Nanos now,
                                    PacketSink& out) noexcept {
  if (v.payload_len == 0) return forward_frame(v);
  if (v.has(flag::kUrg)) {
    // Urgent data: the origin's stack would take the byte before the urgent
    // pointer out of the stream it hands to the server, which would then read
    // other bytes than were judged. Sent as ordinary data, it is read in line.
    counters_.urgent_cleared.add();
    clear_urgent(frame, v);
  }
  const Arrival a = counted_arrival(flow.client.next, v, counters_);
  if (a == Arrival::kAhead) return drop_frame(v);
  if (a == Arrival::kRepeat) return client_repeat(flow, frame, v, out);
  if (seq_lt(v.seq, flow.client.next)) {
    // Bytes already judged, then new ones. The judged copy is the one that
    // counts: the origin got it, or (a held head) gets it from the context,
    // never this segment's, which may differ. Only the new bytes go on.
    counters_.overlaps_trimmed.add();
    static_cast<void>(trim_front(frame, v, flow.client.next - v.seq));
  }
  if (flow.context < 0 && !lend_context(flow, snap, now, out)) return drop_frame(v);
  flow.client.progress = now;  // new bytes taken (a segment dropped for want of a context is not progress)
  return parse_requests(flow, frame, v, snap, now, out);
}

void FlowEngine::ack_held(TcpFlow& flow, ParseContext& ctx, PacketSink& out) noexcept {
  // Held bytes are acknowledged to the client in the origin's name, or it
  // would send them again and again; but the acknowledgement covers every
  // byte before them too, and those the origin may yet lose: it goes once
  // the origin has them (from_origin() sends it then).
  ctx.held_ack_owed = seq_lt(editor_.to_client_ack(flow, flow.origin.ack), flow.client.held_seq);
  if (!ctx.held_ack_owed) editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kAck);
}

FrameResult FlowEngine::client_repeat(TcpFlow& flow, uint8_t* frame, FrameView& v, PacketSink& out) noexcept {
  if (flow.context < 0) return forward_frame(v);  // the origin has every judged byte before client.next
  ParseContext& ctx = lender_.context(flow);
  FrameResult r = forward_frame(v);
  if (ctx.buffering && seq_lt(flow.client.held_seq, v.seq + v.payload_len)) {
    // Bytes of a held head again: still held, and acknowledged again. What
    // comes before them goes on: the origin may have lost it.
    ack_held(flow, ctx, out);
    if (!seq_lt(v.seq, flow.client.held_seq)) return drop_frame(v);
    forward_prefix(frame, v, flow.client.held_seq - v.seq, r);
  }
  return judged_repeat(flow, frame, v, r);
}

FrameResult FlowEngine::judged_repeat(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r) noexcept {
  if (flow.context < 0) return r;
  ParseContext& ctx = lender_.context(flow);
  // The origin may not have taken the first copy (it dropped the segment:
  // a bad checksum, PAWS, a full window): the judged bytes go again, not
  // whatever this copy carries.
  char* payload = reinterpret_cast<char*>(frame + v.payload_offset);
  switch (ctx.judged.check(v.seq, {payload, v.payload_len})) {
    case RepeatCheck::kUnchanged:
      break;
    case RepeatCheck::kRewritten:
      counters_.repeats_rewritten.add();
      set_tcp_checksum(frame, v);
      break;
    case RepeatCheck::kUnverifiable:
      counters_.repeats_dropped.add();
      return drop_frame(v);
  }
  return r;
}

FrameResult FlowEngine::parse_requests(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                       Nanos now, PacketSink& out) noexcept {
  ParseContext& ctx = lender_.context(flow);
  RequestCursor cur = RequestPath::cursor(flow, ctx, v.seq);
  const bool scarce = lender_.contexts_scarce();
  for (;;) {
    const RequestPlan plan = requests_.parse(flow, ctx, snap, payload_of(frame, v), cur, scarce, now);
    if (plan.stop != RequestPlan::Stop::kReleaseHeld) return apply(flow, ctx, frame, v, plan, out);
    if (flow.bind.state == Binding::kBound) [[likely]] {
      editor_.release_held(flow, ctx, v, out);
    } else {
      stash_held(flow, ctx, v, now, out);
    }
  }
}

FrameResult FlowEngine::apply(TcpFlow& flow, ParseContext& ctx, uint8_t* frame, FrameView& v, const RequestPlan& plan,
                              PacketSink& out) noexcept {
  if ((plan.absorbed || plan.kept != 0) && editor_.keep_open(flow, ctx, plan, out) != EditOutcome::kDone) {
    return abort(flow, v, out);
  }
  if (flow.bind.state == Binding::kUnbound) [[unlikely]] {
    counters_.unbound_answers.add(plan.kept + (plan.stop == RequestPlan::Stop::kAnswerClose ? 1u : 0u));
  }
  FrameResult r = forward_frame(v);
  forward_prefix(frame, v, plan.forward_bytes, r);
  switch (plan.stop) {
    case RequestPlan::Stop::kEnd:
      lender_.give_back_if_done(flow);
      break;
    case RequestPlan::Stop::kHeld:
      ack_held(flow, ctx, out);
      break;
    case RequestPlan::Stop::kAnswerClose:
      sender_.answer_later(flow, ctx, plan);
      if (ctx.responses.outstanding() == 0) r.answer_after = &flow;
      break;
    case RequestPlan::Stop::kPassThrough:
      flow.state = FlowState::kPassThrough;
      lender_.give_back(flow);
      break;
    case RequestPlan::Stop::kReset:
      return abort(flow, v, out);
    case RequestPlan::Stop::kPaused:
    case RequestPlan::Stop::kReleaseHeld:
      break;
  }
  return r;
}

FrameResult FlowEngine::from_origin(TcpFlow* flow, uint8_t* frame, FrameView& v, uint32_t room, Nanos now,
                                    PacketSink& out) noexcept {
  if (flow == nullptr) return forward_frame(v);
  if (flow->bind.state != Binding::kBound) [[unlikely]] return unbound_origin(*flow, frame, v, now, out);
  if (flow->adoption.active && v.payload_len != 0 && seq_lt(v.seq, flow->origin.isn + 1)) [[unlikely]] {
    return adopted_too_late(*flow, v, out);
  }
  if (flow->context >= 0 && v.has(flag::kAck)) origin_acknowledged(*flow, v.ack, out);
  const uint32_t framed_before = flow->origin.next;
  if (flow->seqadj.active && room >= v.frame_len + 128) {
    // Where inserted fields would grow the segment: untouched buffer, so
    // start loading it while the response is framed.
    __builtin_prefetch(frame + v.frame_len, 1);
    __builtin_prefetch(frame + v.frame_len + 64, 1);
  }
  FrameResult r = origin_segment(*flow, frame, v, now, out);
  if (!flow->seqadj.active) {
    // (A proxied flow whose origin chose the cookie for its ISN: its clock
    // and window scale may still differ.)
    if (flow->proxy.active && r.action == FrameAction::kForward) SynProxy::to_client(*flow, frame, v);
    return r;
  }
  if (editor_.to_client(*flow, frame, v, room, framed_before, out, r) != EditOutcome::kDone) {
    return abort(*flow, v, out);
  }
  // Only now: the edits this segment carries needed the context.
  lender_.give_back_if_done(*flow);
  if (flow->proxy.active && r.action == FrameAction::kForward) SynProxy::to_client(*flow, frame, v);
  return r;
}

void FlowEngine::origin_acknowledged(TcpFlow& flow, uint32_t ack, PacketSink& out) noexcept {
  ParseContext& ctx = lender_.context(flow);
  StreamEditor::fold_removals(ctx, ack);
  const bool owed = ctx.buffering && ctx.held_ack_owed;
  if (ctx.judged.ranges() == 0 && !owed) return;
  const uint32_t acked = editor_.to_client_ack(flow, ack);
  // Judged bytes the origin now has need no record.
  ctx.judged.acknowledged(acked);
  if (owed && !seq_lt(acked, flow.client.held_seq)) {
    ctx.held_ack_owed = false;
    editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kAck);
  }
}

FrameResult FlowEngine::origin_segment(TcpFlow& flow, uint8_t* frame, FrameView& v, Nanos now,
                                       PacketSink& out) noexcept {
  if (v.has(flag::kSyn)) {
    if (flow.proxy.active) return proxied_synack(flow, frame, v, now, out);
    tracker_.origin_syn(flow, frame, v, now);
    return forward_frame(v);
  }
  if (flow.proxy.active && flow.state == FlowState::kSynSent) {
    // The origin's answer to a SYN the appliance sent: only its SYN-ACK
    // (above) or a refusal means anything.
    if (v.has(flag::kRst) && v.has(flag::kAck) && v.ack == flow.client.isn + 1) {
      counters_.syn_proxy_refused.add();
      proxy_.reset_client(flow, out);
      tracker_.reset(flow);
    }
    return drop_frame(v);
  }
  tracker_.origin_seen(flow, v, now);
  if (v.has(flag::kRst)) {
    if (flow.state == FlowState::kAnswered) return drop_frame(v);
    tracker_.reset(flow);
    return forward_frame(v);
  }
  // The origin's FIN counts where the flow is open both ways; a refusing
  // flow's answer is still to follow it.
  const bool closing =
      v.has(flag::kFin) && (flow.state == FlowState::kEstablished || flow.state == FlowState::kPassThrough);
  FrameResult r = forward_frame(v);
  switch (flow.state) {
    case FlowState::kEstablished:
    case FlowState::kRefusing:
      r = origin_data(flow, frame, v, now, out);
      break;
    case FlowState::kAnswered:
      sender_.reset_origin(flow, v, out);
      return drop_frame(v);
    default:
      break;
  }
  if (closing && r.action == FrameAction::kForward) tracker_.origin_fin(flow);
  return r;
}

FrameResult FlowEngine::origin_data(TcpFlow& flow, uint8_t* frame, FrameView& v, Nanos now, PacketSink& out) noexcept {
  const bool fin = v.has(flag::kFin);
  if (flow.context < 0) {
    // Nothing outstanding: bytes nobody asked for (an idle timeout's 408,
    // say) pass unframed.
    const uint32_t end = v.seq + v.payload_len;
    if (seq_lt(flow.origin.next, end) && seq_le(v.seq, flow.origin.next)) {
      flow.origin.next = end;
      flow.origin.progress = now;
    }
    if (fin) flow.origin.fin = true;
    return forward_frame(v);
  }
  if (v.payload_len != 0) {
    const Arrival a = counted_arrival(flow.origin.next, v, counters_);
    if (a == Arrival::kAhead) return drop_frame(v);
    if (a == Arrival::kRepeat) return forward_frame(v);
    flow.origin.progress = now;
  }
  ParseContext& ctx = lender_.context(flow);
  const ResponsePlan plan = responses_.frame(flow, ctx, v.seq, payload_of(frame, v), fin, now);
  if (plan.stop == ResponsePlan::Stop::kError) {
    // A response the appliance cannot frame (too long a head, too many
    // fields, obs-fold: an origin that reflects input can be made to send
    // one). Bridging the rest would let every later request on the
    // connection through unjudged: the client keeps what came before this
    // segment, then the connection ends.
    sender_.end_without_answer(flow, out);
    return drop_frame(v);
  }
  if (plan.points != 0) editor_.add_response_points(flow, ctx, plan);
  FrameResult r = forward_frame(v);
  if (plan.answer_due) r.answer_after = &flow;
  if (plan.stop == ResponsePlan::Stop::kPassThrough) {
    // The origin switched protocols (101, or 2xx to CONNECT) as the
    // policy allowed: the flow is bridged from here on.
    flow.state = FlowState::kPassThrough;
    lender_.give_back(flow);
    return r;
  }
  if (fin) flow.origin.fin = true;
  if (!flow.seqadj.active) lender_.give_back_if_done(flow);  // an edited flow's: from_origin(), after the edits
  return r;
}

FrameResult FlowEngine::abort(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  sender_.abort(flow, out);
  return drop_frame(v);
}

}  // namespace sluice::dataplane
