// The per-segment dispatcher: classify the frame, track TCP, run the request
// or response path, apply its plan through the stream editor, send. See
// flow_engine.h for the rooms and dataplane/README.md for a request's walk.
#include "flow_engine.h"

#include "segment_writer.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

namespace {

// Where a segment's payload stands against a stream read up to `next`
// (tcp_flow.h), repeats and gaps counted.
Arrival counted_arrival(uint32_t next, const FrameView& v, WorkerCounters& counters) noexcept {
  const Arrival a = arrival(next, v.seq, v.payload_len);
  if (a == Arrival::kRepeat) counters.retransmits.add();
  if (a == Arrival::kAhead) counters.out_of_order.add();
  return a;
}

}  // namespace

FlowEngine::FlowEngine(const EngineConfig& config, limiter::LimiterState& limiter, WorkerCounters& counters,
                       uint64_t trace_seed)
    : counters_(counters),
      marker_(config.mark),
      undo_(config.undo, config.max_head_bytes),
      shares_(config.flows, share_caps(config), config.share_seed),
      lender_(config.contexts, config.max_head_bytes, config.max_fields, config.edit_holds, config.bind_stashes,
              shares_, config.context_memory, config.hold_memory, config.head_memory, config.stash_memory,
              config.stash_slots, config.context_arena),
      answers_(config.answer_bytes, config.answer_memory, config.answers_written),
      delays_(config.delay_slots),
      proxy_(config.cookie_seed, emitter_, counters),
      adopter_(emitter_),
      tracker_(config.flows, config.flow_memory, config.timeouts, lender_, shares_, counters),
      editor_(lender_, answers_, emitter_, counters),
      sender_(lender_, editor_, answers_, emitter_, counters),
      requests_(limiter, lender_.contexts(), answers_, counters, trace_seed),
      responses_(limiter, counters),
      resets_(tracker_, editor_, counters),
      repeats_(lender_, editor_, counters),
      adoption_(tracker_, lender_, sender_, adopter_, counters),
      admission_(tracker_, lender_, sender_, requests_, resets_, adoption_, proxy_, forgotten_, counters),
      binder_(lender_, editor_, sender_, tracker_, emitter_, proxy_, adopter_, counters) {
  set_insert_fields(config.insert_fields);
  requests_.set_spend_log(config.spends);
  responses_.set_spend_log(config.spends);
  requests_.set_refusal_sampler(config.refusals);
  requests_.set_penalty_log(config.penalties);
  requests_.set_delay_queue(&delays_);
  lender_.set_in_flight(&limiter);
}

FlowEngine::Resumed FlowEngine::resume(const CarriedFlow& carried, uint64_t hash, const PolicySnapshot& snap,
                                       bool answers) noexcept {
  const TcpFlow& was = carried.flow;
  if (tracker_.find(was.key, hash) != nullptr) return Resumed::kDuplicate;
  // What it borrowed in the last process must have come along (flow_carry.h).
  if ((was.context >= 0 && carried.context == nullptr) || (was.hold >= 0 && !carried.hold)) {
    return Resumed::kCannotCarry;
  }
  TcpTracker::SynOutcome o = TcpTracker::SynOutcome::kTracked;
  TcpFlow* flow = tracker_.resume(was, hash, o);
  if (flow == nullptr) return o == TcpTracker::SynOutcome::kShareFull ? Resumed::kShareFull : Resumed::kTableFull;
  // Unbound behind the SYN proxy, with nothing stashed yet (flow_carry.h):
  // a stash waits for its first request again. Being bound: a stash takes
  // what the dead process had stashed, and the SYN goes to the origin again
  // at the sweep's first look (an answer to the last one may have come while
  // no process listened).
  if (flow->bind.state == Binding::kUnbound || (flow->bind.state == Binding::kBinding && was.stash >= 0)) {
    if (!lender_.take_stash(*flow)) {
      tracker_.erase(*flow);
      return Resumed::kNoStash;
    }
    if (carried.stash && !restash(*flow, *carried.stash)) {
      tracker_.erase(*flow);
      return Resumed::kCannotCarry;
    }
  }
  if (flow->bind.state == Binding::kBinding) flow->bind.syn_sent_at = 0;
  Lent lent = Lent::kYes;
  if (carried.context != nullptr) {
    lent = lender_.carry_context(*flow, snap, carried.context->view(), answers, carried.context->held_head);
  } else if (carried.hold) {
    lent = lender_.carry_hold(*flow, *carried.hold);
  }
  // A delayed head waits out the rest of its time in this process (a time
  // of the wall clock, which the restart did not stop).
  if (lent == Lent::kYes && flow->context >= 0 && lender_.context(*flow).delayed_until != 0 &&
      !delays_.push(DelayedHead{lender_.context(*flow).delayed_until, flow->key, flow->hash, flow->context})) {
    lender_.give_back(*flow);
    lent = Lent::kNoneFree;
  }
  switch (lent) {
    case Lent::kYes:
      return Resumed::kYes;
    case Lent::kNoneFree:
      tracker_.erase(*flow);
      return Resumed::kNoneFree;
    case Lent::kShareFull:
      tracker_.erase(*flow);
      return Resumed::kShareFull;
    case Lent::kCannotCarry:
      break;
  }
  tracker_.erase(*flow);
  return Resumed::kCannotCarry;
}

bool FlowEngine::release_delayed(Nanos now, PacketSink& out) noexcept {
  if (!delays_.due(now)) return false;
  const DelayedHead h = delays_.pop();
  counters_.delayed_waiting.store(delays_.size(), std::memory_order_relaxed);
  TcpFlow* flow = tracker_.find(h.key, h.hash);
  // Stale: the flow ended (or its context went to another) meanwhile.
  if (flow == nullptr || flow->context != h.context) return true;
  ParseContext& ctx = lender_.context(*flow);
  if (ctx.delayed_until != h.until) return true;
  marker_.flow(h.hash);
  undo_.save(flow, &ctx, flow->hold >= 0 ? &lender_.holds().at(flow->hold) : nullptr,
             flow->stash >= 0 ? &lender_.stashes().slot(flow->stash) : nullptr, marker_);
  ctx.delayed_until = 0;
  if (flow->bind.state == Binding::kBound) [[likely]] {
    editor_.release_held(*flow, ctx, flow->client.next, ctx.delay_ack, ctx.delay_window, out);
  } else {
    binder_.stash_held(*flow, ctx, flow->client.next, now, out);
  }
  ctx.head_len = 0;
  ctx.held_ack_owed = false;
  marker_.done();
  return true;
}

bool FlowEngine::restash(TcpFlow& flow, const CarriedStash& stash) noexcept {
  if (stash.bytes.empty()) return !stash.fin;
  return lender_.stash(flow, stash.start, stash.bytes) &&
         (!stash.fin || lender_.stash_fin(flow, stash.start + static_cast<uint32_t>(stash.bytes.size())));
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
  if (flow == nullptr) {
    undo_.save(nullptr, nullptr, nullptr, nullptr, marker_);
  } else {
    const ContextLender& lent = lender_;
    undo_.save(flow, flow->context >= 0 ? &lent.context(*flow) : nullptr,
               flow->hold >= 0 ? &lent.holds().at(flow->hold) : nullptr,
               flow->stash >= 0 ? &lent.stashes().slot(flow->stash) : nullptr, marker_);
  }
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
    return admission_.client_syn(flow, sf, frame, v, snap.policy, now, out);
  }
  if (flow == nullptr) {
    const Admission::Unknown u = admission_.unknown_client(sf, frame, v, snap.policy, now, out);
    if (u.flow == nullptr) return u.r;
    flow = u.flow;  // a handshake just completed, with bytes: taken as any segment of the flow
  } else if (v.has(flag::kRst)) {
    // Judged before anything of it is believed: a forged RST must not even
    // move the flow's timestamps.
    return resets_.on_rst(*flow, frame, v, now, out);
  }
  tracker_.client_seen(*flow, v, now);
  if (flow->adoption.active && flow->bind.state != Binding::kBound) [[unlikely]] {
    return Adoption::unproved(*flow, v, now);
  }

  const uint32_t parsed_before = flow->client.next;
  FrameResult r = client_segment(*flow, frame, v, snap, now, out);
  if (flow->seqadj.active && r.action == FrameAction::kForward) {
    if (editor_.to_origin(*flow, frame, v, parsed_before, out) != EditOutcome::kDone) return abort(*flow, v, out);
    lender_.give_back_if_done(*flow);
    r.frame_len = v.frame_len;
  }
  if (flow->bind.state != Binding::kBound) [[unlikely]] return binder_.client(*flow, frame, v, r, now, out);
  if (v.has(flag::kFin) && r.action == FrameAction::kForward) tracker_.client_fin(*flow);
  if (flow->proxy.active && r.action == FrameAction::kForward) SynProxy::to_origin(*flow, frame, v);
  // What it has read of the origin's stream: the acknowledgement as the
  // origin gets it (the edits' and the SYN proxy's numbers undone).
  if (r.action == FrameAction::kForward && v.has(flag::kAck) &&
      (flow->client.read_progress == 0 || seq_lt(flow->client.read_to, v.ack))) {
    flow->client.read_to = v.ack;
    flow->client.read_progress = now;
  }
  return r;
}

FrameResult FlowEngine::client_segment(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                       Nanos now, PacketSink& out) noexcept {
  switch (flow.state) {
    case FlowState::kSynSent:
      if (flow.proxy.active) return admission_.proxied_client(flow, v, now, out);
      return forward_frame(v);
    case FlowState::kSynReceived:
      if (!tracker_.established_by(flow, v)) return forward_frame(v);
      [[fallthrough]];
    case FlowState::kEstablished:
      return client_data(flow, frame, v, snap, now, out);
    case FlowState::kRefusing:
      return repeats_.while_refusing(flow, frame, v);
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
  if (v.payload_len == 0) {
    // A FIN behind a delayed head would reach the origin ahead of it: the
    // client sends it again.
    if (v.has(flag::kFin) && flow.context >= 0 && lender_.context(flow).delayed_until != 0) [[unlikely]] {
      return drop_frame(v);
    }
    return forward_frame(v);
  }
  if (v.has(flag::kUrg)) {
    // Urgent data: the origin's stack would take the byte before the urgent
    // pointer out of the stream it hands to the server, which would then read
    // other bytes than were judged. Sent as ordinary data, it is read in line.
    counters_.urgent_cleared.add();
    clear_urgent(frame, v);
  }
  const Arrival a = counted_arrival(flow.client.next, v, counters_);
  if (a == Arrival::kAhead) return drop_frame(v);
  if (a == Arrival::kRepeat) return repeats_.repeat(flow, frame, v, out);
  if (seq_lt(v.seq, flow.client.next)) {
    // Bytes already judged, then new ones. The judged copy is the one that
    // counts: the origin got it, or (a held head) gets it from the context,
    // never this segment's, which may differ. Only the new bytes go on.
    counters_.overlaps_trimmed.add();
    static_cast<void>(trim_front(frame, v, flow.client.next - v.seq));
  }
  if (flow.context < 0 && !admission_.lend_context(flow, snap, now, out)) return drop_frame(v);
  flow.client.progress = now;  // new bytes taken (a segment dropped for want of a context is not progress)
  return parse_requests(flow, frame, v, snap, now, out);
}

FrameResult FlowEngine::parse_requests(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                       Nanos now, PacketSink& out) noexcept {
  ParseContext& ctx = lender_.context(flow);
  RequestCursor cur = RequestPath::cursor(flow, ctx, v.seq);
  const bool scarce = lender_.contexts_scarce();
  for (;;) {
    const RequestPlan plan = requests_.parse(flow, ctx, snap, payload_chars(frame, v), cur, scarce, now);
    if (plan.stop != RequestPlan::Stop::kReleaseHeld) return apply(flow, ctx, frame, v, plan, out);
    if (flow.bind.state == Binding::kBound) [[likely]] {
      editor_.release_held(flow, ctx, v.seq, v.ack, v.window, out);
    } else {
      binder_.stash_held(flow, ctx, v.seq, now, out);
    }
  }
}

FrameResult FlowEngine::apply(TcpFlow& flow, ParseContext& ctx, uint8_t* frame, FrameView& v, const RequestPlan& plan,
                              PacketSink& out) noexcept {
  uint32_t forward_bytes = plan.forward_bytes;
  if (plan.strip != 0) [[unlikely]] {
    // The PROXY header leaves the stream to the origin: a removal at its
    // first byte (the stream's first edit). When nothing after it goes on
    // now, the segment goes as a bare acknowledgement and the header is
    // acknowledged to the client in the origin's name (a balancer that
    // sent it alone waits for that before its next bytes, with Nagle).
    if (!ctx.to_origin.add(flow.client.isn + 1, plan.strip, 0)) return abort(flow, v, out);
    flow.seqadj.active = true;
    if (forward_bytes <= plan.strip) {
      forward_bytes = 0;
      editor_.send_to_client(flow, out, flow.origin.next, flow.client.isn + 1 + plan.strip, flag::kAck);
    }
  }
  if ((plan.absorbed || plan.kept != 0) && editor_.keep_open(flow, ctx, plan, out) != EditOutcome::kDone) {
    return abort(flow, v, out);
  }
  if (flow.bind.state == Binding::kUnbound) [[unlikely]] {
    counters_.unbound_answers.add(plan.kept + (plan.stop == RequestPlan::Stop::kAnswerClose ? 1u : 0u));
  }
  FrameResult r = forward_frame(v);
  forward_prefix(frame, v, forward_bytes, r);
  switch (plan.stop) {
    case RequestPlan::Stop::kEnd:
      lender_.give_back_if_done(flow);
      break;
    case RequestPlan::Stop::kHeld:
      repeats_.ack_held(flow, ctx, out);
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
    case RequestPlan::Stop::kDelayed:
      ctx.delay_ack = v.ack;
      ctx.delay_window = v.window;
      repeats_.ack_held(flow, ctx, out);
      break;
    case RequestPlan::Stop::kPaused:
    case RequestPlan::Stop::kReleaseHeld:
      break;
  }
  return r;
}

FrameResult FlowEngine::from_origin(TcpFlow* flow, uint8_t* frame, FrameView& v, uint32_t room, Nanos now,
                                    PacketSink& out) noexcept {
  if (flow == nullptr) return forward_frame(v);
  if (flow->bind.state != Binding::kBound) [[unlikely]] return binder_.origin(*flow, frame, v, now, out);
  if (flow->adoption.active && v.payload_len != 0 && seq_lt(v.seq, flow->origin.isn + 1)) [[unlikely]] {
    // An adopted flow's origin sending bytes from before the adoption: the
    // client had not acknowledged all it was sent, so its numbers are wrong.
    counters_.adoption_failed.add();
    return abort(*flow, v, out);
  }
  if (flow->context >= 0 && v.has(flag::kAck)) repeats_.origin_acknowledged(*flow, v.ack, out);
  const uint32_t framed_before = flow->origin.next;
  // The client had read everything: what this segment brings is unread from now.
  if (!seq_lt(flow->client.read_to, framed_before)) flow->origin.unread_since = now;
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

FrameResult FlowEngine::origin_segment(TcpFlow& flow, uint8_t* frame, FrameView& v, Nanos now,
                                       PacketSink& out) noexcept {
  if (flow.proxy.active && (v.has(flag::kSyn) || flow.state == FlowState::kSynSent)) {
    return admission_.proxied_origin(flow, frame, v, now, out);
  }
  if (v.has(flag::kSyn)) {
    tracker_.origin_syn(flow, frame, v, now);
    return forward_frame(v);
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
  const ResponsePlan plan = responses_.frame(flow, ctx, v.seq, payload_chars(frame, v), fin, now);
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
