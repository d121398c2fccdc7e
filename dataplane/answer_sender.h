// The answer sender: what the appliance says on a connection in its own
// words. The answer to a refused request on a connection that closes (to the
// client as if from the origin, split at the client's MSS, ending with FIN;
// the origin's socket reset at exactly the sequence number it expects; the
// same answer again, uncharged, if the client sends the request again), the
// resets of flows it cannot keep consistent or never saw open, and the
// acknowledgements after an answer.
//
// Owns: nothing of its own (answers live in the worker's AnswerStore).
// Touches: the flow's answer fields (answer.seq, answer.ack, answer.reset_seq,
// answer.len, answer.pos) and its state from kRefusing on; gives the flow's
// context back once the answer has left it.
#pragma once

#include <cstdint>

#include "answer_store.h"
#include "context_lender.h"
#include "flow_segment.h"
#include "frame.h"
#include "request_path.h"
#include "stream_editor.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class AnswerSender {
 public:
  AnswerSender(ContextLender& lender, StreamEditor& editor, AnswerStore& answers, SegmentEmitter& emitter,
               WorkerCounters& counters) noexcept
      : lender_(lender), editor_(editor), answers_(answers), emitter_(emitter), counters_(counters) {}

  // A request plan ended in an answer that closes the connection: the
  // answer waits in the flow's context for the responses before it.
  void answer_later(TcpFlow& flow, ParseContext& ctx, const RequestPlan& plan) noexcept;
  // A refusing flow's answer, now that the responses before it are out: to
  // the client with FIN, a RST to the origin; the context goes back.
  void send_answer(TcpFlow& flow, PacketSink& out) noexcept;
  // The connection ends without an answer: the client gets a FIN after the
  // origin's bytes framed so far, the origin a RST; the flow is answered
  // with no bytes, its context goes back. For a response the appliance
  // cannot frame (the FIN where that segment began, nothing of it after),
  // a new connection that never sent a request, and an idle keep-alive
  // connection past its deadline.
  void end_without_answer(TcpFlow& flow, PacketSink& out) noexcept;
  // A client segment of an answered flow (dropped by the caller): the
  // refused request again gets its answer again, a FIN is acknowledged.
  void after_answer(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;
  // An origin segment of an answered flow: it did not take the RST (it
  // expected another sequence number and sent a challenge ACK, RFC 5961
  // 3.2), or it is retransmitting; its acknowledgement number is exactly
  // what it expects next.
  void reset_origin(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;
  // Payload on a service-port flow whose handshake the appliance did not
  // see: the client reset, so that it reconnects through the appliance, and
  // the origin too if `to_origin` (its connection, if there is one, closes).
  void reset_untracked(const uint8_t* frame, const FrameView& v, bool to_origin, PacketSink& out) noexcept;
  // RST both ways: the flow's streams cannot be kept consistent.
  void abort(TcpFlow& flow, PacketSink& out) noexcept;

 private:
  void emit_answer(TcpFlow& flow, PacketSink& out) noexcept;
  // A segment to the origin in the client's name, in the origin's numbers.
  void to_origin(const TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags) noexcept;

  ContextLender& lender_;
  StreamEditor& editor_;  // the flow's numbers, and segments to the client in the origin's name
  AnswerStore& answers_;
  SegmentEmitter& emitter_;
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane
