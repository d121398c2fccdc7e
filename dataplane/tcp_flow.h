// The state the appliance keeps for one TCP connection to a service port:
// where each byte stream stands (what has been parsed and forwarded), what a
// segment sent in the flow's name needs (addresses, L2 headers, timestamps,
// MSS), and where the flow is in its life. About 200 bytes; the parser's
// buffers live in a ParseContext that a flow borrows only while a request or
// response is in flight.
#pragma once

#include <cstdint>

#include "flow_key.h"
#include "time/clock.h"

namespace sluice::dataplane {

enum class FlowState : uint8_t {
  kSynSent,      // the client's SYN seen
  kSynReceived,  // the origin's SYN-ACK seen
  kEstablished,  // the client's ACK of the SYN-ACK seen: payload is parsed
  kPassThrough,  // switched protocols (Upgrade, CONNECT) or no longer framable: bridged only
  kRefusing,     // a request was refused; its answer waits for earlier responses
  kAnswered,     // the answer and FIN went out, the origin got its RST
  kClosed,       // FIN both ways, or a RST: kept briefly for stragglers
};

// Whether the origin has a connection for a flow yet. A flow the SYN
// proxy accepted with delayed binding (syn_proxy.h) has none until its
// first request is forwarded; every other flow is bound from its start.
enum class Binding : uint8_t {
  kBound,
  kUnbound,  // the client is connected to the appliance alone; the origin's stream is numbered from the cookie
  kBinding,  // the SYN to the origin is out; what goes to the origin waits in the flow's stash
};

inline constexpr uint8_t kMaxL2Header = 22;  // Ethernet + two VLAN tags

struct TcpFlow {
  FlowKey key;
  uint64_t hash = 0;
  time::Nanos last_seen = 0;
  // When the client's stream and the origin's last carried new bytes (the
  // handshake counts as the client's): what the deadlines of a head, a body
  // and an idle keep-alive connection are measured from (deadline_keeper.h).
  // Pure acknowledgements do not count: they cost a client nothing to send.
  time::Nanos client_progress = 0;
  time::Nanos origin_progress = 0;
  FlowState state = FlowState::kSynSent;
  uint8_t ip_version = 4;
  bool timestamps = false;   // both SYNs carried the timestamp option
  bool client_fin = false;
  bool origin_fin = false;
  uint8_t l2_to_origin_len = 0;
  uint8_t l2_to_client_len = 0;
  uint8_t l2_to_origin[kMaxL2Header];  // as the client's frames carry it
  uint8_t l2_to_client[kMaxL2Header];  // as the origin's frames carry it

  uint32_t client_isn = 0;
  uint32_t origin_isn = 0;
  uint32_t client_next = 0;   // next client byte to parse; earlier ones were parsed (and charged) once
  uint32_t origin_next = 0;   // next origin byte to frame: the origin's stream is whole up to here
  uint32_t client_tsval = 0;  // latest timestamps seen, echoed by segments sent in the flow's name
  uint32_t origin_tsval = 0;
  uint16_t client_mss = 536;  // from the client's SYN: the largest segment the client accepts
  uint16_t origin_mss = 536;  // from the origin's SYN-ACK
  uint16_t origin_window = 0; // raw window field of the origin's latest segment

  // The answer of a refused request: client bytes up to answer_ack are
  // consumed, the answer starts at origin sequence answer_seq, the origin's
  // socket is reset at reset_seq.
  uint32_t answer_ack = 0;
  uint32_t answer_seq = 0;
  uint32_t reset_seq = 0;
  // A head split across segments is held, not forwarded, from this client
  // sequence number on, until it is complete and decided.
  uint32_t held_seq = 0;
  uint16_t answer_len = 0;
  uint64_t answer_pos = 0;  // in the worker's AnswerStore, once sent

  // Once the appliance has edited a byte stream of the flow (the RateLimit
  // fields inserted into admitted responses, a refused request cut out of the
  // client's stream and its answer put into the origin's), sequence numbers
  // are shifted towards the receiver and acknowledgements back: by the
  // context's SeqShifts while edits are pending, by these bases (receiver
  // minus sender, modulo 2^32) once the context is gone.
  bool stream_edited = false;
  uint32_t to_client_base = 0;
  uint32_t to_origin_base = 0;
  uint32_t origin_ack = 0;  // the origin's latest acknowledgement (its numbers)

  // A flow whose handshake the SYN proxy made (syn_proxy.h): the client's
  // view of the origin's stream numbered from the cookie (the shift base
  // carries the difference), each end's timestamp clock its own, and window
  // fields scaled as each end expects.
  bool proxied = false;
  bool client_sack = false;     // the client's SYN offered SACK (and the cookie kept it)
  int8_t client_wscale = -1;    // the client's window scale, as the cookie kept it; -1: none
  int8_t window_to_client_shift = 0;  // the origin's window fields towards the client: << n, or >> -n
  int8_t window_to_origin_shift = 0;  // the client's towards the origin
  uint32_t cookie_isn = 0;            // the appliance's ISN towards the client
  uint32_t cookie_tsval = 0;          // its SYN-ACK's TSval (the client's ACK echoed it)
  uint32_t ts_offset = 0;             // the origin's TSval plus this is what the client sees
  time::Nanos syn_sent_at = 0;        // the SYN to the origin last sent (before the origin answered)
  time::Nanos bind_since = 0;         // the SYN to the origin first sent (delayed binding)
  Binding binding = Binding::kBound;
  // A connection begun before the appliance knew it (a restart, an expired
  // flow), taken up at a client's request head (flow_adopter.h): it never
  // carries a request body, and nothing the origin sent before it was
  // adopted (origin_isn + 1) may follow.
  bool adopted = false;
  uint16_t adopted_window = 0;  // the window field of the client's adopted segment: what the probe and stash offer

  int32_t context = -1;  // the borrowed ParseContext, or -1
  int32_t share = -1;    // the client's share of flows and contexts (client_shares.h)
  int32_t hold = -1;     // the EditHold with the edits the client has not acknowledged, or -1 (never with a context)
  int32_t stash = -1;    // until bound: the BindStash buffer with what goes to the origin once it answers, or -1
};

// A window field scaled by one end's shift, as the other end reads it
// (shift: the difference of the two; RFC 7323 2.3), at most 65535, and not
// 0 unless it was.
[[nodiscard]] inline uint16_t rescale_window(uint16_t window, int8_t shift) noexcept {
  if (shift == 0 || window == 0) return window;
  uint32_t w = shift > 0 ? uint32_t{window} << shift : uint32_t{window} >> -shift;
  if (w > 0xffff) w = 0xffff;
  return static_cast<uint16_t>(w != 0 ? w : 1);
}

// Sequence-number comparisons modulo 2^32 (RFC 9293 3.4).
[[nodiscard]] inline bool seq_lt(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b) < 0; }
[[nodiscard]] inline bool seq_le(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b) <= 0; }

// Where a segment's payload [seq, seq + len) stands against a byte stream
// read up to `next`: all of it read before (a retransmission), a gap before
// it (ahead of the stream), or new bytes from `next` on (it may start with
// bytes read before).
enum class Arrival : uint8_t { kRepeat, kAhead, kNext };
[[nodiscard]] inline Arrival arrival(uint32_t next, uint32_t seq, uint32_t len) noexcept {
  if (seq_le(seq + len, next)) return Arrival::kRepeat;
  if (seq_lt(next, seq)) return Arrival::kAhead;
  return Arrival::kNext;
}

}  // namespace sluice::dataplane
