// The TCP-aware part of a worker, without DPDK: given a frame of a
// service-port flow this worker owns, it tracks the handshake, feeds the
// client's bytes to the request parser in sequence order (each byte once),
// asks the limiter about each head, frames the origin's responses, and says
// what to do with the frame: forward it (perhaps cut short or edited) or drop
// it. For a refused request it writes the answer to the client itself,
// through a PacketSink, once earlier responses are complete, and either
// resets the origin's socket or keeps the connection open.
//
// Choices a reader should know:
// - A segment ahead of the parsed stream is dropped, not queued: the sender
//   retransmits it, and an appliance that queued would owe every flow memory
//   an attacker could fill. Retransmitted bytes already parsed are forwarded
//   and never charged again.
// - A head that arrives in one segment costs no copy. A head split across
//   segments is held: its bytes are copied into the flow's parse context, its
//   segments are dropped and acknowledged to the client in the origin's name
//   (so the client's window never stalls on a long head); once the head is
//   complete and admitted, the held bytes go to the origin as segments of
//   their own, ahead of the completing one. A refused request never reaches
//   the origin, not even in part.
// - With the policy's after_answer: keep-alive, a refused request is cut out
//   of the client's stream instead and its answer spliced into the origin's
//   after the earlier responses; the connection goes on (dataplane/README.md).
// - Client payload on a service-port flow whose handshake was not seen (the
//   appliance started later, or the flow expired) is never parsed; both ends
//   get a RST so the client reconnects through the appliance.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "answer_store.h"
#include "edit_hold.h"
#include "flow_table.h"
#include "frame.h"
#include "limiter/decide.h"
#include "packet_sink.h"
#include "parse_context.h"
#include "policy_snapshot.h"
#include "segment_writer.h"
#include "worker_counters.h"

namespace sluice::dataplane {

struct EngineConfig {
  size_t flows = 65536;      // per worker
  size_t contexts = 2048;    // per worker
  size_t edit_holds = 8192;  // per worker: flows between requests with fields unacknowledged (edit_hold.h)
  size_t answer_bytes = 8u << 20;  // answers kept for retransmitted refused requests, per worker
  uint32_t max_head_bytes = 64 * 1024;  // context buffers; a policy may ask less, never more
  uint16_t max_fields = 128;
  FlowTimeouts timeouts;
  // Admitted responses get the rate-limit fields of their request's decision
  // (TB16), inserted after the status line; the flow's sequence numbers are
  // then shifted for the rest of its life (dataplane/README.md).
  bool insert_fields = true;
};

enum class FrameAction : uint8_t { kForward, kDrop };

struct FrameResult {
  FrameAction action = FrameAction::kForward;
  uint32_t frame_len = 0;            // the frame's length after any cut
  TcpFlow* answer_after = nullptr;   // send this flow's answer once the frame is on its way
};

// A service-port TCP frame: its flow key, hash, which side it came from, and
// how far its buffer lets it grow.
struct ServiceFrame {
  Side from;
  FlowKey key;
  uint64_t hash;
  // Bytes the frame's buffer holds from the frame's start (its length plus
  // the room after it); 0: the frame may not grow. An origin segment the
  // fields go into grows in place when they fit (FrameResult::frame_len is
  // then larger than the frame was).
  uint32_t room = 0;
};

// Whether `v` (a kTcp or kTcpFragment frame from `from`) belongs to a service
// port, and if so its flow.
[[nodiscard]] bool service_frame(const FrameView& v, Side from, const std::bitset<65536>& ports,
                                 ServiceFrame& out) noexcept;

class FlowEngine {
 public:
  FlowEngine(const EngineConfig& config, limiter::LimiterState& limiter, WorkerCounters& counters,
             uint64_t trace_seed);

  [[nodiscard]] FrameResult on_frame(const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                                     const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;

  void prefetch(const ServiceFrame& sf) const noexcept { flows_.prefetch(sf.hash); }

  // Sends the answer of a flow that on_frame() returned in answer_after.
  void send_answer(TcpFlow& flow, PacketSink& out) noexcept;

  // Expires idle flows, looking at up to `slots` slots.
  void sweep(time::Nanos now, size_t slots) noexcept;

  [[nodiscard]] const FlowTable& flows() const noexcept { return flows_; }
  // Turns field insertion on or off for responses framed from now on (set-up
  // time: turning it on allocates the rewrite buffer once). For benchmarks
  // that compare the two on one worker.
  void set_insert_fields(bool on);
  // The oldest policy generation a request in flight may still use (see
  // ContextPool::oldest_generation); called once per loop pass. A few
  // contexts per pass keep the cost per bridged frame near nothing; the
  // control plane frees retired policies a second later or so anyway.
  static constexpr size_t kContextsScannedPerPass = 32;
  [[nodiscard]] uint64_t policy_generation_in_use(uint64_t pass_generation) noexcept {
    return contexts_.oldest_generation(pass_generation, kContextsScannedPerPass);
  }
  [[nodiscard]] const ContextPool& contexts() const noexcept { return contexts_; }
  [[nodiscard]] const HoldPool& holds() const noexcept { return holds_; }

 private:
  FrameResult on_client(TcpFlow* flow, const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                        const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  FrameResult client_segment(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                             time::Nanos now, PacketSink& out) noexcept;
  FrameResult on_origin(TcpFlow* flow, uint8_t* frame, FrameView& v, uint32_t room, time::Nanos now,
                        PacketSink& out) noexcept;
  FrameResult origin_segment(TcpFlow* flow, uint8_t* frame, FrameView& v, time::Nanos now, PacketSink& out) noexcept;
  // An edited flow's frames: origin segments shifted (or written again with
  // the fields inserted), client acknowledgements shifted back.
  // `framed_before` is the flow's origin_next before the segment was framed.
  FrameResult to_client_edited(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room, FrameResult r,
                               uint32_t framed_before,
                               PacketSink& out) noexcept;
  // `parsed_before` is the flow's client_next before the segment was parsed.
  void to_origin_edited(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t parsed_before,
                        PacketSink& out) noexcept;
  [[nodiscard]] std::span<const char> edit_bytes(const ParseContext& ctx, unsigned i) const noexcept;
  void emit_with_fields(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t framed_before,
                        PacketSink& out) noexcept;
  // The same in the frame itself, when the edited segment fits the client's
  // MSS and the buffer's `room`: the payload moved up, the edits' bytes put
  // in, headers and checksums written. False (the frame untouched) if not.
  [[nodiscard]] bool edit_in_place(TcpFlow& flow, uint8_t* frame, FrameView& v, uint32_t room,
                                   uint32_t framed_before) noexcept;
  // The client's number of the first byte of origin segment `v` that carries
  // edits (before the bytes inserted right at its start, if it has them).
  [[nodiscard]] uint32_t edited_start(const SeqShift& shift, const FrameView& v, uint32_t framed_before) const noexcept;
  [[nodiscard]] uint32_t to_client_seq(const TcpFlow& flow, uint32_t origin_seq) noexcept;
  [[nodiscard]] uint32_t to_origin_ack(const TcpFlow& flow, uint32_t client_ack) noexcept;
  [[nodiscard]] uint32_t to_origin_seq(const TcpFlow& flow, uint32_t client_seq) noexcept;
  // The origin's acknowledgement in the client's numbers, capped (below).
  [[nodiscard]] uint32_t to_client_ack(const TcpFlow& flow, uint32_t origin_ack) noexcept;
  // An acknowledgement to the client no further than the oldest request
  // whose kept answer the client does not have whole.
  [[nodiscard]] uint32_t capped_ack(const TcpFlow& flow, uint32_t client_ack) noexcept;
  // Kept answers (ParseContext::kept): spliced into the origin's stream at
  // origin sequence `at` once the responses before them have ended; sent by
  // the appliance where no origin segment carries them; sent again when the
  // client sends their request again. Returns the answers spliced / whether
  // any was sent again.
  unsigned splice_kept_answers(ParseContext& ctx, uint32_t at) noexcept;
  void send_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t at, PacketSink& out) noexcept;
  bool resend_kept_answers(TcpFlow& flow, ParseContext& ctx, uint32_t from, uint32_t to, PacketSink& out) noexcept;
  void emit_kept_answer(TcpFlow& flow, const ParseContext::KeptAnswer& a, PacketSink& out) noexcept;
  // RST both ways: the flow's streams cannot be kept consistent.
  void abort_flow(TcpFlow& flow, PacketSink& out) noexcept;
  FrameResult client_data(TcpFlow& flow, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                          time::Nanos now, PacketSink& out) noexcept;
  void release_held(TcpFlow& flow, const ParseContext& ctx, const FrameView& v, uint32_t upto,
                    PacketSink& out) noexcept;
  FrameResult origin_data(TcpFlow& flow, uint8_t* frame, FrameView& v, time::Nanos now) noexcept;
  FrameResult answered_client(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;

  void start_flow(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept;
  // Borrows a parse context for the flow, started under `snap`'s policy, with
  // the flow's held edits (if any) moved back into it. False if none is free.
  [[nodiscard]] bool acquire_context(TcpFlow& flow, const PolicySnapshot& snap) noexcept;
  // Gives back the context and any hold (the flow keeps only base shifts).
  void release_context(TcpFlow& flow) noexcept;
  void close_if_finished(TcpFlow& flow) noexcept;
  void maybe_release_context(TcpFlow& flow) noexcept;
  void reset_untracked(const uint8_t* frame, const FrameView& v, PacketSink& out) noexcept;
  void send_to_client(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                      std::span<const uint8_t> payload) noexcept;
  void send_in_client_numbers(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                              std::span<const uint8_t> payload) noexcept;
  void send_to_origin(TcpFlow& flow, PacketSink& out, uint32_t seq, uint32_t ack, uint8_t flags,
                      std::span<const uint8_t> payload = {}, uint16_t window = 0) noexcept;
  void emit_answer(TcpFlow& flow, PacketSink& out) noexcept;
  void emit(PacketSink& out, Side to, SegmentSpec& s) noexcept;
  // Per-rule counters and the busiest keys (worker_counters.h).
  void count_admitted(const limiter::Decision& d) noexcept;
  void count_refused(const limiter::Decision& d) noexcept;

  static constexpr uint32_t kAdmissionSample = 16;  // a power of two

  EngineConfig config_;
  limiter::LimiterState& limiter_;
  WorkerCounters& counters_;
  FlowTable flows_;
  ContextPool contexts_;
  HoldPool holds_;
  AnswerStore answers_;
  std::unique_ptr<limiter::DecisionScratch> scratch_;
  std::unique_ptr<uint8_t[]> edit_buf_;  // an origin segment with its edits inserted, before it is cut to the MSS
  uint16_t ip_id_ = 0;
  uint32_t admissions_ = 0;  // picks which admissions reach counters_.busy
};

}  // namespace sluice::dataplane
