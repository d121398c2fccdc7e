// See request_stream.h.
#include "http/request_stream.h"

#include <string_view>

namespace sluice::http {

RequestStream::RequestStream(const FieldSet& fields, const StreamConfig& config, std::span<FieldLine> field_store,
                             std::span<char> spill, Isa isa) noexcept
    : config_(config), parser_(fields, config.head, field_store, spill, isa), body_(config.body) {}

StreamStep RequestStream::fail(ParseError e) noexcept {
  state_ = State::kFailed;
  error_ = e;
  return {StreamEvent::kError, e, 0};
}

StreamStep RequestStream::on_head(std::span<const char> piece, size_t consumed) noexcept {
  const RequestHead& h = parser_.head();
  if (h.version == Version::kHttp20Preface) {
    // Prior knowledge is only announced at the start of a connection.
    if (completed_ != 0) return fail(ParseError::kUnsupportedVersion);
    if (!config_.allow_h2_prior_knowledge) return fail(ParseError::kH2PriorKnowledgeNotAllowed);
    preface_matched_ = 0;
    state_ = State::kPrefaceTail;
    return preface_tail(piece, consumed);
  }
  if (h.method_kind == Method::kConnect && !config_.allow_connect) return fail(ParseError::kConnectNotAllowed);
  if (h.upgrade && !config_.allow_upgrade) return fail(ParseError::kUpgradeNotAllowed);
  switch_pending_ = h.method_kind == Method::kConnect || h.upgrade;
  if (h.body == BodyKind::kChunked) {
    body_.start_chunked();
  } else {
    body_.start_length(h.body == BodyKind::kLength ? h.content_length : 0);
  }
  state_ = State::kBody;
  return {StreamEvent::kHead, ParseError::kNone, consumed};
}

StreamStep RequestStream::preface_tail(std::span<const char> piece, size_t from) noexcept {
  // The head-shaped part alone is no HTTP/2 connection: an origin that reads
  // HTTP/1.1 answers "PRI" and goes on to whatever follows. Only the whole
  // preface (RFC 9113 3.4) stops the judging.
  static constexpr std::string_view kTail = "SM\r\n\r\n";
  size_t i = from;
  for (; preface_matched_ < kTail.size() && i < piece.size(); ++i, ++preface_matched_) {
    if (piece[i] != kTail[preface_matched_]) return fail(ParseError::kBadH2Preface);
  }
  if (preface_matched_ < kTail.size()) return {StreamEvent::kNeedMore, ParseError::kNone, i};
  state_ = State::kPassThrough;
  return {StreamEvent::kPassThrough, ParseError::kNone, i};
}

StreamStep RequestStream::end_message(size_t consumed) noexcept {
  ++completed_;
  if (switch_pending_) {
    state_ = State::kAwaitSwitch;
  } else {
    parser_.reset();
    state_ = State::kHead;
  }
  return {StreamEvent::kMessageEnd, ParseError::kNone, consumed};
}

StreamStep RequestStream::next(std::span<const char> piece) noexcept {
  switch (state_) {
    case State::kHead: {
      const FeedResult r = parser_.feed(piece);
      if (r.status == HeadStatus::kError) return fail(r.error);
      if (r.status == HeadStatus::kIncomplete) return {StreamEvent::kNeedMore, ParseError::kNone, r.consumed};
      return on_head(piece, r.consumed);
    }
    case State::kPrefaceTail: return preface_tail(piece, 0);
    case State::kBody: {
      if (body_.done()) return end_message(0);
      const BodyStep r = body_.feed(piece);
      if (r.status == BodyStatus::kError) return fail(r.error);
      if (r.status == BodyStatus::kMore) return {StreamEvent::kNeedMore, ParseError::kNone, r.consumed};
      return end_message(r.consumed);
    }
    case State::kAwaitSwitch: return {StreamEvent::kAwaitSwitch, ParseError::kNone, 0};
    case State::kPassThrough: return {StreamEvent::kPassThrough, ParseError::kNone, piece.size()};
    case State::kFailed: break;
  }
  return {StreamEvent::kError, error_, 0};
}

void RequestStream::reset() noexcept {
  parser_.reset();
  body_ = BodyFramer(config_.body);
  state_ = State::kHead;
  switch_pending_ = false;
  preface_matched_ = 0;
  error_ = ParseError::kNone;
  completed_ = 0;
}

void RequestStream::resolve_switch(bool switched) noexcept {
  if (state_ != State::kAwaitSwitch) return;
  switch_pending_ = false;
  if (switched) {
    state_ = State::kPassThrough;
  } else {
    parser_.reset();
    state_ = State::kHead;
  }
}

bool RequestStream::carry_on(const RequestStream& dead) noexcept {
  reset();
  // A head in progress (an HTTP/2 preface's tail included) starts again
  // here: its bytes are the caller's to feed again, from its own copy.
  const bool at_head = dead.state_ == State::kHead || dead.state_ == State::kPrefaceTail;
  if (!at_head && dead.state_ != State::kBody) return false;
  if (dead.state_ == State::kBody && !body_.carry_on(dead.body_)) return false;
  state_ = at_head ? State::kHead : dead.state_;
  completed_ = dead.completed_;
  return true;
}

}  // namespace sluice::http
