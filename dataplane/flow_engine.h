// The TCP-aware part of a worker, without DPDK: given a frame of a
// service-port flow this worker owns, it says what to do with it (forward
// it, perhaps cut short or edited, or drop it) and sends the segments the
// appliance writes itself. A short dispatcher over the engine's rooms
// (dataplane/README.md has their diagram and a request's walk through them):
//
//   tcp_tracker     handshake, FIN/RST, timeouts, the flow table
//   request_path    client bytes parsed and decided: a plan for the segment
//   response_path   origin bytes framed: where fields and kept answers go
//   stream_editor   both byte streams edited, every number mapped
//   answer_sender   answers, resets, aborts
//   context_lender  the parse contexts and edit holds flows borrow
//   flow_segment    segments written in a flow's name
//   syn_proxy, client_shares, eviction, deadline_keeper: admission, whose
//                   glue is flow_engine_admission.cpp
//
// Choices a reader should know:
// - A segment ahead of the parsed stream is dropped, not queued: the sender
//   retransmits it, and an appliance that queued would owe every flow memory
//   an attacker could fill. Retransmitted bytes already parsed are forwarded
//   and never charged again.
// - Client payload on a service-port flow whose handshake was not seen (the
//   appliance restarted, or the flow expired) gets both ends a RST, so the
//   client reconnects through the appliance; where the policy turns
//   adoption on, one that begins a request head is adopted instead
//   (flow_adopter.h: the origin proves the connection and tells its
//   numbers before anything is parsed; the connection carries heads only).
// - A fragment of a service-port segment is dropped: it could carry a head
//   past the parser.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "answer_sender.h"
#include "allowance.h"
#include "answer_store.h"
#include "context_lender.h"
#include "client_shares.h"
#include "deadline_keeper.h"
#include "eviction.h"
#include "flow_adopter.h"
#include "flow_segment.h"
#include "frame.h"
#include "limiter/decide.h"
#include "packet_sink.h"
#include "policy_snapshot.h"
#include "request_path.h"
#include "response_path.h"
#include "rst_acceptance.h"
#include "service_frame.h"
#include "stream_editor.h"
#include "syn_proxy.h"
#include "tcp_tracker.h"
#include "worker_counters.h"

namespace sluice::dataplane {

struct EngineConfig {
  size_t flows = 65536;                 // per worker
  size_t contexts = 2048;               // per worker
  size_t edit_holds = 8192;             // per worker: flows between requests with fields unacknowledged (edit_hold.h)
  size_t answer_bytes = 8u << 20;       // answers kept for retransmitted refused requests, per worker
  // Flows that may wait unbound for their first forwarded request at once
  // (delayed binding; bind_stash.h: a head limit and 32 KiB each, committed
  // as used). With none free a new flow is bound as its handshake completes.
  size_t bind_stashes = 256;             // per worker
  uint32_t max_head_bytes = 64 * 1024;  // context buffers; a policy may ask less, never more
  uint16_t max_fields = 128;
  FlowTimeouts timeouts;
  // Each client address's share (IPv6: its /64) of the flows and contexts
  // (client_shares.h); 0: a sixteenth of each.
  uint32_t flows_per_client = 0;
  uint32_t contexts_per_client = 0;
  // Keys the shares' hash, so that clients cannot be chosen to collide:
  // secret, drawn at start.
  uint64_t share_seed = 0;
  // Keys the SYN cookies (syn_proxy.h): secret, drawn at start, the same
  // for every worker.
  std::array<uint8_t, 32> cookie_seed{};
  // Admitted responses get the rate-limit fields of their request's decision
  // (TB16), inserted after the status line; the flow's sequence numbers are
  // then shifted for the rest of its life (dataplane/README.md).
  bool insert_fields = true;
  // This worker's record of what it admits on `scope: cluster`
  // buckets, which the cluster sync turns over (none: no cluster buckets).
  limiter::SpendLog* spends = nullptr;
  // Where refusals are offered for the audit log (none: not
  // offered); the worker owns it.
  RefusalSampler* refusals = nullptr;
};

class FlowEngine {
 public:
  FlowEngine(const EngineConfig& config, limiter::LimiterState& limiter, WorkerCounters& counters, uint64_t trace_seed);

  [[nodiscard]] FrameResult on_frame(const ServiceFrame& sf, uint8_t* frame, FrameView& v, const PolicySnapshot& snap,
                                     time::Nanos now, PacketSink& out) noexcept;

  void prefetch(const ServiceFrame& sf) const noexcept { tracker_.prefetch(sf.hash); }

  // Sends the answer of a flow that on_frame() returned in answer_after.
  void send_answer(TcpFlow& flow, PacketSink& out) noexcept { sender_.send_answer(flow, out); }

  // Expires idle flows and ends those past a deadline of `snap`'s policy
  // (deadline_keeper.h), looking at up to `slots` slots.
  void sweep(time::Nanos now, size_t slots, const PolicySnapshot& snap, PacketSink& out) noexcept {
    tracker_.sweep(
        now, slots, [&](TcpFlow& flow) { expiring(flow, out); },
        [&](TcpFlow& flow) { keep_deadlines(flow, snap, now, out); });
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
  FrameResult from_client(TcpFlow* flow, const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                          const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  FrameResult client_reset(TcpFlow& flow, uint8_t* frame, FrameView& v, time::Nanos now, PacketSink& out) noexcept;
  // A challenge ACK (RFC 5961) to a client's RST or SYN that may be forged:
  // the flow's numbers, which a real peer answers and a blind attacker never
  // sees; at most challenges_ allows.
  void challenge(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
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
  // Client bytes parsed before, again: forwarded as they were judged.
  FrameResult client_repeat(TcpFlow& flow, uint8_t* frame, FrameView& v, PacketSink& out) noexcept;
  void ack_held(TcpFlow& flow, ParseContext& ctx, PacketSink& out) noexcept;
  // A repeat about to go on as `r` says, written back to the judged heads.
  FrameResult judged_repeat(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r) noexcept;
  // The origin's acknowledgement `ack` (its numbers) on a flow with a context.
  void origin_acknowledged(TcpFlow& flow, uint32_t ack, PacketSink& out) noexcept;
  FrameResult abort(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;
  // A flow about to be forgotten, idle past its timeout: one inside a
  // request body (deadlines.body off) is reset both ways, so that no
  // connection the appliance forgets is mid-body, where adopting it
  // (flow_adopter.h) would be unsafe.
  void expiring(TcpFlow& flow, PacketSink& out) noexcept;
  // Ends `flow` if it has missed a deadline: 408 to a slow head, a close
  // to an idle or silent connection, resets to a stalled body.
  void keep_deadlines(TcpFlow& flow, const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  // A client's SYN without the SYN proxy: tracked, with room made in a full
  // table (eviction.h).
  [[nodiscard]] bool track_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                               time::Nanos now, PacketSink& out) noexcept;
  // A flow forgotten to make room for a new one; false if none may go.
  [[nodiscard]] bool make_room_for_flow(time::Nanos now, PacketSink& out) noexcept;
  // With the SYN proxy: a client's SYN answered with a cookie; a client's
  // ACK on an untracked flow checked for one (a flow and the origin's SYN
  // if it carries one); a proxied flow's client segments and the origin's
  // SYN-ACK while its handshake is under way.
  [[nodiscard]] FrameResult proxy_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame,
                                      const FrameView& v, bool delayed_binding, time::Nanos now,
                                      PacketSink& out) noexcept;
  [[nodiscard]] FrameResult proxy_ack(const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                                      const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  [[nodiscard]] FrameResult proxied_handshake(TcpFlow& flow, const FrameView& v, time::Nanos now,
                                              PacketSink& out) noexcept;
  [[nodiscard]] FrameResult proxied_synack(TcpFlow& flow, const uint8_t* frame, const FrameView& v,
                                           time::Nanos now, PacketSink& out) noexcept;
  // Delayed binding (syn_proxy.h): a client segment of a flow not yet
  // bound, once parsed as any other (`r`: what would become of it). What
  // would go to the origin goes to the flow's stash instead, the first of
  // it sending the SYN; nothing goes to the origin.
  [[nodiscard]] FrameResult unbound_client(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r,
                                           time::Nanos now, PacketSink& out) noexcept;
  // A held head admitted on an unbound flow: its bytes into the stash.
  void stash_held(TcpFlow& flow, const ParseContext& ctx, const FrameView& v, time::Nanos now,
                  PacketSink& out) noexcept;
  // An origin segment of a flow not yet bound: only the answer to the SYN
  // (its SYN-ACK, or a refusal) means anything.
  [[nodiscard]] FrameResult unbound_origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                                           PacketSink& out) noexcept;
  // The origin's SYN-ACK on a binding flow: the flow renumbered to the
  // origin's numbers and its stash sent.
  void bind_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, PacketSink& out) noexcept;
  // A binding flow whose origin refused or never answered: the client reset.
  void binding_failed(TcpFlow& flow, PacketSink& out) noexcept;
  // The sweep's look at a binding flow: its SYN sent again after a second
  // without an answer, the client reset after SynProxy::kOriginAnswerDeadline.
  void keep_binding(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
  // The first forwarded bytes of a flow not yet bound: the SYN to the
  // origin, or an adopted flow's probe; and again while the origin is silent.
  void start_binding(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
  void bind_again(const TcpFlow& flow, PacketSink& out) noexcept;
  // What a binding flow's stash holds, to the origin at `seq` (its numbers).
  void send_stash(TcpFlow& flow, uint32_t seq, uint32_t ack, uint16_t window, PacketSink& out) noexcept;
  // Client payload on a flow the worker does not track: adopted
  // (flow_adopter.h) if it begins a request head and an adoption is
  // allowed, else both ends reset.
  [[nodiscard]] FrameResult untracked_client(const ServiceFrame& sf, uint8_t* frame, FrameView& v,
                                             const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  // A client segment of an adopted flow whose origin has not answered the
  // probe yet: dropped unread (nothing is charged before the connection is
  // shown to exist).
  [[nodiscard]] FrameResult adoption_unproved(TcpFlow& flow, const FrameView& v, time::Nanos now) noexcept;
  // An origin segment of an adopted flow waiting for its numbers: the
  // probe's answer binds it; anything else ends it.
  [[nodiscard]] FrameResult adopted_origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                                           PacketSink& out) noexcept;
  // An adopted flow's origin sending bytes from before the adoption: the
  // client had not acknowledged all it was sent, so its numbers are wrong.
  FrameResult adopted_too_late(TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;
  // Lends `flow` a context, taking one back from the slowest holder when
  // none is free. False: the segment is dropped (counted).
  [[nodiscard]] bool lend_context(TcpFlow& flow, const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  // Ends a victim's connection the way its slowness calls for: 408 to a
  // head (a reset if responses are outstanding), a reset to a body, a close
  // to an idle connection. Its context goes back.
  void end_slow(TcpFlow& flow, Owes what, PacketSink& out) noexcept;

  WorkerCounters& counters_;
  ClientShares shares_;
  ContextLender lender_;
  AnswerStore answers_;
  SegmentEmitter emitter_;
  SynProxy proxy_;
  FlowAdopter adopter_;
  // Per worker, as Linux's tcp_challenge_ack_limit: a flood of forged RSTs
  // and SYNs gets at most this many answers a second.
  Allowance challenges_{1000, 1000};
  // The RSTs that tell the origin about a segment of a connection the
  // worker does not know: a flood of forged ones reaches the origin at most
  // this many times a second (the client side is answered every time).
  Allowance untracked_resets_{1000, 2000};
  TcpTracker tracker_;
  StreamEditor editor_;
  AnswerSender sender_;
  RequestPath requests_;
  ResponsePath responses_;
  Evictor evictor_;
};

}  // namespace sluice::dataplane
