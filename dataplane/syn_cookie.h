// SYN cookies: the appliance answers a client's SYN to a service port itself
// and keeps nothing about it. Everything the handshake must remember travels
// in the SYN-ACK and comes back in the client's ACK, so a SYN flood costs no
// table slots and a forged ACK is refused without a lookup. The design is
// Linux's (net/ipv4/syncookies.c, net/ipv6/syncookies.c; netfilter SYNPROXY
// uses the same cookies); the codec is ours.
//
// The cookie is the SYN-ACK's sequence number (ISN):
//
//   H1(flow) + client ISN + (minute << 24) + MAC
//   MAC = (H2(flow, minute, mss index) with its 2 low bits cleared) | mss index
//
// H1 and H2 are SipHash-2-4 under two secret keys. H1 makes the ISN
// unpredictable off the path (and hides the minute from a blind forger); the
// low 24 bits are the MAC, the MSS index (into a table of four) in its two
// low bits. The top 8 bits hold the minute counter so the check knows which
// H2 to recompute; cookies from this minute and the previous one are
// accepted, so a cookie lives 60 to 120 s: enough for the SYN-ACK's
// retransmissions and a slow ACK, short enough that a cookie seen on the
// path is soon worthless. A random acknowledgement number therefore passes
// about once in 2^29 tries (2 of 256 minutes, 4 of 2^24 MACs with an index
// each); one whose minute bits were right, once in 2^22. Unlike Linux, which
// adds the index to the MAC, H2 covers the index: an ACK 1 to 3 off does not
// pass with a neighbouring (perhaps larger) MSS.
//
// 32 bits leave no room for the client's other SYN options. When the client
// sent timestamps, the low 6 bits of the SYN-ACK's TSval carry its window
// scale and SACK-permitted, and its ACK echoes them in TSecr. Without
// timestamps they cannot come back, so the SYN-ACK offers neither window
// scaling nor SACK and the connection runs without them (unscaled 64 KiB
// windows, no selective acknowledgement); the MSS, rounded down to one of
// four table entries, is always kept.
//
// Pure and reentrant: no DPDK, no allocation, no system call on offer() or
// check(); the caller's clock (time::Nanos) is the only time base, so tests
// drive minutes by hand.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "dataplane/flow_key.h"
#include "dataplane/frame.h"
#include "time/clock.h"

namespace sluice::dataplane {

// What the appliance's SYN-ACK carries, or must honour, for one client SYN.
struct SynCookieOffer {
  uint32_t isn = 0;         // the SYN-ACK's sequence number: the cookie
  uint16_t client_mss = 0;  // the client's MSS rounded down to the table: the most the appliance sends per segment
  bool timestamps = false;  // the SYN-ACK carries a timestamp option (TSval below, TSecr the SYN's TSval)
  uint32_t tsval = 0;       // with timestamps: the SYN-ACK's TSval, the options in its low 6 bits; the
                            // milliseconds of `now`, the clock the appliance's later TSvals must follow
  bool sack = false;        // the SYN-ACK carries SACK-permitted
  int8_t wscale = -1;       // the SYN-ACK's window scale option (the appliance's own shift), -1: none
};

// What a valid cookie ACK gives back: the handshake as if it had been kept.
struct SynCookieGrant {
  uint16_t client_mss = 0;    // as in the offer
  bool timestamps = false;    // the ACK carries timestamps, so both sides use them
  bool sack = false;          // SACK was offered both ways
  int8_t client_wscale = -1;  // the client's shift; -1: window scaling off in both directions
  uint32_t client_isn = 0;    // the client's SYN sequence number (the ACK's seq - 1)
  uint32_t cookie_isn = 0;    // the appliance's SYN-ACK sequence number (the ACK's ack - 1)
};

class SynCookies {
 public:
  // The worker seeds from getrandom(); tests pass fixed bytes. Two halves,
  // two SipHash keys: H1's and H2's.
  explicit SynCookies(std::span<const uint8_t, 32> seed) noexcept;

  // The cookie for a client SYN: `key` its flow (client first), `client_isn`
  // its sequence number, `syn` its options. Options the appliance will not
  // use are cleared in `syn` by the caller (sack_permitted), or passed as
  // `our_wscale` = -1 (the shift the appliance announces, learnt from the
  // origin; above 14 is read as 14). Window scaling is in effect only when
  // both sides announce it, so only then is the client's shift remembered.
  [[nodiscard]] SynCookieOffer offer(const FlowKey& key, uint32_t client_isn, const TcpOptions& syn, int8_t our_wscale,
                                     time::Nanos now) const noexcept;

  // The client's ACK that would finish the handshake: `seq` and `ack` as on
  // the wire, `opts` its options (the timestamp's TSecr returns the options).
  // nullopt: `ack - 1` is not a cookie this codec issued for `key` and
  // `seq - 1` in this minute or the previous one.
  [[nodiscard]] std::optional<SynCookieGrant> check(const FlowKey& key, uint32_t seq, uint32_t ack,
                                                    const TcpOptions& opts, time::Nanos now) const noexcept;

  // Whether a client segment that carries no valid cookie could still
  // follow one this codec issued, within the first `window` bytes after the
  // handshake: its ACK reordered behind it (or lost). The minute bits are
  // checked first (one hash), then the MAC for each MSS index (up to eight
  // more, for the few that pass): a random acknowledgement passes about
  // once in 16 000. For telling such a segment (dropped; the client sends
  // it again) from one of a connection the appliance lost track of (reset,
  // so the client reconnects rather than hang).
  [[nodiscard]] bool may_follow(const FlowKey& key, uint32_t seq, uint32_t ack, uint32_t window,
                                time::Nanos now) const noexcept;

  // The MSS tables (Linux's): a client's MSS is rounded down to the largest
  // entry not above it, or to the smallest when it is below them all.
  static constexpr std::array<uint16_t, 4> kMssV4{536, 1300, 1440, 1460};
  static constexpr std::array<uint16_t, 4> kMssV6{1280 - 60, 1480 - 60, 1500 - 60, 9000 - 60};

 private:
  [[nodiscard]] uint32_t keyed_hash(const FlowKey& key, uint32_t minute, int which,
                                    uint32_t mss_index = 0) const noexcept;

  std::array<std::array<uint8_t, 16>, 2> keys_{};
};

}  // namespace sluice::dataplane
