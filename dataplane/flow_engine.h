// The TCP-aware part of a worker, without DPDK: given a frame of a
// service-port flow this worker owns, it says what to do with it (forward
// it, perhaps cut short or edited, or drop it) and sends the segments the
// appliance writes itself. A dispatcher: the engine owns the tools (the
// pools, the tracker, the stream editor, the answer sender) and hands each
// room (admission, binder, adoption, client_resets, client_repeats,
// request_path, response_path) only those it uses. dataplane/README.md has
// the rooms' diagram and a request's walk through them.
//
// Choices a reader should know:
// - A segment ahead of the parsed stream is dropped, not queued: the sender
//   retransmits it, and an appliance that queued would owe every flow memory
//   an attacker could fill. Retransmitted bytes already parsed are forwarded
//   and never charged again.
// - A fragment of a service-port segment is dropped: it could carry a head
//   past the parser.
#pragma once

#include <cstddef>
#include <cstdint>

#include "admission.h"
#include "adoption.h"
#include "answer_sender.h"
#include "answer_store.h"
#include "binder.h"
#include "change_undo.h"
#include "client_repeats.h"
#include "client_resets.h"
#include "client_shares.h"
#include "context_lender.h"
#include "delay_queue.h"
#include "engine_config.h"
#include "flow_adopter.h"
#include "flow_carry.h"
#include "forgotten_flows.h"
#include "flow_segment.h"
#include "frame.h"
#include "limiter/decide.h"
#include "packet_sink.h"
#include "policy_snapshot.h"
#include "request_path.h"
#include "response_path.h"
#include "service_frame.h"
#include "stream_editor.h"
#include "syn_proxy.h"
#include "tcp_tracker.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class FlowEngine {
 public:
  FlowEngine(const EngineConfig& config, limiter::LimiterState& limiter, WorkerCounters& counters, uint64_t trace_seed);

  [[nodiscard]] FrameResult on_frame(const ServiceFrame& sf, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                     time::Nanos now, PacketSink& out) noexcept;

  void prefetch(const ServiceFrame& sf) const noexcept { tracker_.prefetch(sf.hash); }

  // Takes on a flow the last process left (carry_verdict() kCarries), its
  // key hashed with this worker's seed, with the context or hold it had,
  // started under `snap`; `answers`: whether this worker's answer store is
  // the one the flow's answers were put in (carry_verdict); before the
  // worker runs.
  enum class Resumed : uint8_t {
    kYes,
    kDuplicate,
    kTableFull,
    kShareFull,    // its client's share of flows or contexts
    kNoStash,
    kNoneFree,     // no context or hold free
    kCannotCarry,  // its context or hold cannot go on (ParseContext::carry_on)
  };
  [[nodiscard]] Resumed resume(const CarriedFlow& carried, uint64_t hash, const PolicySnapshot& snap,
                               bool answers) noexcept;
  // Before the worker runs: the connections the restart did not carry on,
  // reset at their next segment (forgotten_flows.h).
  void forget(std::vector<FlowKey> keys) { forgotten_.assign(std::move(keys)); }
  // Where the worker marks the flow it is changing (flow_carry.h).
  [[nodiscard]] WorkMarker& marker() noexcept { return marker_; }

  // Sends the first delayed head whose time has come to the origin (its
  // stash, unbound), if there is one; false when none is due. The caller
  // makes room for a change's frames before each call (change_undo.h).
  [[nodiscard]] bool release_delayed(time::Nanos now, PacketSink& out) noexcept;
  [[nodiscard]] const DelayQueue& delays() const noexcept { return delays_; }

  // Sends the answer of a flow that on_frame() returned in answer_after.
  void send_answer(TcpFlow& flow, PacketSink& out) noexcept { sender_.send_answer(flow, out); }

  // Expires idle flows and ends those past a deadline of `snap`'s policy,
  // looking at up to `slots` slots.
  void sweep(time::Nanos now, size_t slots, const PolicySnapshot& snap, PacketSink& out) noexcept {
    tracker_.sweep(
        now, slots,
        [&](TcpFlow& flow) {
          marker_.slot(tracker_.flows().slot_of(flow));
          admission_.expiring(flow, out);
          marker_.done();
        },
        [&](TcpFlow& flow) {
          // Most flows it visits are within their deadlines: those it only
          // reads, unmarked.
          const bool binding = flow.bind.state == Binding::kBinding;
          if (binding ? !binder_.due(flow, now) : !admission_.deadline_due(flow, snap, now)) return;
          marker_.slot(tracker_.flows().slot_of(flow));
          if (binding) {
            binder_.keep(flow, now, out);
          } else {
            admission_.keep_deadlines(flow, snap, now, out);
          }
          marker_.done();
        });
  }

  [[nodiscard]] const FlowTable& flows() const noexcept { return tracker_.flows(); }
  // Turns field insertion on or off for responses framed from now on. For
  // benchmarks that compare the two on one worker.
  void set_insert_fields(bool on) noexcept;
  // The oldest policy generation a request in flight may still use (see
  // ContextPool::oldest_generation); called once per loop pass. A few
  // contexts per pass keep the cost per bridged frame near nothing; the
  // control plane frees retired policies a second later or so anyway.
  static constexpr size_t kContextsScannedPerPass = 32;
  [[nodiscard]] uint64_t policy_generation_in_use(uint64_t pass_generation) noexcept {
    return lender_.contexts().oldest_generation(pass_generation, kContextsScannedPerPass);
  }
  [[nodiscard]] const ContextPool& contexts() const noexcept { return lender_.contexts(); }
  [[nodiscard]] const HoldPool& holds() const noexcept { return lender_.holds(); }
  [[nodiscard]] const ClientShares& shares() const noexcept { return shares_; }
  // Flows not yet bound to their origin (each holds a bind stash).
  [[nodiscard]] size_t unbound_flows() const noexcept {
    return lender_.stashes().size() - lender_.stashes().free_count();
  }

 private:
  // A carried flow's stash filled again with what the dead process had
  // stashed; false if it does not fit this process's stash.
  [[nodiscard]] bool restash(TcpFlow& flow, const CarriedStash& stash) noexcept;
  FrameResult from_client(TcpFlow* flow, const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                          const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  // The steps every segment of a flow takes, forced inline into from_client
  // and from_origin (kept apart, the per-segment code spreads over more
  // instruction-cache lines, and a request's path is close to filling L1I).
  [[gnu::always_inline]] inline FrameResult client_segment(TcpFlow& flow, uint8_t* frame, FrameView& v,
                                                           const PolicySnapshot& snap, time::Nanos now,
                                                           PacketSink& out) noexcept;
  [[gnu::always_inline]] inline FrameResult client_data(TcpFlow& flow, uint8_t* frame, FrameView& v,
                                                        const PolicySnapshot& snap, time::Nanos now,
                                                        PacketSink& out) noexcept;
  [[gnu::always_inline]] inline FrameResult parse_requests(TcpFlow& flow, uint8_t* frame, FrameView& v,
                                                           const PolicySnapshot& snap, time::Nanos now,
                                                           PacketSink& out) noexcept;
  [[gnu::always_inline]] inline FrameResult apply(TcpFlow& flow, ParseContext& ctx, uint8_t* frame, FrameView& v,
                                                  const RequestPlan& plan, PacketSink& out) noexcept;
  FrameResult from_origin(TcpFlow* flow, uint8_t* frame, FrameView& v, uint32_t room, time::Nanos now,
                          PacketSink& out) noexcept;
  [[gnu::always_inline]] inline FrameResult origin_segment(TcpFlow& flow, uint8_t* frame, FrameView& v, time::Nanos now,
                                                           PacketSink& out) noexcept;
  [[gnu::always_inline]] inline FrameResult origin_data(TcpFlow& flow, uint8_t* frame, FrameView& v, time::Nanos now,
                                                        PacketSink& out) noexcept;
  FrameResult abort(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;

  // The tools, in the order they are built (each takes those above it).
  WorkerCounters& counters_;
  WorkMarker marker_;
  ChangeUndo undo_;
  ForgottenFlows forgotten_;
  ClientShares shares_;
  ContextLender lender_;
  AnswerStore answers_;
  DelayQueue delays_;
  SegmentEmitter emitter_;
  SynProxy proxy_;
  FlowAdopter adopter_;
  TcpTracker tracker_;
  StreamEditor editor_;
  AnswerSender sender_;
  RequestPath requests_;
  ResponsePath responses_;
  // The rooms.
  ClientResets resets_;
  ClientRepeats repeats_;
  Adoption adoption_;
  Admission admission_;
  Binder binder_;
};

}  // namespace sluice::dataplane
