// Who gets in, and who has to go: a client's SYN (answered by the SYN
// proxy with a cookie, or tracked), the ACK that completes a proxied
// handshake, a proxied flow's handshake with its origin, the parse
// contexts a flow borrows (room made by evicting the slowest holder), and
// the deadlines and idle expiry the sweep keeps.
//
// Owns: the evictor's cursors. Touches: a flow's state and handshake
// numbers (through the tracker and the SYN proxy), its context.
#pragma once

#include <cstdint>

#include "adoption.h"
#include "answer_sender.h"
#include "client_resets.h"
#include "context_lender.h"
#include "eviction.h"
#include "forgotten_flows.h"
#include "frame.h"
#include "packet_sink.h"
#include "policy_snapshot.h"
#include "request_path.h"
#include "service_frame.h"
#include "syn_proxy.h"
#include "tcp_tracker.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class Admission {
 public:
  Admission(TcpTracker& tracker, ContextLender& lender, AnswerSender& sender, RequestPath& requests,
            ClientResets& resets, Adoption& adoption, SynProxy& proxy, const ForgottenFlows& forgotten,
            WorkerCounters& counters) noexcept
      : tracker_(tracker),
        lender_(lender),
        sender_(sender),
        requests_(requests),
        resets_(resets),
        adoption_(adoption),
        proxy_(proxy),
        forgotten_(forgotten),
        counters_(counters) {}

  // A client's opening SYN (no ACK): with the SYN proxy, answered with a
  // cookie (a SYN on a live connection gets a challenge ACK); without it,
  // tracked, with room made in a full table.
  [[nodiscard]] FrameResult client_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                       const limiter::CompiledPolicy& policy, time::Nanos now, PacketSink& out) noexcept;
  // A client segment (not an opening SYN) of no flow the worker tracks:
  // with the SYN proxy, an ACK is checked for a cookie (a flow, and the
  // origin's SYN or, with delayed binding, the flow's first bytes); payload
  // of no handshake this worker answered is the adoption room's; an empty
  // segment goes on untracked. `flow`: a flow to take the segment as any of
  // its own; else `r` says what becomes of it.
  struct Unknown {
    TcpFlow* flow = nullptr;
    FrameResult r;
  };
  [[nodiscard]] Unknown unknown_client(const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                       const limiter::CompiledPolicy& policy, time::Nanos now,
                                       PacketSink& out) noexcept;
  // A proxied flow's client segment while its origin has not answered: the
  // origin's SYN sent again, at most every 200 ms.
  [[nodiscard]] FrameResult proxied_client(TcpFlow& flow, const FrameView& v, time::Nanos now,
                                           PacketSink& out) noexcept;
  // A proxied flow's origin segment while its handshake is under way: only
  // its SYN-ACK, or a refusal, means anything.
  [[nodiscard]] FrameResult proxied_origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                                           PacketSink& out) noexcept;
  // Lends `flow` a context, taking one back from the slowest holder when
  // none is free. False: the segment is dropped (counted).
  [[nodiscard]] bool lend_context(TcpFlow& flow, const PolicySnapshot& snap, time::Nanos now,
                                  PacketSink& out) noexcept;
  // Ends a bound flow that has missed a deadline of `snap`'s policy
  // (deadline_keeper.h): 408 to a slow head, a close to an idle or silent
  // connection, resets to a stalled body; a proxied handshake the origin
  // never answered, with a reset to the client.
  void keep_deadlines(TcpFlow& flow, const PolicySnapshot& snap, time::Nanos now, PacketSink& out) noexcept;
  // Whether keep_deadlines() would act on it now (it only reads).
  [[nodiscard]] bool deadline_due(const TcpFlow& flow, const PolicySnapshot& snap, time::Nanos now) const noexcept;
  // A flow about to be forgotten, idle past its timeout: one inside a
  // request body (deadlines.body off) is reset both ways, so that no
  // connection the appliance forgets is mid-body, where adopting it
  // (flow_adopter.h) would be unsafe.
  void expiring(TcpFlow& flow, PacketSink& out) noexcept;

 private:
  enum class Handshake : uint8_t {
    kDone,       // dropped (a forgery, early data, or the handshake sent on to the origin)
    kUntracked,  // payload of no handshake this worker answered
    kSegment,    // a flow accepted for delayed binding, which takes the segment
  };
  [[nodiscard]] Handshake handshake_ack(const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                        bool delayed_binding, TcpFlow*& flow, time::Nanos now,
                                        PacketSink& out) noexcept;
  [[nodiscard]] bool track_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                               time::Nanos now, PacketSink& out) noexcept;
  [[nodiscard]] FrameResult proxy_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame,
                                      const FrameView& v, bool delayed_binding, time::Nanos now,
                                      PacketSink& out) noexcept;
  // A flow forgotten to make room for a new one; false if none may go.
  [[nodiscard]] bool make_room_for_flow(time::Nanos now, PacketSink& out) noexcept;
  // Ends a victim's connection the way its slowness calls for: 408 to a
  // head (a reset if responses are outstanding), a reset to a body, a close
  // to an idle connection. Its context goes back.
  void end_slow(TcpFlow& flow, Owes what, PacketSink& out) noexcept;

  TcpTracker& tracker_;
  ContextLender& lender_;
  AnswerSender& sender_;
  RequestPath& requests_;
  ClientResets& resets_;
  Adoption& adoption_;
  SynProxy& proxy_;
  const ForgottenFlows& forgotten_;  // connections the restart did not carry on
  WorkerCounters& counters_;
  Evictor evictor_;
};

}  // namespace sluice::dataplane
