// The state the appliance keeps for one TCP connection to a service port:
// where each byte stream stands (what has been parsed and forwarded), what a
// segment sent in the flow's name needs (addresses, L2 headers, timestamps,
// MSS), and where the flow is in its life. About 200 bytes, in two halves (the client's end and the origin's) and small
// sub-states (the answer, seqadj, the SYN proxy, binding, adoption); the parser's
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

// What the appliance follows of one end of the connection: its initial and
// next sequence numbers, its latest timestamp, the largest segment it
// accepts, whether it has sent its FIN, when its stream last carried new
// bytes, and the link-layer header its frames carry (frames written in its
// name towards the other end carry the same).
struct FlowEnd {
  uint32_t isn = 0;
  uint32_t next = 0;
  uint32_t tsval = 0;  // latest seen, echoed by segments sent in the flow's name
  uint16_t mss = 536;  // from its SYN (or SYN-ACK)
  bool fin = false;
  uint8_t l2_len = 0;
  // When its stream last carried new bytes (the handshake counts as the
  // client's): what the deadlines of a head, a body and an idle keep-alive
  // connection are measured from (deadline_keeper.h). Pure acknowledgements
  // do not count: they cost a client nothing to send.
  time::Nanos progress = 0;
  uint8_t l2[kMaxL2Header];
};

// The client's end. `next` is the next client byte to parse: earlier ones
// were parsed (and charged) once.
struct ClientEnd : FlowEnd {
  // A head split across segments is held, not forwarded, from this client
  // sequence number on, until it is complete and decided.
  uint32_t held_seq = 0;
  // How far it has read the origin's stream (its latest acknowledgement,
  // in the origin's numbers) and when that last moved: a response it does
  // not read has a deadline (deadline_keeper.h). read_progress 0: not yet
  // known.
  uint32_t read_to = 0;
  time::Nanos read_progress = 0;
  bool sack = false;   // its SYN offered SACK (and, proxied, the cookie kept it)
  int8_t wscale = -1;  // its window scale, as the cookie kept it; -1: none
};

// The origin's end. `next` is the next origin byte to frame: the origin's
// stream is whole up to there.
struct OriginEnd : FlowEnd {
  uint16_t window = 0;  // raw window field of its latest segment
  uint32_t ack = 0;     // its latest acknowledgement (its numbers)
  // Since when the client has had bytes of it to read (its acknowledgement
  // short of `next`), measured from when it last had read everything.
  time::Nanos unread_since = 0;
};

// The answer of a refused request: client bytes up to `ack` are consumed,
// the answer starts at origin sequence `seq`, the origin's socket is reset
// at `answer.reset_seq`.
struct FlowAnswer {
  uint32_t ack = 0;
  uint32_t seq = 0;
  uint32_t reset_seq = 0;
  uint16_t len = 0;
  uint64_t pos = 0;  // in the worker's AnswerStore, once sent
};

// Sequence adjustment (conntrack's seqadj): once the appliance has edited a
// byte stream of the flow (the RateLimit fields inserted into admitted
// responses, a refused request cut out of the client's stream and its answer
// put into the origin's), sequence numbers are shifted towards the receiver
// and acknowledgements back: by the context's SeqShifts while edits are
// pending, by these bases (receiver minus sender, modulo 2^32) once the
// context is gone.
struct FlowSeqAdj {
  bool active = false;
  uint32_t to_client = 0;
  uint32_t to_origin = 0;
};

// A flow whose handshake the SYN proxy made (syn_proxy.h): the client's view
// of the origin's stream numbered from the cookie (the seqadj base carries
// the difference), each end's timestamp clock its own, and window fields
// scaled as each end expects.
struct FlowProxy {
  bool active = false;
  int8_t window_to_client_shift = 0;  // the origin's window fields towards the client: << n, or >> -n
  int8_t window_to_origin_shift = 0;  // the client's towards the origin
  uint32_t cookie_isn = 0;            // the appliance's ISN towards the client
  uint32_t cookie_tsval = 0;          // its SYN-ACK's TSval (the client's ACK echoed it)
  uint32_t ts_offset = 0;             // the origin's TSval plus this is what the client sees
};

// The origin's connection being opened: at once, or (delayed binding) when
// the first request is forwarded.
struct FlowBinding {
  Binding state = Binding::kBound;
  time::Nanos since = 0;        // the SYN to the origin first sent (delayed binding)
  time::Nanos syn_sent_at = 0;  // the SYN to the origin last sent (before the origin answered)
};

// A connection begun before the appliance knew it (a restart, an expired
// flow), taken up at a client's request head (flow_adopter.h): it never
// carries a request body, and nothing the origin sent before it was adopted
// (origin.isn + 1) may follow.
struct FlowAdoption {
  bool active = false;
  uint16_t window = 0;  // the window field of the client's adopted segment: what the probe and stash offer
};

// The client a trusted load balancer relayed, from the PROXY protocol
// header its connection began with (net/proxy_header.h): it stands for the
// connection's address wherever the limiter asks who the client is.
struct FlowRelay {
  bool active = false;
  uint16_t port = 0;
  net::IpAddress client{};
};

struct TcpFlow {
  FlowKey key;
  uint64_t hash = 0;
  time::Nanos last_seen = 0;
  FlowState state = FlowState::kSynSent;
  uint8_t ip_version = 4;
  bool timestamps = false;  // both SYNs carried the timestamp option

  ClientEnd client;
  OriginEnd origin;
  FlowAnswer answer;
  FlowSeqAdj seqadj;
  FlowProxy proxy;
  FlowBinding bind;
  FlowAdoption adoption;
  FlowRelay relayed;

  // Who the client is: the relayed one, else the connection's source.
  [[nodiscard]] const net::IpAddress& client_address() const noexcept {
    return relayed.active ? relayed.client : key.client;
  }

  // What the flow borrows from the worker's pools, each -1 when it holds none.
  int32_t context = -1;  // the ParseContext
  int32_t share = -1;    // the client's share of flows and contexts (client_shares.h)
  int32_t hold = -1;     // the EditHold with the edits the client has not acknowledged (never with a context)
  int32_t stash = -1;    // until bound: the BindStash buffer with what goes to the origin once it answers
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
