// Client payload on a connection the worker does not track (the appliance
// restarted, or the flow expired): adopted (flow_adopter.h) where the
// policy turns adoption on, the segment begins a request head and an
// adoption is allowed; else both ends are reset, so that the client comes
// back through the appliance. An adopted flow's client segments are
// dropped unread until its origin has answered the probe: nothing is
// charged before the connection is shown to exist.
//
// Owns: the allowance of RSTs to the origin for unknown connections.
// Touches: a new flow (inserted, given a stash, adopted).
#pragma once

#include <cstdint>

#include "allowance.h"
#include "answer_sender.h"
#include "context_lender.h"
#include "flow_adopter.h"
#include "frame.h"
#include "packet_sink.h"
#include "service_frame.h"
#include "tcp_tracker.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class Adoption {
 public:
  Adoption(TcpTracker& tracker, ContextLender& lender, AnswerSender& sender, FlowAdopter& adopter,
           WorkerCounters& counters) noexcept
      : tracker_(tracker), lender_(lender), sender_(sender), adopter_(adopter), counters_(counters) {}

  // Client payload on an untracked flow (`adoption`: the policy's switch).
  [[nodiscard]] FrameResult untracked_client(const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                             bool adoption, time::Nanos now, PacketSink& out) noexcept;
  // A client segment of an adopted flow whose origin has not answered the
  // probe yet (the sweep sends it again each second): dropped unread, to be
  // sent again.
  [[nodiscard]] static FrameResult unproved(TcpFlow& flow, const FrameView& v, time::Nanos now) noexcept {
    flow.last_seen = now;
    return drop_frame(v);
  }

 private:
  TcpTracker& tracker_;
  ContextLender& lender_;
  AnswerSender& sender_;
  FlowAdopter& adopter_;
  WorkerCounters& counters_;
  // A flood of forged segments reaches the origin as RSTs at most this
  // many times a second (the client side is answered every time).
  Allowance untracked_resets_{1000, 2000};
};

}  // namespace sluice::dataplane
