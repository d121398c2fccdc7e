// The SYN proxy (policy `syn_proxy: on`, the default; netfilter's SYNPROXY
// is the reference design). The appliance answers a client's SYN to a
// service port itself, with a SYN cookie (syn_cookie.h), and keeps nothing:
// a flood of spoofed SYNs costs a SipHash and a SYN-ACK each, takes no flow
// and never reaches the origin. Only a client that completes the handshake
// gets a flow, and only then does the appliance open the origin's
// connection, replaying the client's options (MSS, window scale, SACK,
// timestamps) in the client's name. Once the origin answers, the appliance
// acknowledges it in the client's name and opens the client's window (its
// SYN-ACK offered none, so the client waits rather than send into a
// connection that does not exist yet); from then on the flow is bridged as
// any other, its numbers translated:
//
// - sequence numbers: the client knows the origin's stream from the
//   cookie, the origin from its own ISN; the difference is the flow's
//   to_client shift base, which the stream editor applies anyway;
// - timestamps: each end's clock is its own; the origin's TSvals towards
//   the client move by ts_offset, the client's echoes back;
// - window fields: the client was promised window scale 7 (or none); the
//   origin scales by what it chose. Fields are rescaled where the two
//   differ (TcpFlow::window_to_client_shift, window_to_origin_shift).
//
// What the client is promised comes from what the origin did before
// (origin_profiles.h): no timestamps (and so no window scale or SACK, which
// travel in them) when the origin showed none. An origin that refuses what
// the client was promised ends that connection (both reset) and is known
// better for the next one.
//
// The appliance keeps no retransmission timer: the ends drive them. The
// SYN to the origin lost, the client (connected, its window shut) probes,
// and each probe sends the SYN again; the ACK to the origin lost, the
// origin's SYN-ACK comes again and is acknowledged again; the client's ACK
// lost, the client's SYN-ACK... its SYN again gets the same cookie.
//
// Owns: the cookies' keys and the origin profiles. Touches: a proxied
// flow's handshake fields (isns, options, shifts, timestamps, state up to
// kEstablished).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "flow_segment.h"
#include "frame.h"
#include "origin_profiles.h"
#include "packet_sink.h"
#include "syn_cookie.h"
#include "tcp_flow.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class SynProxy {
 public:
  // The window scale the appliance offers clients (Linux's usual): the
  // origin's own, whatever it is, is rescaled to it.
  static constexpr int8_t kClientWscale = 7;
  // How long the origin has to answer the SYN sent in the client's name
  // (sent again on each of the client's probes, at most every 200 ms)
  // before the client is reset.
  static constexpr time::Nanos kOriginAnswerDeadline = 5 * time::kNanosPerSecond;

  SynProxy(std::span<const uint8_t, 32> seed, SegmentEmitter& emitter, WorkerCounters& counters) noexcept;

  // A client's SYN (without ACK) to a service port: answered with a cookie
  // SYN-ACK in the origin's name. Nothing is kept.
  void answer_syn(const uint8_t* frame, const FrameView& v, const FlowKey& key, time::Nanos now,
                  PacketSink& out) noexcept;
  // A client's segment with ACK (no SYN, no RST) on a flow that is not
  // tracked: the grant of the handshake it completes, if it carries a cookie
  // this worker issued within two minutes (the ACK itself, or the client's
  // probe of its shut window when the ACK was lost). Counted either way.
  [[nodiscard]] std::optional<SynCookieGrant> check_ack(const FlowKey& key, const FrameView& v,
                                                        time::Nanos now) noexcept;
  // A new flow (`flow`: key and hash set) for a valid cookie ACK: the
  // handshake's fields, and the SYN to the origin in the client's name.
  void open(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
            PacketSink& out) noexcept;
  // The SYN to the origin again (the client probed: it is still waiting).
  void resend_syn(const TcpFlow& flow, PacketSink& out) noexcept;
  // The origin's SYN-ACK on a proxied flow waiting for it (`v`, from the
  // origin). True: the flow is established, translated, both ends told.
  // False: the origin cannot do what the client was promised (timestamps);
  // the caller resets both ends. The origin's profile is learnt either way.
  [[nodiscard]] bool origin_answered(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now,
                                     PacketSink& out) noexcept;
  // The origin's SYN-ACK again on an established proxied flow: its ACK was
  // lost. Acknowledged again.
  void acknowledge_again(const TcpFlow& flow, PacketSink& out) noexcept;
  // A proxied flow that ends before the origin answered (the origin reset
  // it, or could not keep the promise): the client reset, in its numbers.
  void reset_client(const TcpFlow& flow, PacketSink& out) noexcept;
  // The same, and the origin's half-open connection (its SYN-ACK `v`)
  // released.
  void reset_both(const TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;

  // A forwarded segment of a proxied flow, last thing before it leaves:
  // timestamps and window as the receiver expects them.
  static void to_origin(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept;
  static void to_client(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept;

 private:
  SynCookies cookies_;
  OriginProfiles profiles_;
  SegmentEmitter& emitter_;
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane
