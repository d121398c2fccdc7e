// The stream editor: a flow's two byte streams as the appliance edits them,
// the way NAT helpers do (dataplane/README.md, "Editing a flow's byte
// streams"). Rate-limit fields and kept-open answers are inserted into the
// origin-to-client stream, refused requests on kept-open connections are
// removed from the client-to-origin one, and every forwarded segment of an
// edited flow is renumbered to match: the origin's sequence numbers shifted
// towards the client, the client's acknowledgements and SACK edges back.
// Segments that carry an insertion grow in place when they fit, or are
// written again, split at the client's MSS.
//
// It is also where a flow's numbers are mapped for the appliance's own
// segments (the engine speaks in the origin's sequence numbers and the
// client's acknowledgement numbers), and where every acknowledgement towards
// the client is capped while the client lacks a kept answer: until it has
// the whole answer, its refused request stays unacknowledged, so a lost
// answer comes back when the client sends the request again.
//
// Owns: the buffer an edited segment is written again into. Touches: the
// edit half of the flow's parse context (both SeqShifts, the edits' bytes,
// the kept answers), the flow's seqadj.active, and the answers' texts in the
// AnswerStore (read only).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "answer_store.h"
#include "context_lender.h"
#include "flow_segment.h"
#include "frame.h"
#include "request_path.h"
#include "response_path.h"
#include "segment_rewrite.h"
#include "service_frame.h"
#include "worker_counters.h"

namespace sluice::dataplane {

// A kept answer's text was overwritten in the AnswerStore while the client
// still lacked it: the streams cannot be kept consistent, and the caller
// aborts the flow.
enum class EditOutcome : uint8_t { kDone, kAnswerLost };

class StreamEditor {
 public:
  StreamEditor(ContextLender& lender, const AnswerStore& answers, SegmentEmitter& emitter, WorkerCounters& counters);

  // A flow's numbers across the appliance: through its context's shifts
  // while edits are pending, by its base shifts after.
  [[nodiscard]] uint32_t to_client_seq(const TcpFlow& flow, uint32_t origin_seq) const noexcept;
  // A client segment passed on as it is (a RST, a bridged flow's): its
  // sequence number in the origin's numbers, once the stream was edited.
  void renumber_to_origin(const TcpFlow& flow, uint8_t* frame, FrameView& v) const noexcept {
    if (flow.seqadj.active) rewrite_seq(frame, v, to_origin_seq(flow, v.seq));
  }
  [[nodiscard]] uint32_t to_origin_seq(const TcpFlow& flow, uint32_t client_seq) const noexcept;
  [[nodiscard]] uint32_t to_origin_ack(const TcpFlow& flow, uint32_t client_ack) const noexcept;
  // The origin's acknowledgement in the client's numbers, capped (below).
  [[nodiscard]] uint32_t to_client_ack(const TcpFlow& flow, uint32_t origin_ack) const noexcept;
  // An acknowledgement to the client no further than the oldest request
  // whose kept answer the client does not have whole.
  [[nodiscard]] uint32_t capped_ack(const TcpFlow& flow, uint32_t client_ack) const noexcept;

  // A segment to the client in the origin's name: `seq` in the origin's
  // numbers, `ack` in the client's (capped).
  void send_to_client(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                      std::span<const uint8_t> payload = {}) noexcept;

  // A held head, admitted: its bytes [client.held_seq, end) go to the origin
  // as segments of their own, carrying the client's acknowledgement and
  // window field `client_ack`, `client_window` (ahead of the segment that
  // completed it, `end` its first byte, or when a delayed head's time comes).
  void release_held(TcpFlow& flow, const ParseContext& ctx, uint32_t end, uint32_t client_ack,
                    uint16_t client_window, PacketSink& out) noexcept;
  // A request plan's kept-open refusals: their bytes recorded as removals,
  // their answers as due after their responses (sent now where nothing is
  // outstanding before them).
  [[nodiscard]] EditOutcome keep_open(TcpFlow& flow, ParseContext& ctx, const RequestPlan& plan,
                                      PacketSink& out) noexcept;
  // A response plan's points: fields recorded as insertions after their
  // status lines, kept answers spliced in after the responses they wait for.
  void add_response_points(TcpFlow& flow, ParseContext& ctx, const ResponsePlan& plan) noexcept;

  // A forwarded origin segment of an edited flow (`framed_before`: the
  // flow's origin.next before it was framed): renumbered, or grown in place
  // with the edits it carries, or written again with them (then `r` drops
  // the original).
  [[nodiscard]] EditOutcome to_client(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room,
                                      uint32_t framed_before, PacketSink& out, FrameResult& r) noexcept;
  // A forwarded client segment of an edited flow (`parsed_before`: the
  // flow's client.next before it was parsed): removed bytes cut out, numbers
  // shifted; a kept answer the client lacks sent again when it repeats the
  // request; the client acknowledged where only the appliance can.
  [[nodiscard]] EditOutcome to_origin(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t parsed_before,
                                      PacketSink& out) noexcept;

  // The removals from the client's stream the origin has acknowledged up to
  // (`origin.ack`, its numbers), folded into the base.
  static void fold_removals(ParseContext& ctx, uint32_t origin_ack) noexcept;

 private:
  [[nodiscard]] std::span<const char> edit_bytes(const ParseContext& ctx, unsigned i) const noexcept;
  // The client's number of the first byte of origin segment `v` that carries
  // edits (before the bytes inserted right at its start, if it has them).
  [[nodiscard]] uint32_t edited_start(const SeqShift& shift, const FrameView& v, uint32_t framed_before) const noexcept;
  // The segment with its edits grown in place, when the result fits the
  // client's MSS and the buffer's `room`. False (the frame untouched) if not.
  [[nodiscard]] bool edit_in_place(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room,
                                   uint32_t framed_before) noexcept;
  [[nodiscard]] EditOutcome write_again(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t framed_before,
                                        PacketSink& out) noexcept;
  void renumber_to_client(const TcpFlow& flow, uint8_t* frame, FrameView& v) const noexcept;
  // Kept answers waiting for the `ended`-th response, spliced in at origin
  // sequence `at`. Returns how many.
  unsigned splice_kept_answers(ParseContext& ctx, uint32_t at, uint32_t ended) noexcept;
  [[nodiscard]] EditOutcome send_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t at, PacketSink& out) noexcept;
  // Sends again the kept answers whose requests overlap client bytes [from,
  // to); `any` says whether there were some.
  [[nodiscard]] EditOutcome resend_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t from, uint32_t to,
                                                PacketSink& out, bool& any) noexcept;
  [[nodiscard]] EditOutcome emit_kept_answer(TcpFlow& flow, const ParseContext::KeptAnswer& a,
                                             PacketSink& out) noexcept;
  void add_fields(TcpFlow& flow, ParseContext& ctx, uint32_t at, const limiter::RateLimitFields& fields) noexcept;

  ContextLender& lender_;
  const AnswerStore& answers_;
  SegmentEmitter& emitter_;
  WorkerCounters& counters_;
  std::unique_ptr<uint8_t[]> edit_buf_;  // an origin segment with its edits inserted, before it is cut to the MSS
};

}  // namespace sluice::dataplane
