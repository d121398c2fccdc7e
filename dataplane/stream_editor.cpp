// A flow's byte streams edited and its segments renumbered; see
// stream_editor.h and dataplane/README.md.
#include "stream_editor.h"

#include <algorithm>
#include <cstring>

#include "http/limiter_answer.h"
#include "segment_rewrite.h"

namespace sluice::dataplane {

namespace flag = tcp_flag;

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

StreamEditor::StreamEditor(ContextLender& lender, const AnswerStore& answers, SegmentEmitter& emitter,
                           WorkerCounters& counters)
    : lender_(lender),
      answers_(answers),
      emitter_(emitter),
      counters_(counters),
      // Big enough for a whole segment with every pending edit of a flow in it.
      edit_buf_(std::make_unique<uint8_t[]>(65536 + SeqShift::kMaxEdits * kMaxAnswerBytes)) {}

uint32_t StreamEditor::to_client_seq(const TcpFlow& flow, uint32_t origin_seq) const noexcept {
  if (!flow.seqadj.active) return origin_seq;
  if (flow.context >= 0) return lender_.context(flow).to_client.forward(origin_seq);
  return origin_seq + flow.seqadj.to_client;
}

uint32_t StreamEditor::to_origin_seq(const TcpFlow& flow, uint32_t client_seq) const noexcept {
  if (!flow.seqadj.active) return client_seq;
  if (flow.context >= 0) return lender_.context(flow).to_origin.forward(client_seq);
  return client_seq + flow.seqadj.to_origin;
}

uint32_t StreamEditor::capped_ack(const TcpFlow& flow, uint32_t client_ack) const noexcept {
  if (!flow.seqadj.active || flow.context < 0) return client_ack;
  uint32_t cap = 0;
  if (lender_.context(flow).ack_cap(cap) && seq_lt(cap, client_ack)) return cap;
  return client_ack;
}

uint32_t StreamEditor::to_client_ack(const TcpFlow& flow, uint32_t origin_ack) const noexcept {
  if (!flow.seqadj.active) return origin_ack;
  if (flow.context < 0) return origin_ack - flow.seqadj.to_origin;
  return capped_ack(flow, lender_.context(flow).to_origin.backward(origin_ack));
}

uint32_t StreamEditor::to_origin_ack(const TcpFlow& flow, uint32_t client_ack) const noexcept {
  if (!flow.seqadj.active) return client_ack;
  if (flow.context >= 0) return lender_.context(flow).to_client.backward(client_ack);
  return client_ack - flow.seqadj.to_client;
}

void StreamEditor::send_to_client(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                                  std::span<const uint8_t> payload) noexcept {
  SegmentSpec s = SegmentEmitter::from(flow, Side::kOrigin);
  s.seq = to_client_seq(flow, seq);
  s.ack = capped_ack(flow, ack);
  s.flags = flags;
  s.window = flow.origin.window;
  s.payload = payload;
  emitter_.emit(out, Side::kClient, s);
}

void StreamEditor::release_held(TcpFlow& flow, const ParseContext& ctx, uint32_t end, uint32_t client_ack,
                                uint16_t client_window, PacketSink& out) noexcept {
  if (!seq_lt(flow.client.held_seq, end)) return;
  const uint32_t count = end - flow.client.held_seq;
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  // No removal lies inside a held head: its numbers move as one.
  s.seq = to_origin_seq(flow, flow.client.held_seq);
  s.ack = to_origin_ack(flow, client_ack);
  s.flags = flag::kAck;
  s.window = rescale_window(client_window, flow.proxy.window_to_origin_shift);
  emitter_.emit_split(out, Side::kOrigin, s, {reinterpret_cast<const uint8_t*>(ctx.head), count},
                      payload_per_segment(flow.origin.mss, flow.timestamps), flag::kAck);
}

EditOutcome StreamEditor::keep_open(TcpFlow& flow, ParseContext& ctx, const RequestPlan& plan,
                                    PacketSink& out) noexcept {
  if (plan.absorbed) {
    ParseContext::KeptAnswer& a = ctx.kept_at(ctx.kept_count - 1u);
    a.to = plan.absorbed_to;
    ctx.to_origin.set_last_removed(plan.absorbed_to - a.from);
  }
  for (unsigned i = 0; i < plan.kept; ++i) {
    const KeptRefusal& k = plan.refusals[i];
    (void)ctx.to_origin.add(k.from, k.to - k.from, 0);  // the request path checked the room
    ParseContext::KeptAnswer a;
    a.from = k.from;
    a.to = k.to;
    a.after = k.after;
    a.pos = k.pos;
    a.len = k.len;
    (void)ctx.push_kept(a);
    flow.seqadj.active = true;
    // Nothing before it is unanswered: it goes right after what the origin
    // has sent so far.
    if (ctx.responses_ended == a.after && send_kept_answers(flow, ctx, flow.origin.next, out) != EditOutcome::kDone) {
      return EditOutcome::kAnswerLost;
    }
  }
  return EditOutcome::kDone;
}

void StreamEditor::fold_removals(ParseContext& ctx, uint32_t origin_ack) noexcept {
  // A removal needs no keeping once the origin has acknowledged everything
  // before it and the client has been told its refused bytes arrived (its
  // kept answer acknowledged, so it will not send them again). Kept, the
  // removals of a connection whose every request is refused (the origin
  // silent) filled the shift and closed the connection every 32 requests.
  // The one still growing (a refused body arriving) stays.
  if (ctx.to_origin.pending() == 0 || ctx.absorbing) return;
  uint32_t cap = 0;
  if (ctx.ack_cap(cap)) {
    ctx.to_origin.acknowledged(origin_ack, cap);
  } else {
    ctx.to_origin.acknowledged(origin_ack);
  }
}

void StreamEditor::add_response_points(TcpFlow& flow, ParseContext& ctx, const ResponsePlan& plan) noexcept {
  for (unsigned i = 0; i < plan.points; ++i) {
    const ResponsePoint& p = plan.at[i];
    if (p.kind == ResponsePoint::Kind::kFields) {
      add_fields(flow, ctx, p.at, *p.fields);
    } else {
      splice_kept_answers(ctx, p.at, p.ended);
    }
  }
}

void StreamEditor::add_fields(TcpFlow& flow, ParseContext& ctx, uint32_t at, const limiter::RateLimitFields& fields) noexcept {
  // Kept answers not yet spliced in have their room reserved.
  if (ctx.to_client.pending() + (ctx.kept_count != 0 ? ctx.kept_unsent() : 0u) >= SeqShift::kMaxEdits) {
    counters_.fields_skipped.add();
    return;
  }
  // Rendered now, into the bytes of the edit they become.
  ParseContext::EditBytes& e = ctx.edit_bytes[ctx.to_client.pending()];
  const size_t n = http::write_ratelimit_fields(fields, e.fields.bytes);
  if (n == 0 || n > sizeof e.fields.bytes || !ctx.to_client.add(at, 0, static_cast<uint32_t>(n))) {
    counters_.fields_skipped.add();
    return;
  }
  e.fields.len = static_cast<uint8_t>(n);
  e.answer_len = 0;
  flow.seqadj.active = true;
  counters_.fields_inserted.add();
}

EditOutcome StreamEditor::to_client(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room, uint32_t framed_before,
                                    PacketSink& out, FrameResult& r) noexcept {
  if (r.action != FrameAction::kForward || v.has(flag::kSyn)) return EditOutcome::kDone;
  if (flow.context >= 0 && v.payload_len != 0) {
    const SeqShift& shift = lender_.context(flow).to_client;
    const uint32_t end = v.seq + v.payload_len;
    for (unsigned i = 0; i < shift.pending(); ++i) {
      if (!carries_edit(shift.edit(i).at, v.seq, end, framed_before)) continue;
      // The segment (or its retransmission) the fields or a kept answer go
      // into: grown in place, or written again with them (cut to the
      // client's MSS) and the original dropped.
      if (edit_in_place(flow, frame, v, room, framed_before)) {
        r.frame_len = v.frame_len;
        return EditOutcome::kDone;
      }
      r.action = FrameAction::kDrop;
      return write_again(flow, frame, v, framed_before, out);
    }
  }
  renumber_to_client(flow, frame, v);
  return EditOutcome::kDone;
}

void StreamEditor::renumber_to_client(const TcpFlow& flow, uint8_t* frame, FrameView& v) const noexcept {
  rewrite_seq(frame, v, to_client_seq(flow, v.seq));
  if (!v.has(flag::kAck)) return;
  // Requests cut out of the client's stream: the origin's acknowledgement
  // and SACK edges in the client's numbers.
  rewrite_ack(frame, v, to_client_ack(flow, v.ack));
  SeqShift base;
  const SeqShift* shift = &base;
  if (flow.context >= 0) {
    shift = &lender_.context(flow).to_origin;
  } else {
    base.reset(flow.seqadj.to_origin);
  }
  if (!shift->empty()) static_cast<void>(rewrite_sack(frame, v, *shift));
}

EditOutcome StreamEditor::to_origin(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t parsed_before,
                                    PacketSink& out) noexcept {
  if (flow.context < 0) {
    if (flow.seqadj.to_origin != 0) rewrite_seq(frame, v, v.seq + flow.seqadj.to_origin);
    SeqShift base;
    base.reset(flow.seqadj.to_client);
    shift_client_segment(frame, v, base);
    return EditOutcome::kDone;
  }
  ParseContext& ctx = lender_.context(flow);
  const unsigned kept_before = ctx.kept_count;
  if (v.has(flag::kAck)) ctx.acknowledged_by_client(v.ack);
  bool answered = false;
  uint32_t cut = 0;
  if (!ctx.to_origin.empty()) {
    if (v.payload_len != 0 && seq_lt(v.seq, parsed_before)) {
      // Bytes the client sends again: if they belong to a request whose kept
      // answer it does not acknowledge, the answer was lost.
      const uint32_t end = v.seq + v.payload_len;
      const uint32_t to = seq_lt(end, parsed_before) ? end : parsed_before;
      if (resend_kept_answers(flow, ctx, v.seq, to, out, answered) != EditOutcome::kDone) {
        return EditOutcome::kAnswerLost;
      }
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
    send_to_client(flow, out, flow.origin.next, to_client_ack(flow, flow.origin.ack), flag::kAck);
  }
  fold_removals(ctx, flow.origin.ack);
  return EditOutcome::kDone;
}

std::span<const char> StreamEditor::edit_bytes(const ParseContext& ctx, unsigned i) const noexcept {
  const ParseContext::EditBytes& e = ctx.edit_bytes[i];
  if (e.answer_len != 0) return answers_.get(e.answer_pos, e.answer_len);
  return {e.fields.bytes, e.fields.len};
}

EditOutcome StreamEditor::write_again(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t framed_before,
                                      PacketSink& out) noexcept {
  const ParseContext& ctx = lender_.context(flow);
  const SeqShift& shift = ctx.to_client;
  const uint8_t* payload = frame + v.payload_offset;
  const uint32_t len = v.payload_len;
  uint8_t* buf = edit_buf_.get();
  size_t n = 0;
  uint32_t pos = 0;
  for (unsigned i = 0; i < shift.pending(); ++i) {
    const uint32_t at = shift.edit(i).at;
    if (!carries_edit(at, v.seq, v.seq + len, framed_before)) continue;
    const std::span<const char> text = edit_bytes(ctx, i);
    if (text.size() != shift.edit(i).inserted) {
      // A kept answer overwritten in the answer store while the client still
      // lacked it: the stream cannot be written again the same way.
      counters_.answers_lost.add();
      return EditOutcome::kAnswerLost;
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
  // Cut to what the client accepts, as the origin would have.
  SegmentSpec s = SegmentEmitter::from(flow, Side::kOrigin);
  s.seq = edited_start(shift, v, framed_before);
  s.ack = to_client_ack(flow, v.ack);
  s.flags = static_cast<uint8_t>(v.flags & ~(flag::kFin | flag::kPsh));
  // As the origin's segment would have reached the client: on a proxied
  // flow the origin's clock and window scale are translated (syn_proxy.h;
  // offset and shift are 0 otherwise).
  s.window = rescale_window(v.window, flow.proxy.window_to_client_shift);
  if (v.options.has_timestamp) {
    s.tsval = v.options.tsval + flow.proxy.ts_offset;
    s.tsecr = v.options.tsecr;
  }
  emitter_.emit_split(out, Side::kClient, s, {buf, n}, payload_per_segment(flow.client.mss, flow.timestamps), v.flags);
  return EditOutcome::kDone;
}

uint32_t StreamEditor::edited_start(const SeqShift& shift, const FrameView& v, uint32_t framed_before) const noexcept {
  for (unsigned i = 0; i < shift.pending(); ++i) {
    const SeqShift::Edit& e = shift.edit(i);
    if (!carries_edit(e.at, v.seq, v.seq + v.payload_len, framed_before)) continue;
    if (e.at == v.seq) return v.seq + static_cast<uint32_t>(e.before);
    break;
  }
  return shift.forward(v.seq);
}

bool StreamEditor::edit_in_place(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room,
                                 uint32_t framed_before) noexcept {
  const ParseContext& ctx = lender_.context(flow);
  const SeqShift& shift = ctx.to_client;
  const uint32_t len = v.payload_len;
  Insertion ins[SeqShift::kMaxEdits];  // as many as are used are written
  unsigned count = 0;
  uint32_t total = 0;
  for (unsigned i = 0; i < shift.pending(); ++i) {
    const SeqShift::Edit& e = shift.edit(i);
    if (!carries_edit(e.at, v.seq, v.seq + len, framed_before)) continue;
    const std::span<const char> text = edit_bytes(ctx, i);
    if (text.size() != e.inserted) return false;  // a lost answer: write_again() says so
    ins[count++] = Insertion{e.at - v.seq, e.inserted, text.data()};
    total += e.inserted;
  }
  const size_t mss = payload_per_segment(flow.client.mss, flow.timestamps);
  if (count == 0 || len + total > mss || v.frame_len + total > room) return false;
  const uint32_t seq = edited_start(shift, v, framed_before);
  insert_in_place(frame, v, {ins, count}, seq, v.has(flag::kAck) ? to_client_ack(flow, v.ack) : v.ack);
  if (v.has(flag::kAck) && !ctx.to_origin.empty()) static_cast<void>(rewrite_sack(frame, v, ctx.to_origin));
  return true;
}

unsigned StreamEditor::splice_kept_answers(ParseContext& ctx, uint32_t at, uint32_t ended) noexcept {
  unsigned spliced = 0;
  for (unsigned i = 0; i < ctx.kept_count; ++i) {
    ParseContext::KeptAnswer& a = ctx.kept_at(i);
    if (a.sent) continue;
    if (a.after != ended) break;                  // waits for later responses, as do all after it
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

EditOutcome StreamEditor::send_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t at, PacketSink& out) noexcept {
  const unsigned before = ctx.kept_count;
  unsigned unsent = 0;
  while (unsent < before && ctx.kept_at(unsent).sent) ++unsent;
  const unsigned spliced = splice_kept_answers(ctx, at, ctx.responses_ended);
  for (unsigned i = unsent; i < unsent + spliced; ++i) {
    if (emit_kept_answer(flow, ctx.kept_at(i), out) != EditOutcome::kDone) return EditOutcome::kAnswerLost;
  }
  return EditOutcome::kDone;
}

EditOutcome StreamEditor::resend_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t from, uint32_t to,
                                              PacketSink& out, bool& any) noexcept {
  for (unsigned i = 0; i < ctx.kept_count; ++i) {
    const ParseContext::KeptAnswer& a = ctx.kept_at(i);
    if (!a.sent || !seq_lt(from, a.to) || !seq_lt(a.from, to)) continue;
    counters_.kept_answers_resent.add();
    any = true;
    if (emit_kept_answer(flow, a, out) != EditOutcome::kDone) return EditOutcome::kAnswerLost;
  }
  return EditOutcome::kDone;
}

EditOutcome StreamEditor::emit_kept_answer(TcpFlow& flow, const ParseContext::KeptAnswer& a, PacketSink& out) noexcept {
  const std::span<const char> answer = answers_.get(a.pos, a.len);
  if (answer.size() != a.len) {
    counters_.answers_lost.add();
    return EditOutcome::kAnswerLost;
  }
  SegmentSpec s = SegmentEmitter::from(flow, Side::kOrigin);
  s.seq = a.client_end - a.len;  // already in the client's numbers
  s.ack = to_client_ack(flow, flow.origin.ack);
  s.flags = flag::kAck;
  s.window = flow.origin.window;
  emitter_.emit_split(out, Side::kClient, s, {reinterpret_cast<const uint8_t*>(answer.data()), answer.size()},
                      payload_per_segment(flow.client.mss, flow.timestamps), flag::kAck | flag::kPsh);
  return EditOutcome::kDone;
}

}  // namespace sluice::dataplane
