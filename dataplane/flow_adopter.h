// Connections the appliance does not know, adopted mid-stream where the
// policy turns adoption on (it is off by default: such a connection is
// reset). After a restart, or once a flow has expired, a keep-alive
// client's next request arrives on a connection the appliance never saw
// open. Resetting it costs every open connection a failed request at each
// restart; adopting it must not let anything past the limiter, nor let a
// forger charge a victim. What is known, what is guessed, and how each
// guess is checked:
//
// - That the connection exists: proved by the origin before anything is
//   judged. A segment that begins a request head makes an unbound flow and
//   sends the origin a probe (below); the segment itself is dropped unread
//   and unacknowledged. Only once the origin has answered with its numbers
//   is the flow bound, and the client's next copy of the segment (its stack
//   sends it again: nothing acknowledged it) parsed, decided and forwarded
//   like any other. A forged segment (a spoofed address, a connection
//   nobody opened) gets a RST from the origin: nothing was charged, counted
//   or forwarded. Each such probe costs the origin one segment, within the
//   adopter's allowance per worker and the client address's share of flows.
// - Where the client's stream stands: a guess. A segment is adopted only if
//   its payload begins with a whole request line (method, target, version);
//   parsing starts there. Anything else (the middle of a body, say) resets
//   both ends as before. Were the origin in fact inside an earlier request's
//   body, what it reads as requests could hide in what the appliance reads
//   as a body, so an adopted connection carries heads only: a request with a
//   body or a protocol switch resets it, unjudged (the client retries on a
//   new connection, through the SYN proxy). With heads only, every byte the
//   origin receives lies in a judged head, but the first request the origin
//   reads can differ from the one judged: a head that is in fact the end of
//   a body, with a request hidden after it (config/README.md, `adoption`,
//   says so next to the setting).
// - The numbers of each stream: learnt from the origin. The flow is adopted
//   unbound (syn_proxy.h's delayed binding), numbered as the client sees
//   both streams (seq, ack, timestamps). The probe is an ACK in the
//   client's name whose sequence number lies far outside the origin's
//   window, which TCP answers (RFC 9293 3.10.7.4) with an ACK carrying its
//   next sequence number and the next byte it expects. Their differences
//   from the client's view are the flow's shift bases (whatever the SYN
//   proxy's cookie or inserted fields had made them), and the origin's
//   timestamp clock is offset to continue the client's. An origin that
//   answers with data or a FIN (it was mid-response, or closing), resets,
//   or stays silent for SynProxy::kOriginAnswerDeadline: both ends reset.
// - What the client acknowledged: taken as everything the origin sent. A
//   client sends its next request once the response is in, so this holds
//   unless it pipelines; an origin segment from before the adoption point
//   showing up later proves it wrong, and resets both ends.
// - Window scales: unknown; the fields pass unrescaled (the SYN proxy
//   promises clients Linux's scale, 7, which Linux origins also choose).
//
// Adoptions per worker are limited (kPerSecond, kBurst), so a flood of
// forged mid-stream segments costs the origin at most that many probes,
// each of which it answers with a RST if no such connection exists, and
// costs the addresses it names nothing.
//
// Owns: the adoption allowance. Touches: an adopted flow's handshake fields
// (isns, timestamps, bases, binding) until it is bound.
#pragma once

#include <cstdint>
#include <span>

#include "allowance.h"
#include "flow_segment.h"
#include "frame.h"
#include "packet_sink.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

class FlowAdopter {
 public:
  static constexpr uint32_t kPerSecond = 2000;
  static constexpr uint32_t kBurst = 4096;
  // How far before the client's adopted byte the probe's sequence number
  // lies: outside any window, whatever the flow's shift.
  static constexpr uint32_t kProbeDistance = 0x40000000;

  explicit FlowAdopter(SegmentEmitter& emitter) noexcept : emitter_(emitter) {}

  // Whether `payload` begins with a whole request line: 1 to 20 token
  // characters, a space, ..., " HTTP/1." and a digit, then its end.
  [[nodiscard]] static bool begins_request(std::span<const uint8_t> payload) noexcept;
  // Whether another adoption may start at `now` (one taken if so).
  [[nodiscard]] bool allows(time::Nanos now) noexcept;
  // A new flow (key, hash, share and stash set) for the client segment `v`:
  // established towards the client, unbound, numbered as the client sees
  // both streams.
  void adopt(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now) noexcept;
  // The flow's first forwarded bytes: the probe to the origin.
  void bind(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
  void probe(const TcpFlow& flow, PacketSink& out) noexcept;
  // The origin's answer to the probe (`v`: an ACK without data, SYN, FIN or
  // RST): the flow bound to the origin's numbers. What the origin's sequence
  // numbers of each stream moved by: the client's view minus the origin's
  // for its own stream (pending edits' sender side), the origin's minus the
  // client's for the client's (their receiver side).
  struct Moved {
    uint32_t origin_stream = 0;
    uint32_t client_stream = 0;
  };
  [[nodiscard]] Moved answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept;

 private:
  SegmentEmitter& emitter_;
  Allowance allowance_{kPerSecond, kBurst};
};

}  // namespace sluice::dataplane
