// The deadlines a client is held to on a connection to a service port
// (policy `deadlines:`, config/README.md): what it owes and since when, and
// which deadline it has missed. A crowd of clients that open connections and
// then trickle a head, stall a body or sit idle would otherwise keep flows
// and parse contexts for as long as they like (slowloris); nginx's
// client_header_timeout, client_body_timeout and keepalive_timeout, and
// HAProxy's timeout http-request and http-keep-alive, are the same idea.
//
// Choices a reader should know:
// - A head's deadline runs from its first byte and is not renewed by more
//   bytes: a byte every few seconds is exactly the attack. A new
//   connection's first head must start and end within the same deadline,
//   counted from the handshake.
// - A body's deadline is renewed by every new byte: a large upload is slow
//   but moving; only a stalled one is cut.
// - Keep-alive idleness counts new bytes either way, not acknowledgements
//   (free to send), and only while nothing is in flight: a client waiting
//   on a slow origin is not idle.
// - A response the client does not read (its acknowledgement stays short of
//   what the origin sent) is cut once it has read nothing new for
//   deadlines.response, counted from the later of its last read and the
//   moment it last had nothing left to read: a slow but moving reader
//   passes (nginx's send_timeout is the same idea), one that holds a
//   response, and the in-flight slot that goes with it, does not.
// - A flow that is not plainly established (answered, refusing, bridged,
//   half open) is the flow table's timeouts' business.
//
// Owns: nothing. Reads a flow and its parse context.
#pragma once

#include <cstdint>

#include "parse_context.h"
#include "policy/policy.h"
#include "tcp_flow.h"

namespace sluice::dataplane {

enum class Overdue : uint8_t {
  kNone,
  kHead,       // a head begun and not complete within deadlines.head: answered 408, closed
  kFirstHead,  // a new connection without a byte of a request within deadlines.head: closed
  kBody,       // a request body without a new byte for deadlines.body: both ends reset
  kKeepAlive,  // nothing in flight and no new byte for deadlines.keep_alive: closed
  kResponse,   // bytes of a response unread (not acknowledged) for deadlines.response: both ends reset
};

// Which deadline `flow` (its parse context `ctx`, or nullptr) has missed at
// `now`, if any.
[[nodiscard]] Overdue overdue(const TcpFlow& flow, const ParseContext* ctx, const policy::Deadlines& d,
                              time::Nanos now) noexcept;

// What the client owes an established connection now.
enum class Owes : uint8_t {
  kNothing,    // nothing in flight: a next request, if any
  kHead,       // the rest of a head
  kFirstHead,  // a new connection's first request
  kBody,       // the rest of a request body
  kWaiting,    // nothing: a response is outstanding
  kRead,       // to read what the origin sent: it has not acknowledged it all
};
[[nodiscard]] Owes owes(const TcpFlow& flow, const ParseContext* ctx) noexcept;

// How long the client has owed it at `now` (0 for kWaiting): the age of a
// held head, of a stalled body, or of an idle stretch. Eviction picks the
// flow slow the longest (eviction.h).
[[nodiscard]] time::Nanos slow_for(const TcpFlow& flow, const ParseContext* ctx, Owes what, time::Nanos now) noexcept;

}  // namespace sluice::dataplane
