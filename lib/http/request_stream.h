// The client-to-origin byte stream of one connection, cut into requests: head
// (HeadParser), then body (BodyFramer), then the next head, until the
// connection switches protocol. The data plane feeds it each in-order segment
// and acts on the events; the limiter decides on each head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "http/body_framer.h"
#include "http/head_parser.h"

namespace sluice::http {

struct StreamConfig {
  HeadLimits head;
  BodyLimits body;
  // Which protocol switches may pass. A switch that may not is refused with
  // 501 (CONNECT, Upgrade) or 505 (HTTP/2 prior knowledge).
  bool allow_connect = false;
  bool allow_upgrade = true;
  bool allow_h2_prior_knowledge = false;
};

enum class StreamEvent : uint8_t {
  kNeedMore,     // every byte was consumed; nothing to act on yet
  kHead,         // a request head is complete: head() and fields() are valid until kMessageEnd
  kMessageEnd,   // that request's body is complete
  kAwaitSwitch,  // an Upgrade or CONNECT request has ended: nothing more is consumed until resolve_switch()
  kPassThrough,  // the connection is no longer HTTP/1.1 and is not parsed any more: bridge it
                 // (for HTTP/2 prior knowledge, only once the whole 24-byte preface is in)
  kError,        // see error; the connection cannot be framed any more and must be closed
};

struct StreamStep {
  StreamEvent event;
  ParseError error;
  size_t consumed;  // bytes of the piece up to and including the event (0 on kError)
};

class RequestStream {
 public:
  RequestStream(const FieldSet& fields, const StreamConfig& config, std::span<FieldLine> field_store,
                std::span<char> spill, Isa isa = best_isa()) noexcept;

  // Consumes bytes up to the next event. Call again with the rest of the
  // piece (after `consumed`) until the event is kNeedMore, kAwaitSwitch,
  // kPassThrough or kError.
  [[nodiscard]] StreamStep next(std::span<const char> piece) noexcept;

  // After kAwaitSwitch: whether the origin accepted the switch (101 to an
  // Upgrade, 2xx to a CONNECT). If not, parsing resumes with the next head.
  void resolve_switch(bool switched) noexcept;

  [[nodiscard]] const RequestHead& head() const noexcept { return parser_.head(); }
  [[nodiscard]] std::span<const FieldLine> fields() const noexcept { return parser_.fields(); }
  // Back to the start of a connection (the data plane reuses one stream for
  // many connections).
  void reset() noexcept;

  // Between messages with nothing buffered: the stream can be dropped and a
  // fresh one started here without losing anything (the data plane lends its
  // parse buffers to a connection only while a message is in flight).
  [[nodiscard]] bool idle() const noexcept { return state_ == State::kHead && !parser_.started(); }
  // Part of a head has been fed and the rest is still to come. An HTTP/2
  // preface whose tail is still to come counts: none of it may reach an
  // origin that would read its first line as HTTP/1.1.
  // A request's body is on its way (its head was complete).
  [[nodiscard]] bool in_body() const noexcept { return state_ == State::kBody; }
  [[nodiscard]] bool head_in_progress() const noexcept {
    return (state_ == State::kHead && parser_.started()) || state_ == State::kPrefaceTail;
  }
  // Forgets the part of a head fed so far, so it can be fed again from a copy
  // (the data plane copies a head split across segments into a buffer of its
  // own, since the views of the first part point into a segment it forwards).
  void restart_head() noexcept {
    if (state_ == State::kPrefaceTail) state_ = State::kHead;  // the preface is fed again from its start
    if (state_ == State::kHead) parser_.reset();
  }

  // Requests whose message has ended on this connection.
  [[nodiscard]] uint64_t completed() const noexcept { return completed_; }

  // Goes on where `dead` stood: a stream of the same layout that another
  // process left in memory (a restart that carries connections on), read
  // without its references and views, which point into that process. A
  // stream between heads or inside a body can; one in the middle of a head
  // is left at that head's start, as restart_head() would (the caller feeds
  // the head's bytes again from its copy, or the connection cannot carry).
  // False, and this stream reset, if `dead` is anywhere else.
  [[nodiscard]] bool carry_on(const RequestStream& dead) noexcept;

 private:
  // kPrefaceTail: "PRI * HTTP/2.0\r\n\r\n" was read and allowed; the
  // preface's last six bytes are still to come.
  enum class State : uint8_t { kHead, kBody, kAwaitSwitch, kPrefaceTail, kPassThrough, kFailed };

  StreamStep fail(ParseError e) noexcept;
  StreamStep on_head(std::span<const char> piece, size_t consumed) noexcept;
  StreamStep preface_tail(std::span<const char> piece, size_t from) noexcept;
  StreamStep end_message(size_t consumed) noexcept;

  const StreamConfig& config_;
  HeadParser parser_;
  BodyFramer body_;
  State state_ = State::kHead;
  bool switch_pending_ = false;
  uint8_t preface_matched_ = 0;  // bytes of the preface's tail seen
  ParseError error_ = ParseError::kNone;
  uint64_t completed_ = 0;
};

}  // namespace sluice::http
