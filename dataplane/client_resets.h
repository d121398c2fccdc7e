// A client's RST on a tracked flow, and the challenge ACKs (RFC 5961) that
// answer a RST or SYN that may be forged. Only an exact-sequence RST ends a
// connection (rst_acceptance.h judges where the client's stream stands); one
// elsewhere in the window is answered with the flow's numbers, which a real
// peer answers with a RST at the right one and a blind attacker never sees.
//
// Owns: the worker's challenge allowance. Touches: a flow's state (reset),
// the RST's sequence number (shifted by seqadj).
#pragma once

#include <cstdint>

#include "allowance.h"
#include "frame.h"
#include "packet_sink.h"
#include "stream_editor.h"
#include "tcp_tracker.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class ClientResets {
 public:
  ClientResets(TcpTracker& tracker, StreamEditor& editor, WorkerCounters& counters) noexcept
      : tracker_(tracker), editor_(editor), counters_(counters) {}

  // A client's RST on `flow`, judged before anything of it is believed: a
  // forged one must not even move the flow's timestamps.
  [[nodiscard]] FrameResult on_rst(TcpFlow& flow, uint8_t* frame, FrameView& v, time::Nanos now,
                                   PacketSink& out) noexcept;
  // A challenge ACK on `flow`, at most as many a second as the allowance
  // lets through (Linux's tcp_challenge_ack_limit); none before the flow is
  // synchronized, when it has no numbers to put in one.
  void challenge(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;

 private:
  TcpTracker& tracker_;
  StreamEditor& editor_;
  WorkerCounters& counters_;
  Allowance challenges_{1000, 1000};
};

}  // namespace sluice::dataplane
