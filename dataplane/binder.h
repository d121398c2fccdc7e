// Delayed binding (syn_proxy.h) and the binding of an adopted flow
// (flow_adopter.h): a flow that has no origin connection yet is parsed
// like any other, but what it would forward waits in its stash (the
// context lender's bind stashes); the first of it sends the SYN, or the
// adopted flow's probe. The origin's answer renumbers the flow and releases
// the stash; a refusal, or silence past SynProxy::kOriginAnswerDeadline,
// resets the client.
//
// Owns: nothing of its own; the stashes are lent (ContextLender), because
// every end of a flow returns what it holds. Touches: a flow's binding
// state and numbers, its stash, its context's pending edits (renumbered).
#pragma once

#include <cstdint>

#include "answer_sender.h"
#include "context_lender.h"
#include "flow_adopter.h"
#include "flow_segment.h"
#include "frame.h"
#include "packet_sink.h"
#include "stream_editor.h"
#include "syn_proxy.h"
#include "tcp_tracker.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class Binder {
 public:
  Binder(ContextLender& lender, StreamEditor& editor, AnswerSender& sender, TcpTracker& tracker,
         SegmentEmitter& emitter, SynProxy& proxy, FlowAdopter& adopter, WorkerCounters& counters) noexcept
      : lender_(lender),
        editor_(editor),
        sender_(sender),
        tracker_(tracker),
        emitter_(emitter),
        proxy_(proxy),
        adopter_(adopter),
        counters_(counters) {}

  // A client segment of a flow not yet bound, once parsed as any other
  // (`r`: what would become of it). What would go to the origin goes to the
  // flow's stash instead, the first of it starting the binding; nothing
  // goes to the origin.
  [[nodiscard]] FrameResult client(TcpFlow& flow, uint8_t* frame, FrameView& v, FrameResult r, time::Nanos now,
                                   PacketSink& out) noexcept;
  // A held head admitted on an unbound flow: its bytes [client.held_seq,
  // end) into the stash.
  void stash_held(TcpFlow& flow, const ParseContext& ctx, uint32_t end, time::Nanos now, PacketSink& out) noexcept;
  // An origin segment of a flow not yet bound: only the answer to the SYN
  // (its SYN-ACK, or a refusal) or to the probe means anything.
  [[nodiscard]] FrameResult origin(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                                   PacketSink& out) noexcept;
  // The sweep's look at a binding flow: its SYN (or probe) sent again after
  // a second without an answer, the client reset after the deadline.
  void keep(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
  // Whether keep() would act on it now (it only reads).
  [[nodiscard]] static bool due(const TcpFlow& flow, time::Nanos now) noexcept;

 private:
  // The origin's SYN-ACK: the flow renumbered to the origin's numbers and
  // its stash sent.
  void answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, PacketSink& out) noexcept;
  // An origin segment of an adopted flow waiting for its numbers: the
  // probe's answer binds it; anything else ends it.
  [[nodiscard]] FrameResult adoption_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v,
                                              time::Nanos now, PacketSink& out) noexcept;
  // What the stash holds, to the origin at `seq` (its numbers).
  void send_stash(TcpFlow& flow, uint32_t seq, uint32_t ack, uint16_t window, PacketSink& out) noexcept;
  void start(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
  void again(const TcpFlow& flow, PacketSink& out) noexcept;
  // The origin refused or never answered: the client reset.
  void failed(TcpFlow& flow, PacketSink& out) noexcept;

  ContextLender& lender_;
  StreamEditor& editor_;
  AnswerSender& sender_;
  TcpTracker& tracker_;
  SegmentEmitter& emitter_;
  SynProxy& proxy_;
  FlowAdopter& adopter_;
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane
