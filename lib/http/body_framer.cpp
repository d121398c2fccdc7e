// See body_framer.h.
#include "http/body_framer.h"

#include <algorithm>

#include "http/carried_bytes.h"
#include "http/token_chars.h"

namespace sluice::http {

void BodyFramer::start_length(uint64_t length) noexcept {
  remaining_ = length;
  state_ = length == 0 ? State::kDone : State::kLength;
  error_ = ParseError::kNone;
  has_number_ = false;
}

void BodyFramer::start_chunked() noexcept {
  state_ = State::kSize;
  remaining_ = chunk_size_ = 0;
  line_bytes_ = size_digits_ = trailer_bytes_ = 0;
  trailer_fields_ = 0;
  error_ = ParseError::kNone;
  has_number_ = false;
  number_state_ = Number::kNotWatched;
}

void BodyFramer::watch_name_byte(unsigned char c) noexcept {
  if (!name_match_) return;
  const unsigned char lower = c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c | 0x20) : c;
  name_match_ = name_pos_ < watched_.size() && static_cast<unsigned char>(watched_[name_pos_]) == lower;
  if (name_match_) ++name_pos_;
}

void BodyFramer::watch_value_byte(unsigned char c) noexcept {
  const bool ows = is_ows(c);
  const bool digit = c >= '0' && c <= '9';
  switch (number_state_) {
    case Number::kNotWatched:
    case Number::kBad:
      return;
    case Number::kLeading:
      if (ows) return;
      if (!digit) break;
      number_state_ = Number::kDigits;
      number_digits_ = 1;
      number_ = c - '0';
      return;
    case Number::kDigits:
      if (ows) {
        number_state_ = Number::kTrailing;
        return;
      }
      if (!digit || ++number_digits_ > 18) break;
      number_ = number_ * 10 + (c - '0');
      return;
    case Number::kTrailing:
      if (ows) return;
      break;
  }
  number_state_ = Number::kBad;
}

BodyStep BodyFramer::fail(ParseError e) noexcept {
  state_ = State::kFailed;
  error_ = e;
  return {BodyStatus::kError, e, 0};
}

bool BodyFramer::step(unsigned char c) noexcept {
  if (state_ == State::kSize || state_ == State::kSizeLF) return size_step(c);
  if (state_ > State::kSize && state_ < State::kSizeLF) return extension_step(c);
  if (state_ >= State::kTrailerStart && state_ <= State::kFinalLF) return trailer_step(c);
  switch (state_) {
    case State::kDataCR:
      if (c != '\r') return false;
      state_ = State::kDataLF;
      return true;
    case State::kDataLF:
      if (c != '\n') return false;
      state_ = State::kSize;
      chunk_size_ = 0;
      line_bytes_ = size_digits_ = 0;
      return true;
    default:
      return false;
  }
}

// The chunk size's hex digits, and the LF that ends its line.
bool BodyFramer::size_step(unsigned char c) noexcept {
  switch (state_) {
    case State::kSize:
      if (is_hex_digit(c)) {
        // 16 hex digits fill 64 bits; a longer size (leading zeros included)
        // is one no parser should be trusted to read the same way.
        if (++size_digits_ > 16) return false;
        const unsigned digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        chunk_size_ = chunk_size_ << 4 | digit;
        return true;
      }
      if (size_digits_ == 0) return false;
      if (c == '\r') { state_ = State::kSizeLF; return true; }
      if (c == ';') { state_ = State::kExtNameStart; return true; }
      if (is_ows(c)) { state_ = State::kExtWs; return true; }
      return false;
    case State::kSizeLF:
      if (c != '\n') return false;
      state_ = chunk_size_ == 0 ? State::kTrailerStart : State::kData;
      remaining_ = chunk_size_;
      return true;
    default:
      return false;
  }
}

// chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ) (RFC 9112 7.1.1):
// whitespace is allowed only where ';' or '=' follows it.
bool BodyFramer::extension_step(unsigned char c) noexcept {
  const bool ows = is_ows(c);
  switch (state_) {
    case State::kExtWs:
      if (ows) return true;
      if (c == ';') { state_ = State::kExtNameStart; return true; }
      return false;
    case State::kExtNameStart:
      if (ows) return true;
      if (is_tchar(c)) { state_ = State::kExtName; return true; }
      return false;
    case State::kExtName:
      if (is_tchar(c)) return true;
      if (c == '\r') { state_ = State::kSizeLF; return true; }
      [[fallthrough]];
    case State::kExtAfterName:
      if (ows) { state_ = State::kExtAfterName; return true; }
      if (c == '=') { state_ = State::kExtValueStart; return true; }
      if (c == ';') { state_ = State::kExtNameStart; return true; }
      return false;
    case State::kExtValueStart:
      if (ows) return true;
      if (c == '"') { state_ = State::kExtQuoted; return true; }
      if (is_tchar(c)) { state_ = State::kExtToken; return true; }
      return false;
    case State::kExtToken:
      if (is_tchar(c)) return true;
      [[fallthrough]];
    case State::kExtAfterValue:
      if (ows) { state_ = State::kExtWs; return true; }
      if (c == ';') { state_ = State::kExtNameStart; return true; }
      if (c == '\r') { state_ = State::kSizeLF; return true; }
      return false;
    case State::kExtQuoted:
      if (c == '"') { state_ = State::kExtAfterValue; return true; }
      if (c == '\\') { state_ = State::kExtQuotedPair; return true; }
      return !is_ctl(c);  // qdtext: HTAB, SP, VCHAR except '"' and '\', obs-text
    case State::kExtQuotedPair:
      if (is_ctl(c)) return false;
      state_ = State::kExtQuoted;
      return true;
    default:
      return false;
  }
}

// The trailer section: field lines (one of them perhaps the watched number),
// then the final CRLF.
bool BodyFramer::trailer_step(unsigned char c) noexcept {
  switch (state_) {
    case State::kTrailerStart:
      if (c == '\r') { state_ = State::kFinalLF; return true; }
      if (!is_tchar(c)) return false;  // obs-fold, an empty name or a bad byte
      if (++trailer_fields_ > limits_.max_trailer_fields) {
        error_ = ParseError::kTooManyFields;
        return false;
      }
      state_ = State::kTrailerName;
      name_pos_ = 0;
      name_match_ = !watched_.empty();
      watch_name_byte(c);
      return true;
    case State::kTrailerName:
      if (c == ':') {
        state_ = State::kTrailerValue;
        number_state_ = name_match_ && name_pos_ == watched_.size() ? Number::kLeading : Number::kNotWatched;
        if (number_state_ == Number::kLeading) has_number_ = false;  // the last one counts
        return true;
      }
      watch_name_byte(c);
      return is_tchar(c);
    case State::kTrailerValue:
      if (c == '\r') { state_ = State::kTrailerLF; return true; }
      watch_value_byte(c);
      return !is_ctl(c);
    case State::kTrailerLF:
      if (c != '\n') return false;
      if (number_state_ == Number::kDigits || number_state_ == Number::kTrailing) has_number_ = true;
      number_state_ = Number::kNotWatched;
      state_ = State::kTrailerStart;
      return true;
    case State::kFinalLF:
      if (c != '\n') return false;
      state_ = State::kDone;
      return true;
    default:
      return false;
  }
}

BodyStep BodyFramer::feed(std::span<const char> piece) noexcept {
  if (state_ == State::kFailed) return {BodyStatus::kError, error_, 0};
  size_t i = 0;
  const size_t n = piece.size();
  while (i < n && state_ != State::kDone) {
    if (state_ == State::kLength || state_ == State::kData) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, n - i));
      i += take;
      remaining_ -= take;
      if (remaining_ == 0) state_ = state_ == State::kLength ? State::kDone : State::kDataCR;
      continue;
    }
    const bool in_size_line = state_ <= State::kSizeLF && state_ >= State::kSize;
    const bool in_trailer = state_ >= State::kTrailerStart && state_ <= State::kFinalLF;
    if (!step(static_cast<unsigned char>(piece[i]))) {
      return fail(error_ != ParseError::kNone ? error_ : ParseError::kBadChunk);
    }
    ++i;
    if (in_size_line && ++line_bytes_ > limits_.max_chunk_line) return fail(ParseError::kBadChunk);
    if (in_trailer && ++trailer_bytes_ > limits_.max_trailer_bytes) return fail(ParseError::kHeadTooLarge);
  }
  return {state_ == State::kDone ? BodyStatus::kDone : BodyStatus::kMore, ParseError::kNone, i};
}

bool BodyFramer::carry_on(const BodyFramer& dead) noexcept {
  if (!all_bool_bytes({&dead.name_match_, &dead.has_number_}) ||
      static_cast<uint8_t>(dead.state_) > static_cast<uint8_t>(State::kFailed) ||
      static_cast<uint8_t>(dead.number_state_) > static_cast<uint8_t>(Number::kBad) ||
      dead.line_bytes_ > limits_.max_chunk_line || dead.trailer_bytes_ > limits_.max_trailer_bytes ||
      dead.trailer_fields_ > limits_.max_trailer_fields) {
    return false;
  }
  const BodyLimits limits = limits_;
  const std::string_view watched = watched_;
  copy_bytes(*this, dead);
  limits_ = limits;
  watched_ = watched;
  // A trailer name half matched against the last process's watched field
  // means nothing against this one's.
  if (name_pos_ > watched_.size()) name_match_ = false, name_pos_ = 0;
  return true;
}

}  // namespace sluice::http
