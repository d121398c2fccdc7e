// Answers, resets and aborts in a flow's name; see answer_sender.h.
#include "answer_sender.h"

#include <algorithm>
#include <cstring>

namespace sluice::dataplane {

namespace flag = tcp_flag;

void AnswerSender::answer_later(TcpFlow& flow, ParseContext& ctx, const RequestPlan& plan) noexcept {
  const size_t len = std::min(plan.answer.size(), sizeof ctx.answer);
  std::memcpy(ctx.answer, plan.answer.data(), len);
  ctx.answer_len = static_cast<uint16_t>(len);
  // Client bytes up to what was parsed are consumed; the origin's stream
  // stops where the refused request began.
  flow.answer.ack = flow.client.next;
  flow.answer.reset_seq = plan.reset_seq;
  flow.answer.len = static_cast<uint16_t>(len);
  flow.state = FlowState::kRefusing;
}

void AnswerSender::send_answer(TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.state != FlowState::kRefusing) return;
  if (flow.origin.fin) {
    // The origin closed first: the client has its FIN and cannot take an
    // answer after it. Release the origin's socket and stop.
    counters_.answers_abandoned.add();
    to_origin(flow, out, editor_.to_origin_seq(flow, flow.answer.reset_seq), flow.origin.next, flag::kRst | flag::kAck);
    flow.state = FlowState::kClosed;
    lender_.give_back_all(flow);
    return;
  }
  flow.answer.seq = flow.origin.next;
  // The context's work is done: the answer moves to the store, so a refused
  // flow waiting for its client's FIN holds no buffers.
  const ParseContext& ctx = lender_.context(flow);
  flow.answer.pos = answers_.put({ctx.answer, ctx.answer_len});
  flow.answer.len = ctx.answer_len;
  lender_.give_back_all(flow);
  emit_answer(flow, out);
  to_origin(flow, out, editor_.to_origin_seq(flow, flow.answer.reset_seq), flow.origin.next, flag::kRst | flag::kAck);
  flow.state = FlowState::kAnswered;
  counters_.answers_sent.add();
}

void AnswerSender::end_without_answer(TcpFlow& flow, PacketSink& out) noexcept {
  if (flow.state == FlowState::kRefusing) counters_.answers_abandoned.add();
  // Where the origin's stream stands for it: a refused request, or a held
  // head, was never forwarded. Should it expect another number, it answers
  // with a challenge ACK and reset_origin() resets it at the exact one.
  uint32_t origin_expects = flow.client.next;
  if (flow.state == FlowState::kRefusing)
    origin_expects = flow.answer.reset_seq;
  else if (flow.context >= 0 && lender_.context(flow).holds_head())
    origin_expects = flow.client.held_seq;
  // An answer of no bytes: the FIN alone, at the first byte the client will
  // not get; after_answer() treats the flow as any answered one.
  flow.answer.seq = flow.origin.next;
  flow.answer.ack = flow.client.next;
  flow.answer.len = 0;
  editor_.send_to_client(flow, out, flow.answer.seq, flow.answer.ack, flag::kFin | flag::kAck);
  to_origin(flow, out, editor_.to_origin_seq(flow, origin_expects), flow.origin.next, flag::kRst | flag::kAck);
  flow.state = FlowState::kAnswered;
  lender_.give_back_all(flow);
}

void AnswerSender::after_answer(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  if (v.payload_len != 0 && seq_lt(v.seq, flow.answer.ack)) {
    if (flow.answer.len == 0) {
      // The connection was ended without an answer: its FIN again.
      editor_.send_to_client(flow, out, flow.answer.seq, flow.answer.ack, flag::kFin | flag::kAck);
    } else {
      // The refused request again: its answer was lost. Same answer, no charge.
      counters_.answers_resent.add();
      emit_answer(flow, out);
    }
  }
  if (v.has(flag::kFin)) {
    editor_.send_to_client(flow, out, flow.answer.seq + flow.answer.len + 1, v.seq + v.payload_len + 1, flag::kAck);
  }
}

void AnswerSender::emit_answer(TcpFlow& flow, PacketSink& out) noexcept {
  const std::span<const char> answer = answers_.get(flow.answer.pos, flow.answer.len);
  if (answer.empty()) {
    // Overwritten by newer answers: the client learns the connection is over.
    counters_.answers_lost.add();
    editor_.send_to_client(flow, out, flow.answer.seq, flow.answer.ack, flag::kRst | flag::kAck);
    return;
  }
  // The flow holds no context any more: its numbers move as one.
  SegmentSpec s = SegmentEmitter::from(flow, Side::kOrigin);
  s.seq = editor_.to_client_seq(flow, flow.answer.seq);
  s.ack = editor_.capped_ack(flow, flow.answer.ack);
  s.flags = flag::kAck | flag::kPsh;
  s.window = flow.origin.window;
  emitter_.emit_split(out, Side::kClient, s, {reinterpret_cast<const uint8_t*>(answer.data()), answer.size()},
                      payload_per_segment(flow.client.mss, flow.timestamps), flag::kAck | flag::kPsh | flag::kFin);
}

void AnswerSender::reset_origin(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept {
  if (v.has(flag::kAck)) to_origin(flow, out, v.ack, v.seq + v.payload_len, flag::kRst);
}

void AnswerSender::abort(TcpFlow& flow, PacketSink& out) noexcept {
  editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kRst | flag::kAck);
  to_origin(flow, out, editor_.to_origin_seq(flow, flow.client.next), flow.origin.next, flag::kRst | flag::kAck);
  flow.state = FlowState::kClosed;
  lender_.give_back_all(flow);
}

void AnswerSender::to_origin(const TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags) noexcept {
  // An unbound flow's origin has no connection to end (syn_proxy.h).
  if (flow.bind.state == Binding::kUnbound) return;
  SegmentSpec s = SegmentEmitter::from(flow, Side::kClient);
  s.seq = seq;
  s.ack = ack;
  s.flags = flags;
  emitter_.emit(out, Side::kOrigin, s);
}

void AnswerSender::reset_untracked(const uint8_t* frame, const FrameView& v, bool to_origin, PacketSink& out) noexcept {
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
  if (to_origin) emitter_.emit(out, Side::kOrigin, s);
  // To the client, as if from the origin: MACs and addresses swapped.
  uint8_t swapped[kMaxL2Header];
  s.l2 = {swapped, reply_l2(frame, v, swapped)};
  s.src = v.dst;
  s.dst = v.src;
  s.sport = v.dport;
  s.dport = v.sport;
  s.seq = v.has(flag::kAck) ? v.ack : 0;
  s.ack = v.seq + v.payload_len;
  s.flags = flag::kRst | flag::kAck;
  emitter_.emit(out, Side::kClient, s);
}

}  // namespace sluice::dataplane
