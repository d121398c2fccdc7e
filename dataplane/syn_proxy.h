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
//   the client move by proxy.ts_offset, the client's echoes back;
// - window fields: the client was promised window scale 7 (or none); the
//   origin scales by what it chose. Fields are rescaled where the two
//   differ (TcpFlow::proxy.window_to_client_shift, proxy.window_to_origin_shift).
//
// What the client is promised comes from what the origin did before
// (origin_profiles.h): no timestamps (and so no window scale or SACK, which
// travel in them) when the origin showed none. An origin that refuses what
// the client was promised ends that connection (both reset) and is known
// better for the next one.
//
// Delayed binding (policy `binding: delayed`, the default): the cookie
// SYN-ACK offers a window (BindStash::kWindow), and a valid cookie ACK makes
// a flow that is established towards the client and unbound: the appliance
// numbers the origin's stream from the cookie itself, answers what it
// refuses in that numbering, and opens the origin's connection only when
// the request path first forwards a byte. Until the origin answers, what it
// forwards waits in the flow's stash, unacknowledged; the origin's SYN-ACK
// then gives the real numbers, the flow's shifts are renumbered to them
// (the client's view never changes), and the stash goes to the origin. A
// client refused before that, however many times on a kept-open
// connection, never reaches the origin at all.
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

#include "bind_stash.h"
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
  // SYN-ACK in the origin's name, its window open for delayed binding.
  // Nothing is kept.
  void answer_syn(const uint8_t* frame, const FrameView& v, const FlowKey& key, bool delayed_binding,
                  time::Nanos now, PacketSink& out) noexcept;
  // A client's segment with ACK (no SYN, no RST) on a flow that is not
  // tracked: the grant of the handshake it completes, if it carries a cookie
  // this worker issued within two minutes (the ACK itself, or the client's
  // probe of its shut window when the ACK was lost). Counted either way.
  [[nodiscard]] std::optional<SynCookieGrant> check_ack(const FlowKey& key, const FrameView& v,
                                                        time::Nanos now) noexcept;
  // A client segment with data, untracked and without a valid cookie, that
  // could be one sent after a cookie ACK still on its way (delayed binding
  // offers a window): dropped rather than reset, for the client to send
  // again once its ACK has made the flow.
  [[nodiscard]] bool may_follow_handshake(const FlowKey& key, const FrameView& v, time::Nanos now) const noexcept {
    return cookies_.may_follow(key, v.seq, v.ack, BindStash::kWindow, now);
  }
  // A new flow (`flow`: key and hash set) for a valid cookie ACK: the
  // handshake's fields, and the SYN to the origin in the client's name.
  void open(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
            PacketSink& out) noexcept;
  // Delayed binding: a new flow (`flow`: key, hash and stash set) for a
  // valid cookie ACK, established towards the client and unbound.
  void accept(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame, const FrameView& v,
              time::Nanos now) noexcept;
  // An unbound flow's first forwarded bytes: the SYN to the origin.
  void bind(TcpFlow& flow, time::Nanos now, PacketSink& out) noexcept;
  // The origin's SYN-ACK on a binding flow (`v`). True: the flow is bound,
  // its numbers the origin's, and `delta` what the origin's sequence
  // numbers moved by (the appliance's numbering minus the origin's: pending
  // edits are renumbered by it). False: as origin_answered's.
  [[nodiscard]] bool bound(TcpFlow& flow, const uint8_t* frame, const FrameView& v, uint32_t& delta) noexcept;
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
  // The origin's half-open connection (its SYN-ACK `v`) released, at the
  // number it expects.
  void reset_origin(const TcpFlow& flow, const FrameView& v, PacketSink& out) noexcept;

  // The window field of a segment to the origin in the client's name
  // before the client's own has been seen: all the client's scale allows.
  [[nodiscard]] static uint16_t window_to_origin(const TcpFlow& flow) noexcept;
  // A forwarded segment of a proxied flow, last thing before it leaves:
  // timestamps and window as the receiver expects them.
  static void to_origin(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept;
  static void to_client(const TcpFlow& flow, uint8_t* frame, FrameView& v) noexcept;

 private:
  void take_client_numbers(TcpFlow& flow, const SynCookieGrant& g, const uint8_t* frame,
                           const FrameView& v) noexcept;
  // The origin's profile learnt from its SYN-ACK; false if it cannot do
  // what the client was promised.
  [[nodiscard]] bool learn(const TcpFlow& flow, const FrameView& v) noexcept;
  // The origin's numbers, clock and scale from its SYN-ACK, and the
  // translation to the client's view; returns the sequence delta.
  uint32_t take_origin_numbers(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept;

  SynCookies cookies_;
  OriginProfiles profiles_;
  SegmentEmitter& emitter_;
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane
