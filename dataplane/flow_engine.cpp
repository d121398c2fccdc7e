// Flow tracking and the per-segment state machine; see flow_engine.h for the
// choices behind it.
#include "flow_engine.h"

#include <algorithm>
#include <cstring>

#include "checksum.h"
#include "segment_rewrite.h"
#include "segment_writer.h"

namespace sluice::dataplane {

using time::Nanos;
namespace flag = tcp_flag;

bool service_frame(const FrameView& v, Side from, const std::bitset<65536>& ports, ServiceFrame& out) noexcept {
  if (v.kind != FrameKind::kTcp && v.kind != FrameKind::kTcpFragment) return false;
  out.from = from;
  if (from == Side::kClient) {
    if (!ports.test(v.dport)) return false;
    out.key = FlowKey{v.src, v.dst, v.sport, v.dport};
  } else {
    if (!ports.test(v.sport)) return false;
    out.key = FlowKey{v.dst, v.src, v.dport, v.sport};
  }
  out.hash = flow_hash(out.key);
  return true;
}

FlowEngine::FlowEngine(const EngineConfig& config, limiter::LimiterState& limiter, WorkerCounters& counters,
                       uint64_t trace_seed)
    : config_(config),
      limiter_(limiter),
      counters_(counters),
      flows_(config.flows),
      contexts_(config.contexts, config.max_head_bytes, config.max_fields),
      holds_(config.edit_holds),
      answers_(config.answer_bytes),
      scratch_(std::make_unique<limiter::DecisionScratch>()) {
  scratch_->trace_seed = trace_seed;
  // Big enough for a whole segment with every pending edit of a flow in it.
  edit_buf_ = std::make_unique<uint8_t[]>(65536 + SeqShift::kMaxEdits * kMaxAnswerBytes);
  set_insert_fields(config.insert_fields);
}

void FlowEngine::set_insert_fields(bool on) {
  config_.insert_fields = on;
  // Without insertion admitted responses pass unchanged: their fields need
  // not be rendered.
  scratch_->render_admitted_fields = on;
}

FrameResult FlowEngine::on_frame(const ServiceFrame& sf, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                 Nanos now, PacketSink& out) noexcept {
  counters_.service_frames.add();
  if (v.kind == FrameKind::kTcpFragment) {
    // A fragmented segment to a service port could carry a head past the
    // parser; without its first fragment the origin cannot reassemble it.
    counters_.fragments_dropped.add();
    return {FrameAction::kDrop, v.frame_len, nullptr};
  }
  TcpFlow* flow = flows_.find(sf.key, sf.hash);
  if (flow != nullptr && flow->hold >= 0) {
    if (sf.from == Side::kClient && v.has(flag::kAck) && holds_.at(flow->hold).acknowledged_by(v.ack)) {
      // The usual case, the client's next request acknowledging the last
      // response whole: the held edits are done with, unread.
      holds_.release(flow->hold);
      flow->hold = -1;
    } else if (!acquire_context(*flow, snap)) {
      // Its held edits need a context to act on; the sender tries again.
      counters_.contexts_exhausted.add();
      return {FrameAction::kDrop, v.frame_len, nullptr};
    }
  }
  if (sf.from == Side::kClient) return on_client(flow, sf, frame, v, snap, now, out);
  return on_origin(flow, frame, v, sf.room, now, out);
}

void FlowEngine::start_flow(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept {
  flow.state = FlowState::kSynSent;
  flow.ip_version = v.ip_version;
  flow.client_isn = v.seq;
  flow.client_mss = v.options.mss != 0 ? v.options.mss : 536;
  flow.timestamps = v.options.has_timestamp;
  flow.client_tsval = v.options.tsval;
  flow.l2_to_origin_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.l2_to_origin, frame, flow.l2_to_origin_len);
}

FrameResult FlowEngine::on_client(TcpFlow* flow, const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                                  const PolicySnapshot& snap, Nanos now, PacketSink& out) noexcept {
  const FrameResult forward{FrameAction::kForward, v.frame_len, nullptr};
  const FrameResult drop{FrameAction::kDrop, v.frame_len, nullptr};

  if (v.has(flag::kSyn)) {
    if (v.has(flag::kAck)) return forward;  // not a client's opening SYN
    if (flow != nullptr && flow->client_isn == v.seq) {
      // The SYN again (retransmitted, duplicated or replayed), in whatever
      // state the flow is: it changes nothing.
      flow->last_seen = now;
      return forward;
    }
    if (flow != nullptr && flow->state != FlowState::kSynSent && flow->state != FlowState::kSynReceived &&
        flow->state != FlowState::kClosed && flow->state != FlowState::kAnswered) {
      // A SYN with another sequence number on a live connection: the origin
      // answers it with a challenge ACK and keeps the connection (RFC 5961
      // 4.2), so the appliance keeps tracking it too. Starting over here
      // would let one stray SYN take a connection out of the limiter.
      flow->last_seen = now;
      return forward;
    }
    if (flow != nullptr) {
      // The client reuses the ports of a connection that is over (or whose
      // handshake it abandoned): a new connection, tracked from scratch.
      release_context(*flow);
      const FlowKey key = flow->key;
      const uint64_t hash = flow->hash;
      *flow = TcpFlow{};
      flow->key = key;
      flow->hash = hash;
    } else {
      flow = flows_.insert(sf.key, sf.hash);
      if (flow == nullptr) {
        counters_.flow_table_full.add();
        return drop;  // fail closed: an untracked connection would never be limited
      }
    }
    start_flow(*flow, frame, v);
    flow->last_seen = now;
    counters_.flows_created.add();
    return forward;
  }

  if (flow == nullptr) {
    if (v.payload_len == 0) return forward;
    counters_.untracked_reset.add();
    reset_untracked(frame, v, out);
    return drop;
  }

  flow->last_seen = now;
  // Timestamps only move forward: a late, older segment must not make the
  // appliance's own segments fail the peer's PAWS check (RFC 7323 5.3).
  if (v.options.has_timestamp && seq_lt(flow->client_tsval, v.options.tsval)) flow->client_tsval = v.options.tsval;

  if (v.has(flag::kRst)) {
    const bool answered = flow->state == FlowState::kAnswered;
    if (!answered && flow->stream_edited) rewrite_seq(frame, v, to_origin_seq(*flow, v.seq));
    flow->state = FlowState::kClosed;
    release_context(*flow);
    return answered ? drop : forward;  // after an answer the origin's socket is gone already
  }

  const uint32_t parsed_before = flow->client_next;
  FrameResult r = client_segment(*flow, frame, v, snap, now, out);
  if (flow->stream_edited && r.action == FrameAction::kForward) {
    to_origin_edited(*flow, frame, v, parsed_before, out);
    r.frame_len = v.frame_len;
  }
  if (v.has(flag::kFin) && r.action == FrameAction::kForward) {
    flow->client_fin = true;
    close_if_finished(*flow);
  }
  return r;
}

FrameResult FlowEngine::client_segment(TcpFlow& flow_ref, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                       Nanos now, PacketSink& out) noexcept {
  TcpFlow* flow = &flow_ref;
  const FrameResult forward{FrameAction::kForward, v.frame_len, nullptr};
  const FrameResult drop{FrameAction::kDrop, v.frame_len, nullptr};
  switch (flow->state) {
    case FlowState::kSynSent:
      return forward;
    case FlowState::kSynReceived:
      if (!v.has(flag::kAck) || v.ack != flow->origin_isn + 1) return forward;
      flow->state = FlowState::kEstablished;
      flow->client_next = flow->client_isn + 1;
      flow->origin_next = flow->origin_isn + 1;
      counters_.flows_established.add();
      [[fallthrough]];
    case FlowState::kEstablished:
      return client_data(*flow, frame, v, snap, now, out);
    case FlowState::kRefusing:
      // The answer waits for earlier responses: the client's acknowledgements
      // of those go through, nothing it sends after the refused request does.
      if (v.payload_len != 0 || v.has(flag::kFin)) return drop;
      return forward;
    case FlowState::kAnswered:
      return answered_client(*flow, v, out);
    case FlowState::kPassThrough:
    case FlowState::kClosed:
      return forward;
  }
  return forward;
}

FrameResult FlowEngine::client_data(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                    Nanos now, PacketSink& out) noexcept {
  FrameResult r{FrameAction::kForward, v.frame_len, nullptr};
  const uint32_t len = v.payload_len;
  const uint32_t end = v.seq + len;
  if (len == 0) {
    if (v.has(flag::kFin)) flow.client_fin = true;
    return r;
  }
  if (seq_le(end, flow.client_next)) {
    counters_.retransmits.add();
    if (flow.context >= 0 && contexts_.at(flow.context).buffering && seq_lt(flow.held_seq, end)) {
      // Bytes of a held head again: still held. Acknowledge them again.
      r.action = FrameAction::kDrop;
      send_to_client(flow, out, flow.origin_next, flow.client_next, flag::kAck, {});
    }
    return r;
  }
  if (seq_lt(flow.client_next, v.seq)) {
    counters_.out_of_order.add();
    r.action = FrameAction::kDrop;
    return r;
  }
  const uint32_t skip = flow.client_next - v.seq;
  if (flow.context < 0 && !acquire_context(flow, snap)) {
    counters_.contexts_exhausted.add();
    r.action = FrameAction::kDrop;
    return r;
  }
  ParseContext& ctx = contexts_.at(flow.context);
  // The policy a head is parsed and decided under: the one its context was
  // started with, which a reload in the middle of the head does not change
  // (its field ids are the ones the parsed head carries). Between messages a
  // context under a replaced policy moves to the current one, so pipelining
  // neither keeps a client on an old policy nor keeps that policy alive.
  auto follow_reload = [&] {
    if (ctx.generation != snap.generation && !ctx.buffering && ctx.requests->idle()) {
      contexts_.renew_requests(flow.context, snap.policy, snap.generation);
    }
  };
  follow_reload();
  const limiter::CompiledPolicy* policy = ctx.policy;
  http::RequestStream* rs = &*ctx.requests;
  const char* bytes = reinterpret_cast<const char*>(frame + v.payload_offset + skip);
  const uint32_t n = len - skip;
  uint32_t off = 0;
  // Where the head being parsed began in `bytes`, if it began in this segment.
  uint32_t head_start = 0;
  bool head_began_here = !ctx.buffering;

  // Cuts the segment at `at` bytes of its payload (the rest is the client's
  // to send again, or a refused request's), and stops parsing there.
  auto cut = [&](uint32_t at) noexcept {
    if (at == 0) {
      r.action = FrameAction::kDrop;
      return;
    }
    if (at < len) {
      frame[v.l4_offset + 13] &= static_cast<uint8_t>(~flag::kFin);  // a FIN after the cut is not sent
      r.frame_len = trim_payload(frame, v, at);
    }
  };
  auto refuse = [&](const limiter::Decision& d) noexcept {
    const size_t alen = std::min(d.response.size(), sizeof ctx.answer);
    std::memcpy(ctx.answer, d.response.data(), alen);
    ctx.answer_len = static_cast<uint16_t>(alen);
    const bool held = ctx.buffering;
    const uint32_t keep = held ? 0 : skip + (head_began_here ? head_start : 0);
    flow.answer_ack = end;
    flow.reset_seq = held ? flow.held_seq : v.seq + keep;
    flow.answer_len = static_cast<uint16_t>(alen);
    flow.client_next = end;
    flow.state = FlowState::kRefusing;
    ctx.buffering = false;
    cut(keep);
    if (ctx.responses.outstanding() == 0) r.answer_after = &flow;
  };
  // A refusal (or other answer) that keeps the connection open: the request's
  // bytes so far are cut out of the stream to the origin, the rest of them as
  // they come (absorbing), and the answer goes to the client once the
  // responses to the requests before it are out. False when the answer closes
  // the connection instead (the policy or the request says so, or the flow
  // has as many edits in flight as it can keep).
  auto keep_open = [&](const limiter::Decision& d) noexcept -> bool {
    // A kept-open answer holds its context until the client acknowledges
    // it; a client that never does (a flood of refused requests) would hold
    // every context until its flow expires. With a quarter of the pool left,
    // answers close the connection instead (which gives the context back).
    if (contexts_.free_count() < contexts_.size() / 4) return false;
    if (!d.keep_alive || ctx.kept_count == ctx.kept.size() || ctx.to_origin.pending() == SeqShift::kMaxEdits ||
        ctx.to_client.pending() + ctx.kept_unsent() >= SeqShift::kMaxEdits || d.response.empty()) {
      return false;
    }
    ParseContext::KeptAnswer a;
    a.from = ctx.buffering ? flow.held_seq : v.seq + skip + (head_began_here ? head_start : 0);
    a.to = v.seq + skip + off;
    if (!ctx.to_origin.add(a.from, a.to - a.from, 0)) return false;
    a.after = ctx.requests_forwarded;
    a.pos = answers_.put(d.response);
    a.len = static_cast<uint16_t>(std::min(d.response.size(), kMaxAnswerBytes));
    (void)ctx.push_kept(a);  // room checked above
    ctx.absorbing = true;
    ctx.buffering = false;
    ctx.head_len = 0;
    flow.stream_edited = true;
    counters_.answers_kept_open.add();
    if (ctx.responses_ended == a.after) {
      // Nothing before it is unanswered: it goes right after what the
      // origin has sent so far.
      send_kept_answers(flow, ctx, flow.origin_next, out);
    }
    return true;
  };
  // The refused request's bytes up to client sequence `upto` are cut out.
  auto absorbed_to = [&](uint32_t upto) noexcept {
    ParseContext::KeptAnswer& a = ctx.kept_at(ctx.kept_count - 1u);
    a.to = upto;
    ctx.to_origin.set_last_removed(upto - a.from);
  };

  const limiter::ConnectionFacts conn{flow.key.client, flow.key.origin, flow.key.origin_port};
  // Until the stream needs more bytes: it reports the end of a message
  // without a body (and a pending switch) on a call of its own.
  for (bool more = true; more;) {
    if (rs->idle() && off == n) break;
    if (rs->idle() && ctx.responses.outstanding() >= http::ResponseStream::kMaxOutstanding) {
      // Too many pipelined requests unanswered: hold the rest back, uncharged.
      counters_.backpressure.add();
      flow.client_next = v.seq + skip + off;
      cut(skip + off);
      return r;
    }
    std::span<const char> piece;
    if (ctx.buffering && off < n) {
      const size_t take = std::min<size_t>(ctx.head_capacity - ctx.head_len, n - off);
      if (take == 0) {
        counters_.parse_errors.add();
        refuse(limiter::answer_parse_error(*policy, http::ParseError::kHeadTooLarge, *scratch_));
        return r;
      }
      std::memcpy(ctx.head.get() + ctx.head_len, bytes + off, take);
      piece = {ctx.head.get() + ctx.head_len, take};
      ctx.head_len += take;
    } else if (!ctx.buffering) {
      piece = {bytes + off, n - off};
    }
    const http::StreamStep st = rs->next(piece);
    switch (st.event) {
      case http::StreamEvent::kNeedMore:
        if (!ctx.buffering && rs->head_in_progress()) {
          // The head goes on in the next segment, and its views point into
          // this one, which is forwarded now: feed it again from a copy.
          const size_t part = n - head_start;
          if (part >= ctx.head_capacity) {
            counters_.parse_errors.add();
            refuse(limiter::answer_parse_error(*policy, http::ParseError::kHeadTooLarge, *scratch_));
            return r;
          }
          std::memcpy(ctx.head.get(), bytes + head_start, part);
          ctx.head_len = part;
          ctx.buffering = true;
          head_began_here = false;
          flow.held_seq = v.seq + skip + head_start;
          rs->restart_head();
          const http::StreamStep again = rs->next({ctx.head.get(), part});
          if (again.event == http::StreamEvent::kError) {
            counters_.parse_errors.add();
            refuse(limiter::answer_parse_error(*policy, again.error, *scratch_));
            return r;
          }
          // Forward what came before the head; hold the head.
          cut(skip + head_start);
        } else if (ctx.buffering) {
          r.action = FrameAction::kDrop;  // all of it belongs to the held head
        }
        off = n;
        more = false;
        if (ctx.buffering) {
          flow.client_next = end;
          send_to_client(flow, out, flow.origin_next, flow.client_next, flag::kAck, {});
          return r;
        }
        break;
      case http::StreamEvent::kHead: {
        off += static_cast<uint32_t>(st.consumed);
        counters_.requests.add();
        const limiter::Decision d = limiter::decide(*policy, limiter_, rs->head(), conn, now, *scratch_);
        if (ctx.buffering && d.verdict != limiter::Verdict::kRefuse && d.verdict != limiter::Verdict::kAnswer) {
          // The held part goes to the origin ahead of this segment.
          release_held(flow, ctx, v, v.seq, out);
          ctx.buffering = false;
        }
        ctx.head_len = 0;
        switch (d.verdict) {
          case limiter::Verdict::kForward:
            counters_.forwarded.add();
            break;
          case limiter::Verdict::kExempt:
            counters_.exempt.add();
            break;
          case limiter::Verdict::kAdmit:
            counters_.admitted.add();
            if (d.shadow_refusal) counters_.shadow_refusals.add();
            count_admitted(d);
            break;
          case limiter::Verdict::kRefuse:
            counters_.refused.add();
            count_refused(d);
            if (keep_open(d)) continue;
            refuse(d);
            return r;
          case limiter::Verdict::kAnswer:
            counters_.answered.add();
            if (d.rule >= 0) counters_.rules[rule_slot(d.rule)].answered.add();
            if (keep_open(d)) continue;
            refuse(d);
            return r;
        }
        // Room was checked when this head began.
        (void)ctx.responses.expect(http::request_kind(rs->head()));
        ++ctx.requests_forwarded;
        ctx.push_usage(d);
        if (config_.insert_fields) {
          const bool fields = d.verdict == limiter::Verdict::kAdmit && !d.fields.empty();
          if (fields && d.fields.size() > kMaxInsertedFields) counters_.fields_skipped.add();
          ctx.push_response_fields(fields ? d.fields : std::string_view());
        }
        break;
      }
      case http::StreamEvent::kMessageEnd:
        off += static_cast<uint32_t>(st.consumed);
        if (ctx.absorbing) {
          absorbed_to(v.seq + skip + off);
          ctx.absorbing = false;
        }
        head_start = off;
        head_began_here = true;
        follow_reload();
        policy = ctx.policy;
        rs = &*ctx.requests;
        break;
      case http::StreamEvent::kAwaitSwitch:
        // Nothing after an Upgrade or CONNECT request goes through until the
        // origin has said whether it switches.
        off += static_cast<uint32_t>(st.consumed);
        flow.client_next = v.seq + skip + off;
        cut(skip + off);
        return r;
      case http::StreamEvent::kPassThrough:
        counters_.pass_through.add();
        flow.state = FlowState::kPassThrough;
        release_context(flow);
        return r;
      case http::StreamEvent::kError:
        counters_.parse_errors.add();
        refuse(limiter::answer_parse_error(*policy, st.error, *scratch_));
        return r;
    }
  }
  if (ctx.absorbing) absorbed_to(end);
  flow.client_next = end;
  if (v.has(flag::kFin)) flow.client_fin = true;
  maybe_release_context(flow);
  return r;
}

FrameResult FlowEngine::on_origin(TcpFlow* flow, uint8_t* frame, FrameView& v, uint32_t room, Nanos now,
                                  PacketSink& out) noexcept {
  const uint32_t framed_before = flow != nullptr ? flow->origin_next : 0;
  if (flow != nullptr && flow->stream_edited && room >= v.frame_len + 128) {
    // Where inserted fields would grow the segment: untouched buffer, so
    // start loading it while the response is framed.
    __builtin_prefetch(frame + v.frame_len, 1);
    __builtin_prefetch(frame + v.frame_len + 64, 1);
  }
  const FrameResult r = origin_segment(flow, frame, v, now, out);
  if (flow == nullptr || !flow->stream_edited) return r;
  const FrameResult edited = to_client_edited(*flow, frame, v, room, r, framed_before, out);
  // Only now: the edits this segment carries needed the context.
  maybe_release_context(*flow);
  return edited;
}

FrameResult FlowEngine::origin_segment(TcpFlow* flow, uint8_t* frame, FrameView& v, Nanos now,
                                       PacketSink& out) noexcept {
  const FrameResult forward{FrameAction::kForward, v.frame_len, nullptr};
  const FrameResult drop{FrameAction::kDrop, v.frame_len, nullptr};
  if (flow == nullptr) return forward;
  flow->last_seen = now;

  if (v.has(flag::kSyn)) {
    if (v.has(flag::kAck) && flow->state == FlowState::kSynSent && v.ack == flow->client_isn + 1) {
      flow->origin_isn = v.seq;
      flow->origin_ack = v.ack;
      flow->origin_tsval = v.options.tsval;
      flow->origin_window = v.window;
      flow->origin_mss = v.options.mss != 0 ? v.options.mss : 536;
      flow->state = FlowState::kSynReceived;
      flow->timestamps = flow->timestamps && v.options.has_timestamp;
      flow->l2_to_client_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
      std::memcpy(flow->l2_to_client, frame, flow->l2_to_client_len);
    }
    return forward;
  }
  if (v.options.has_timestamp && seq_lt(flow->origin_tsval, v.options.tsval)) flow->origin_tsval = v.options.tsval;
  if (!seq_lt(v.seq, flow->origin_next)) flow->origin_window = v.window;  // not from a late, older segment
  if (v.has(flag::kAck) && seq_lt(flow->origin_ack, v.ack)) flow->origin_ack = v.ack;
  if (v.has(flag::kRst)) {
    if (flow->state == FlowState::kAnswered) return drop;
    flow->state = FlowState::kClosed;
    release_context(*flow);
    return forward;
  }
  if (v.has(flag::kFin) && (flow->state == FlowState::kEstablished || flow->state == FlowState::kPassThrough)) {
    const FrameResult r = flow->state == FlowState::kEstablished ? origin_data(*flow, frame, v, now) : forward;
    if (r.action == FrameAction::kForward) {
      flow->origin_fin = true;
      close_if_finished(*flow);
    }
    return r;
  }
  switch (flow->state) {
    case FlowState::kEstablished:
    case FlowState::kRefusing:
      return origin_data(*flow, frame, v, now);
    case FlowState::kAnswered:
      // The origin did not take the RST (it expected another sequence number
      // and sent a challenge ACK, RFC 5961 3.2), or it is retransmitting: its
      // acknowledgement number is exactly what it expects next.
      if (v.has(flag::kAck)) send_to_origin(*flow, out, v.ack, v.seq + v.payload_len, flag::kRst);
      return drop;
    default:
      return forward;
  }
}

FrameResult FlowEngine::origin_data(TcpFlow& flow, uint8_t* frame, FrameView& v, Nanos now) noexcept {
  FrameResult r{FrameAction::kForward, v.frame_len, nullptr};
  const uint32_t len = v.payload_len;
  const uint32_t end = v.seq + len;
  const bool refusing = flow.state == FlowState::kRefusing;
  if (flow.context < 0) {
    // Nothing outstanding: bytes nobody asked for (an idle timeout's 408,
    // say) pass unframed.
    if (seq_lt(flow.origin_next, end) && seq_le(v.seq, flow.origin_next)) flow.origin_next = end;
    if (v.has(flag::kFin)) flow.origin_fin = true;
    return r;
  }
  ParseContext& ctx = contexts_.at(flow.context);
  if (len != 0) {
    if (seq_le(end, flow.origin_next)) {
      counters_.retransmits.add();
      return r;
    }
    if (seq_lt(flow.origin_next, v.seq)) {
      counters_.out_of_order.add();
      r.action = FrameAction::kDrop;
      return r;
    }
    const uint32_t skip = flow.origin_next - v.seq;
    const char* bytes = reinterpret_cast<const char*>(frame + v.payload_offset + skip);
    const size_t n = len - skip;
    size_t off = 0;
    for (;;) {
      const http::ResponseStep st = ctx.responses.next({bytes + off, n - off});
      off += st.consumed;
      if (st.event == http::ResponseEvent::kNeedMore) break;
      if (st.event == http::ResponseEvent::kHead) continue;
      if (st.event == http::ResponseEvent::kStatusLine) {
        // A final response's fields go right after its status line (not an
        // interim 1xx's; a 101 leaves HTTP and gets none).
        const uint16_t code = ctx.responses.status_line_code();
        if (code < 200 && code != 101) continue;
        const FieldText* fields = ctx.take_response_fields();
        if (fields == nullptr || fields->len == 0 || code == 101) continue;
        // Kept answers not yet spliced in have their room reserved.
        if (ctx.to_client.pending() + (ctx.kept_count != 0 ? ctx.kept_unsent() : 0u) >= SeqShift::kMaxEdits ||
            !ctx.to_client.add(v.seq + skip + static_cast<uint32_t>(off), 0, fields->len)) {
          counters_.fields_skipped.add();
          continue;
        }
        ParseContext::EditBytes& e = ctx.edit_bytes[ctx.to_client.pending() - 1];
        e.fields.assign(fields->view());
        e.answer_len = 0;
        flow.stream_edited = true;
        counters_.fields_inserted.add();
        continue;
      }
      if (st.event == http::ResponseEvent::kResponseEnd) {
        // DQ05: the tokens the origin reported for the request, charged to
        // its minute now that it has ended.
        const ParseContext::UsageNote* usage = ctx.take_usage();
        if (usage != nullptr && usage->charge && ctx.responses.head().has_usage) {
          limiter::report_usage(limiter_, usage->key, ctx.responses.head().usage, now);
          counters_.usage_reported.add();
        }
        // Kept answers to requests refused after this one go right after it,
        // in this segment (written again with them, like inserted fields).
        ++ctx.responses_ended;
        if (ctx.kept_count != 0) splice_kept_answers(ctx, v.seq + skip + static_cast<uint32_t>(off));
        if (ctx.responses.outstanding() == 0) {
          ctx.requests->resolve_switch(false);
          if (refusing) r.answer_after = &flow;
        }
        continue;
      }
      if (st.event == http::ResponseEvent::kPassThrough) {
        counters_.pass_through.add();
        ctx.requests->resolve_switch(true);
        flow.state = FlowState::kPassThrough;
        flow.origin_next = end;
        release_context(flow);
        return r;
      }
      // kError: the responses cannot be framed; the flow is bridged from
      // here on. A pending answer goes out now rather than never.
      counters_.response_errors.add();
      flow.origin_next = end;
      if (refusing) {
        r.answer_after = &flow;
      } else {
        flow.state = FlowState::kPassThrough;
        release_context(flow);
      }
      return r;
    }
    flow.origin_next = end;
  }
  if (v.has(flag::kFin)) {
    flow.origin_fin = true;
    const http::ResponseStep st = ctx.responses.close();
    if (refusing && (st.event == http::ResponseEvent::kResponseEnd || st.event == http::ResponseEvent::kError)) {
      r.answer_after = &flow;
    }
  }
  if (!flow.stream_edited) maybe_release_context(flow);  // an edited flow's: on_origin(), after the edits
  return r;
}

void FlowEngine::count_admitted(const limiter::Decision& d) noexcept {
  if (d.rule < 0) return;  // kAdmit and kRefuse always name their rule
  counters_.rules[rule_slot(d.rule)].admitted.add();
  // Only one admission in 16 is offered to the busiest keys, weighted 16:
  // the admitted path stays a counter increment most of the time, and a key
  // busy enough to matter is sampled often enough to show.
  if ((++admissions_ & (kAdmissionSample - 1)) == 0) {
    counters_.busy.record(static_cast<uint16_t>(d.rule), d.label, kAdmissionSample);
  }
}

void FlowEngine::count_refused(const limiter::Decision& d) noexcept {
  if (d.rule < 0) return;
  counters_.rules[rule_slot(d.rule)].refused.add();
  counters_.busy.record(static_cast<uint16_t>(d.rule), d.label, 1);
}

void FlowEngine::release_held(TcpFlow& flow, const ParseContext& ctx, const FrameView& v, uint32_t upto,
                              PacketSink& out) noexcept {
  if (!seq_lt(flow.held_seq, upto)) return;
  const uint32_t count = upto - flow.held_seq;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(ctx.head.get());
  size_t mss = flow.origin_mss;
  if (flow.timestamps) mss = mss > kTimestampOptionBytes ? mss - kTimestampOptionBytes : 1;
  for (uint32_t off = 0; off < count;) {
    const uint32_t chunk = static_cast<uint32_t>(std::min<size_t>(mss, count - off));
    send_to_origin(flow, out, to_origin_seq(flow, flow.held_seq + off), to_origin_ack(flow, v.ack), flag::kAck,
                   {bytes + off, chunk}, v.window);
    off += chunk;
  }
}

FrameResult FlowEngine::answered_client(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  if (v.payload_len != 0 && seq_lt(v.seq, flow.answer_ack)) {
    // The refused request again: its answer was lost. Same answer, no charge.
    counters_.answers_resent.add();
    emit_answer(flow, out);
  }
  if (v.has(flag::kFin)) {
    send_to_client(flow, out, flow.answer_seq + flow.answer_len + 1, v.seq + v.payload_len + 1, flag::kAck, {});
  }
  return {FrameAction::kDrop, v.frame_len, nullptr};
}

void FlowEngine::send_answer(TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.state != FlowState::kRefusing) return;
  if (flow.origin_fin) {
    // The origin closed first: the client has its FIN and cannot take an
    // answer after it. Release the origin's socket and stop.
    counters_.answers_abandoned.add();
    send_to_origin(flow, out, to_origin_seq(flow, flow.reset_seq), flow.origin_next, flag::kRst | flag::kAck);
    flow.state = FlowState::kClosed;
    release_context(flow);
    return;
  }
  flow.answer_seq = flow.origin_next;
  // The context's work is done: the answer moves to the store, so a refused
  // flow waiting for its client's FIN holds no buffers.
  const ParseContext& ctx = contexts_.at(flow.context);
  flow.answer_pos = answers_.put({ctx.answer, ctx.answer_len});
  flow.answer_len = ctx.answer_len;
  release_context(flow);
  emit_answer(flow, out);
  send_to_origin(flow, out, to_origin_seq(flow, flow.reset_seq), flow.origin_next, flag::kRst | flag::kAck);
  flow.state = FlowState::kAnswered;
  counters_.answers_sent.add();
}

void FlowEngine::emit_answer(TcpFlow& flow, PacketSink& out) noexcept {
  const std::span<const char> answer = answers_.get(flow.answer_pos, flow.answer_len);
  if (answer.empty()) {
    // Overwritten by newer answers: the client learns the connection is over.
    counters_.answers_lost.add();
    send_to_client(flow, out, flow.answer_seq, flow.answer_ack, flag::kRst | flag::kAck, {});
    return;
  }
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(answer.data());
  const size_t total = answer.size();
  size_t mss = flow.client_mss;
  if (flow.timestamps) mss = mss > kTimestampOptionBytes ? mss - kTimestampOptionBytes : 1;
  if (mss == 0) mss = 1;
  size_t off = 0;
  do {
    const size_t chunk = std::min(mss, total - off);
    const bool last = off + chunk == total;
    const uint8_t flags = static_cast<uint8_t>(flag::kAck | flag::kPsh | (last ? flag::kFin : 0));
    send_to_client(flow, out, flow.answer_seq + static_cast<uint32_t>(off), flow.answer_ack, flags,
                   {bytes + off, chunk});
    off += chunk;
  } while (off < total);
}

namespace {

// A segment in the name of one end of `flow` (`from`), towards the other:
// its frame header as that end's frames carry it, its addresses and ports,
// and its latest timestamp echoing the other end's.
SegmentSpec segment_from(const TcpFlow& flow, Side from) noexcept {
  SegmentSpec s;
  const bool origin = from == Side::kOrigin;
  s.l2 = origin ? std::span<const uint8_t>(flow.l2_to_client, flow.l2_to_client_len)
                : std::span<const uint8_t>(flow.l2_to_origin, flow.l2_to_origin_len);
  s.ip_version = flow.ip_version;
  s.src = origin ? flow.key.origin : flow.key.client;
  s.dst = origin ? flow.key.client : flow.key.origin;
  s.sport = origin ? flow.key.origin_port : flow.key.client_port;
  s.dport = origin ? flow.key.client_port : flow.key.origin_port;
  s.timestamp = flow.timestamps;
  s.tsval = origin ? flow.origin_tsval : flow.client_tsval;
  s.tsecr = origin ? flow.client_tsval : flow.origin_tsval;
  return s;
}

}  // namespace

void FlowEngine::emit(PacketSink& out, Side to, SegmentSpec& s) noexcept {
  s.ip_id = ip_id_++;
  std::span<uint8_t> buf = out.allocate(to, segment_size(s));
  if (buf.empty()) return;  // no buffer: as if lost, TCP recovers
  out.send(to, write_segment(buf, s));
}

void FlowEngine::send_to_client(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                                std::span<const uint8_t> payload) noexcept {
  // The engine speaks in the origin's numbers.
  send_in_client_numbers(flow, out, to_client_seq(flow, seq), ack, flags, payload);
}

void FlowEngine::send_in_client_numbers(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                                        std::span<const uint8_t> payload) noexcept {
  SegmentSpec s = segment_from(flow, Side::kOrigin);
  s.seq = seq;
  s.ack = capped_ack(flow, ack);
  s.flags = flags;
  s.window = flow.origin_window;
  s.payload = payload;
  emit(out, Side::kClient, s);
}

void FlowEngine::send_to_origin(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                                std::span<const uint8_t> payload, uint16_t window) noexcept {
  SegmentSpec s = segment_from(flow, Side::kClient);
  s.seq = seq;
  s.ack = ack;
  s.flags = flags;
  s.window = window;
  s.payload = payload;
  emit(out, Side::kOrigin, s);
}

void FlowEngine::reset_untracked(const uint8_t* frame, const FrameView& v, PacketSink& out) noexcept {
  uint8_t l2[kMaxL2Header];
  const size_t l2_len = std::min<size_t>(v.l3_offset, kMaxL2Header);
  std::memcpy(l2, frame, l2_len);
  SegmentSpec s;
  s.ip_version = v.ip_version;
  // To the origin, as if from the client: the frame's own addresses.
  s.l2 = {l2, l2_len};
  s.src = v.src;
  s.dst = v.dst;
  s.sport = v.sport;
  s.dport = v.dport;
  s.seq = v.seq;
  s.flags = flag::kRst;
  emit(out, Side::kOrigin, s);
  // To the client, as if from the origin: MACs and addresses swapped.
  uint8_t swapped[kMaxL2Header];
  std::memcpy(swapped, l2, l2_len);
  std::memcpy(swapped, l2 + 6, 6);
  std::memcpy(swapped + 6, l2, 6);
  s.l2 = {swapped, l2_len};
  s.src = v.dst;
  s.dst = v.src;
  s.sport = v.dport;
  s.dport = v.sport;
  s.seq = v.has(flag::kAck) ? v.ack : 0;
  s.ack = v.seq + v.payload_len;
  s.flags = flag::kRst | flag::kAck;
  emit(out, Side::kClient, s);
}

void FlowEngine::close_if_finished(TcpFlow& flow) noexcept {
  // Both sides have closed: keep the flow only briefly, for the last ACKs.
  if (flow.client_fin && flow.origin_fin &&
      (flow.state == FlowState::kEstablished || flow.state == FlowState::kPassThrough)) {
    flow.state = FlowState::kClosed;
    release_context(flow);
  }
}

bool FlowEngine::acquire_context(TcpFlow& flow, const PolicySnapshot& snap) noexcept {
  flow.context = contexts_.acquire();
  if (flow.context < 0) return false;
  contexts_.start(flow.context, snap.policy, snap.generation);
  ParseContext& fresh = contexts_.at(flow.context);
  fresh.to_client.reset(flow.to_client_base);
  fresh.to_origin.reset(flow.to_origin_base);
  fresh.responses.report_status_lines(config_.insert_fields);
  if (flow.hold >= 0) {
    holds_.at(flow.hold).restore(fresh.to_client, fresh.edit_bytes);
    holds_.release(flow.hold);
    flow.hold = -1;
  }
  return true;
}

void FlowEngine::release_context(TcpFlow& flow) noexcept {
  if (flow.hold >= 0) {
    holds_.release(flow.hold);
    flow.hold = -1;
  }
  if (flow.context < 0) return;
  // What the edits so far shift the rest of the flow by.
  flow.to_client_base = static_cast<uint32_t>(contexts_.at(flow.context).to_client.total_shift());
  flow.to_origin_base = static_cast<uint32_t>(contexts_.at(flow.context).to_origin.total_shift());
  contexts_.release(flow.context);
  flow.context = -1;
}

void FlowEngine::maybe_release_context(TcpFlow& flow) noexcept {
  if (flow.context < 0 || flow.state != FlowState::kEstablished) return;
  const ParseContext& ctx = contexts_.at(flow.context);
  // An edit the client has not acknowledged keeps the context: a
  // retransmission of its segment must be written again the same way.
  // Nor does a kept answer the client does not have yet; and once requests
  // have been cut out, the origin must have acknowledged everything the
  // client sent (a late copy of a cut request, renumbered by the base shift
  // alone, then lands on bytes the origin has and drops).
  if (!ctx.requests->idle() || ctx.responses.outstanding() != 0 || !ctx.responses.at_boundary() ||
      ctx.kept_count != 0 || ctx.absorbing ||
      (ctx.to_origin.pending() != 0 && seq_lt(flow.origin_ack, ctx.to_origin.forward(flow.client_next)))) {
    return;
  }
  if (ctx.to_client.pending() == 0) {
    release_context(flow);
    return;
  }
  // Only fields the client has yet to acknowledge: they move to a hold, and
  // the context goes back while the flow waits for its next request.
  if (ctx.to_origin.pending() != 0 || !EditHold::fits(ctx.to_client, ctx.edit_bytes)) return;
  const int32_t h = holds_.acquire();
  if (h < 0) return;
  holds_.at(h).keep(ctx.to_client, ctx.edit_bytes);
  release_context(flow);
  flow.hold = h;
}

uint32_t FlowEngine::to_client_seq(const TcpFlow& flow, uint32_t origin_seq) noexcept {
  if (!flow.stream_edited) return origin_seq;
  if (flow.context >= 0) return contexts_.at(flow.context).to_client.forward(origin_seq);
  return origin_seq + flow.to_client_base;
}

uint32_t FlowEngine::to_origin_seq(const TcpFlow& flow, uint32_t client_seq) noexcept {
  if (!flow.stream_edited) return client_seq;
  if (flow.context >= 0) return contexts_.at(flow.context).to_origin.forward(client_seq);
  return client_seq + flow.to_origin_base;
}

uint32_t FlowEngine::capped_ack(const TcpFlow& flow, uint32_t client_ack) noexcept {
  if (!flow.stream_edited || flow.context < 0) return client_ack;
  uint32_t cap = 0;
  if (contexts_.at(flow.context).ack_cap(cap) && seq_lt(cap, client_ack)) return cap;
  return client_ack;
}

uint32_t FlowEngine::to_client_ack(const TcpFlow& flow, uint32_t origin_ack) noexcept {
  if (!flow.stream_edited) return origin_ack;
  if (flow.context < 0) return origin_ack - flow.to_origin_base;
  return capped_ack(flow, contexts_.at(flow.context).to_origin.backward(origin_ack));
}

uint32_t FlowEngine::to_origin_ack(const TcpFlow& flow, uint32_t client_ack) noexcept {
  if (!flow.stream_edited) return client_ack;
  if (flow.context >= 0) return contexts_.at(flow.context).to_client.backward(client_ack);
  return client_ack - flow.to_client_base;
}

namespace {

// Whether the bytes inserted at `at` go out with the origin segment [seq,
// end): the segment they follow the end of does; so does a retransmission
// that starts right at them, since the client may hold only part of them (a
// split segment's first half) and acknowledges no further until it has the
// rest. A fresh segment that starts there follows bytes already sent.
bool carries_edit(uint32_t at, uint32_t seq, uint32_t end, uint32_t framed_before) noexcept {
  if (!seq_le(at, end)) return false;
  return seq_lt(seq, at) || (seq == at && seq_lt(seq, framed_before));
}

}  // namespace

FrameResult FlowEngine::to_client_edited(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room, FrameResult r,
                                         uint32_t framed_before, PacketSink& out) noexcept {
  if (r.action != FrameAction::kForward || v.has(flag::kSyn)) return r;
  if (flow.context >= 0 && v.payload_len != 0) {
    const SeqShift& shift = contexts_.at(flow.context).to_client;
    const uint32_t end = v.seq + v.payload_len;
    for (unsigned i = 0; i < shift.pending(); ++i) {
      if (carries_edit(shift.edit(i).at, v.seq, end, framed_before)) {
        // The segment (or its retransmission) the fields or a kept answer go
        // into: grown in place, or written again with them (cut to the
        // client's MSS) and the original dropped.
        if (edit_in_place(flow, frame, v, room, framed_before)) {
          r.frame_len = v.frame_len;
          return r;
        }
        emit_with_fields(flow, frame, v, framed_before, out);
        r.action = FrameAction::kDrop;
        return r;
      }
    }
  }
  rewrite_seq(frame, v, to_client_seq(flow, v.seq));
  if (v.has(flag::kAck)) {
    // Requests cut out of the client's stream: the origin's acknowledgement
    // and SACK edges in the client's numbers.
    rewrite_ack(frame, v, to_client_ack(flow, v.ack));
    SeqShift base;
    const SeqShift* shift = &base;
    if (flow.context >= 0) shift = &contexts_.at(flow.context).to_origin;
    else base.reset(flow.to_origin_base);
    if (!shift->empty()) static_cast<void>(rewrite_sack(frame, v, *shift));
  }
  return r;
}

void FlowEngine::to_origin_edited(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t parsed_before,
                                  PacketSink& out) noexcept {
  if (flow.context < 0) {
    if (flow.to_origin_base != 0) rewrite_seq(frame, v, v.seq + flow.to_origin_base);
    SeqShift base;
    base.reset(flow.to_client_base);
    shift_client_segment(frame, v, base);
    return;
  }
  ParseContext& ctx = contexts_.at(flow.context);
  const unsigned kept_before = ctx.kept_count;
  if (v.has(flag::kAck)) ctx.acknowledged_by_client(v.ack);
  bool answered = false;
  uint32_t cut = 0;
  if (!ctx.to_origin.empty()) {
    if (v.payload_len != 0 && seq_lt(v.seq, parsed_before)) {
      // Bytes the client sends again: if they belong to a request whose kept
      // answer it does not acknowledge, the answer was lost.
      const uint32_t end = v.seq + v.payload_len;
      answered = resend_kept_answers(flow, ctx, v.seq, seq_lt(end, parsed_before) ? end : parsed_before, out);
    }
    cut = cut_removed(frame, v, ctx.to_origin);
  }
  shift_client_segment(frame, v, ctx.to_client);
  // The client has a kept answer whole (its request may be acknowledged now),
  // or sent bytes of a refused request, which only the appliance can
  // acknowledge (unless the answer it lacks holds the acknowledgement back:
  // then it comes when the answer is acknowledged).
  uint32_t cap = 0;
  const bool held_back = ctx.ack_cap(cap);
  if (!answered && (ctx.kept_count < kept_before || (cut != 0 && !held_back))) {
    send_to_client(flow, out, flow.origin_next, to_client_ack(flow, flow.origin_ack), flag::kAck, {});
  }
  maybe_release_context(flow);
}

std::span<const char> FlowEngine::edit_bytes(const ParseContext& ctx, unsigned i) const noexcept {
  const ParseContext::EditBytes& e = ctx.edit_bytes[i];
  if (e.answer_len != 0) return answers_.get(e.answer_pos, e.answer_len);
  return {e.fields.bytes, e.fields.len};
}

void FlowEngine::emit_with_fields(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t framed_before,
                                  PacketSink& out) noexcept {
  const ParseContext& ctx = contexts_.at(flow.context);
  const SeqShift& shift = ctx.to_client;
  const uint8_t* payload = frame + v.payload_offset;
  const uint32_t len = v.payload_len;
  uint8_t* buf = edit_buf_.get();
  size_t n = 0;
  uint32_t pos = 0;
  const uint32_t start = edited_start(shift, v, framed_before);
  for (unsigned i = 0; i < shift.pending(); ++i) {
    const uint32_t at = shift.edit(i).at;
    if (!carries_edit(at, v.seq, v.seq + len, framed_before)) continue;
    const std::span<const char> text = edit_bytes(ctx, i);
    if (text.size() != shift.edit(i).inserted) {
      // A kept answer overwritten in the answer store while the client still
      // lacked it: the stream cannot be written again the same way.
      counters_.answers_lost.add();
      abort_flow(flow, out);
      return;
    }
    const uint32_t k = at - v.seq;
    std::memcpy(buf + n, payload + pos, k - pos);
    n += k - pos;
    pos = k;
    std::memcpy(buf + n, text.data(), text.size());
    n += text.size();
  }
  std::memcpy(buf + n, payload + pos, len - pos);
  n += len - pos;
  const uint32_t ack = to_client_ack(flow, v.ack);
  // Cut to what the client accepts, as the origin would have.
  size_t mss = flow.client_mss;
  if (flow.timestamps) mss = mss > kTimestampOptionBytes ? mss - kTimestampOptionBytes : 1;
  for (size_t off = 0; off < n;) {
    const size_t chunk = std::min(mss, n - off);
    const bool last = off + chunk == n;
    SegmentSpec s = segment_from(flow, Side::kOrigin);
    s.seq = start + static_cast<uint32_t>(off);
    s.ack = ack;
    s.flags = last ? v.flags : static_cast<uint8_t>(v.flags & ~(flag::kFin | flag::kPsh));
    s.window = v.window;
    if (v.options.has_timestamp) {
      s.tsval = v.options.tsval;
      s.tsecr = v.options.tsecr;
    }
    s.payload = {buf + off, chunk};
    emit(out, Side::kClient, s);
    off += chunk;
  }
}

uint32_t FlowEngine::edited_start(const SeqShift& shift, const FrameView& v, uint32_t framed_before) const noexcept {
  for (unsigned i = 0; i < shift.pending(); ++i) {
    const SeqShift::Edit& e = shift.edit(i);
    if (!carries_edit(e.at, v.seq, v.seq + v.payload_len, framed_before)) continue;
    if (e.at == v.seq) return v.seq + static_cast<uint32_t>(e.before);
    break;
  }
  return shift.forward(v.seq);
}

bool FlowEngine::edit_in_place(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room,
                               uint32_t framed_before) noexcept {
  const ParseContext& ctx = contexts_.at(flow.context);
  const SeqShift& shift = ctx.to_client;
  const uint32_t len = v.payload_len;
  Insertion ins[SeqShift::kMaxEdits];  // as many as are used are written
  unsigned count = 0;
  uint32_t total = 0;
  for (unsigned i = 0; i < shift.pending(); ++i) {
    const SeqShift::Edit& e = shift.edit(i);
    if (!carries_edit(e.at, v.seq, v.seq + len, framed_before)) continue;
    const std::span<const char> text = edit_bytes(ctx, i);
    if (text.size() != e.inserted) return false;  // a lost answer: the other path says so
    ins[count++] = Insertion{e.at - v.seq, e.inserted, text.data()};
    total += e.inserted;
  }
  size_t mss = flow.client_mss;
  if (flow.timestamps) mss = mss > kTimestampOptionBytes ? mss - kTimestampOptionBytes : 1;
  if (count == 0 || len + total > mss || v.frame_len + total > room) return false;
  const uint32_t seq = edited_start(shift, v, framed_before);
  insert_in_place(frame, v, {ins, count}, seq, v.has(flag::kAck) ? to_client_ack(flow, v.ack) : v.ack);
  if (v.has(flag::kAck) && !ctx.to_origin.empty()) static_cast<void>(rewrite_sack(frame, v, ctx.to_origin));
  return true;
}

unsigned FlowEngine::splice_kept_answers(ParseContext& ctx, uint32_t at) noexcept {
  unsigned spliced = 0;
  for (unsigned i = 0; i < ctx.kept_count; ++i) {
    ParseContext::KeptAnswer& a = ctx.kept_at(i);
    if (a.sent) continue;
    if (a.after != ctx.responses_ended) break;  // waits for later responses, as do all after it
    if (!ctx.to_client.add(at, 0, a.len)) break;  // room was reserved; never happens
    ParseContext::EditBytes& e = ctx.edit_bytes[ctx.to_client.pending() - 1];
    e.fields.len = 0;
    e.answer_pos = a.pos;
    e.answer_len = a.len;
    a.sent = true;
    a.client_end = ctx.to_client.forward(at);  // right after it
    ++spliced;
  }
  return spliced;
}

void FlowEngine::send_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t at, PacketSink& out) noexcept {
  const unsigned before = ctx.kept_count;
  unsigned unsent = 0;
  while (unsent < before && ctx.kept_at(unsent).sent) ++unsent;
  const unsigned spliced = splice_kept_answers(ctx, at);
  for (unsigned i = unsent; i < unsent + spliced; ++i) emit_kept_answer(flow, ctx.kept_at(i), out);
}

bool FlowEngine::resend_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t from, uint32_t to,
                                     PacketSink& out) noexcept {
  bool any = false;
  for (unsigned i = 0; i < ctx.kept_count; ++i) {
    const ParseContext::KeptAnswer& a = ctx.kept_at(i);
    if (!a.sent || !seq_lt(from, a.to) || !seq_lt(a.from, to)) continue;
    counters_.kept_answers_resent.add();
    emit_kept_answer(flow, a, out);
    any = true;
  }
  return any;
}

void FlowEngine::emit_kept_answer(TcpFlow& flow, const ParseContext::KeptAnswer& a, PacketSink& out) noexcept {
  const std::span<const char> answer = answers_.get(a.pos, a.len);
  if (answer.size() != a.len) {
    counters_.answers_lost.add();
    abort_flow(flow, out);
    return;
  }
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(answer.data());
  const uint32_t seq = a.client_end - a.len;
  const uint32_t ack = to_client_ack(flow, flow.origin_ack);
  size_t mss = flow.client_mss;
  if (flow.timestamps) mss = mss > kTimestampOptionBytes ? mss - kTimestampOptionBytes : 1;
  if (mss == 0) mss = 1;
  for (size_t off = 0; off < a.len;) {
    const size_t chunk = std::min<size_t>(mss, a.len - off);
    const bool last = off + chunk == a.len;
    const uint8_t flags = static_cast<uint8_t>(flag::kAck | (last ? flag::kPsh : 0));
    send_in_client_numbers(flow, out, seq + static_cast<uint32_t>(off), ack, flags, {bytes + off, chunk});
    off += chunk;
  }
}

void FlowEngine::abort_flow(TcpFlow& flow, PacketSink& out) noexcept {
  send_to_client(flow, out, flow.origin_next, flow.client_next, flag::kRst | flag::kAck, {});
  send_to_origin(flow, out, to_origin_seq(flow, flow.client_next), flow.origin_next, flag::kRst | flag::kAck);
  flow.state = FlowState::kClosed;
  release_context(flow);
}

void FlowEngine::sweep(Nanos now, size_t slots) noexcept {
  flows_.sweep(now, config_.timeouts, slots, [&](TcpFlow& f) {
    release_context(f);
    counters_.flows_expired.add();
  });
}

}  // namespace sluice::dataplane
