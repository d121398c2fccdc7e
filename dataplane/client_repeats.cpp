// Repeated client bytes and held heads' acknowledgements: see
// client_repeats.h.
#include "client_repeats.h"

#include <algorithm>

#include "checksum.h"

namespace sluice::dataplane {

namespace flag = tcp_flag;

void ClientRepeats::ack_held(TcpFlow& flow, ParseContext& ctx, PacketSink& out) noexcept {
  ctx.held_ack_owed = seq_lt(editor_.to_client_ack(flow, flow.origin.ack), flow.client.held_seq);
  if (!ctx.held_ack_owed) editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kAck);
}

FrameResult ClientRepeats::repeat(TcpFlow& flow, uint8_t* frame, FrameView& v, PacketSink& out) noexcept {
  if (flow.context < 0) return forward_frame(v);  // the origin has every judged byte before client.next
  ParseContext& ctx = lender_.context(flow);
  FrameResult r = forward_frame(v);
  if (ctx.holds_head() && seq_lt(flow.client.held_seq, v.seq + v.payload_len)) {
    // Bytes of a held head again: still held, and acknowledged again. What
    // comes before them goes on: the origin may have lost it.
    ack_held(flow, ctx, out);
    if (!seq_lt(v.seq, flow.client.held_seq)) return drop_frame(v);
    forward_prefix(frame, v, flow.client.held_seq - v.seq, r);
  }
  return judged(flow, frame, v, r);
}

FrameResult ClientRepeats::while_refusing(TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept {
  if (v.payload_len != 0 && seq_lt(v.seq, flow.answer.reset_seq)) {
    FrameResult r = forward_frame(v);
    forward_prefix(frame, v, std::min(v.payload_len, flow.answer.reset_seq - v.seq), r);
    return judged(flow, frame, v, r);
  }
  if (v.payload_len != 0 || v.has(flag::kFin)) return drop_frame(v);
  return forward_frame(v);
}

FrameResult ClientRepeats::judged(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r) noexcept {
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

void ClientRepeats::origin_acknowledged(TcpFlow& flow, uint32_t ack, PacketSink& out) noexcept {
  ParseContext& ctx = lender_.context(flow);
  StreamEditor::fold_removals(ctx, ack);
  const bool owed = ctx.holds_head() && ctx.held_ack_owed;
  if (ctx.judged.ranges() == 0 && !owed) return;
  const uint32_t acked = editor_.to_client_ack(flow, ack);
  // Judged bytes the origin now has need no record.
  ctx.judged.acknowledged(acked);
  if (owed && !seq_lt(acked, flow.client.held_seq)) {
    ctx.held_ack_owed = false;
    editor_.send_to_client(flow, out, flow.origin.next, flow.client.next, flag::kAck);
  }
}

}  // namespace sluice::dataplane
