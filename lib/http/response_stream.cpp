// See response_stream.h.
#include "http/response_stream.h"

#include <emmintrin.h>

#include <cstring>
#include <type_traits>

#include "http/ascii_case.h"
#include "http/carried_bytes.h"
#include "http/field_values.h"
#include "http/response_scan.h"
#include "http/token_chars.h"

namespace sluice::http {

static_assert(sizeof(ResponseStream) <= 512, "ResponseStream lives in every flow context: keep it small");
static_assert(std::is_trivially_destructible_v<ResponseStream>, "ResponseStream must own nothing");
static_assert(ResponseStream::kMaxOutstanding <= 128 &&
                  (ResponseStream::kMaxOutstanding & (ResponseStream::kMaxOutstanding - 1)) == 0,
              "the ring indexes with a mask and counts in a byte");

namespace {

// The longest name among the framing fields ("transfer-encoding"); a longer
// name is none of them, so no more of it is kept.
constexpr uint16_t kFramingNameMax = 32;  // the framing fields, and a usage field of up to 32

// Whether f(element) holds for every element of a comma-separated list
// (RFC 9110 5.6.1), surrounding whitespace removed, empty ones included (f
// decides whether they matter); stops at the first that does not.
template <typename F>
bool every_element(std::string_view list, F&& f) noexcept {
  for (;;) {
    const size_t comma = list.find(',');
    if (!f(trim_ows(list.substr(0, comma)))) return false;
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

// The offset of the first control byte (is_ctl: below 0x20 but HTAB, or DEL)
// of p[0, n), or n. Field values are mostly long runs of printable bytes.
size_t first_ctl(const char* p, size_t n) noexcept {
  size_t i = 0;
  const __m128i below = _mm_set1_epi8(0x1f), tab = _mm_set1_epi8('\t'), del = _mm_set1_epi8(0x7f);
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i low = _mm_andnot_si128(_mm_cmpeq_epi8(x, tab), _mm_cmpeq_epi8(_mm_max_epu8(x, below), below));
    const int mask = _mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(x, del)));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
  while (i < n && !is_ctl(static_cast<unsigned char>(p[i]))) ++i;
  return i;
}

}  // namespace

std::string_view to_string(ResponseError e) noexcept {
  switch (e) {
    case ResponseError::kNone: return "none";
    case ResponseError::kUnsolicited: return "unsolicited";
    case ResponseError::kBadStatusLine: return "bad_status_line";
    case ResponseError::kBadVersion: return "bad_version";
    case ResponseError::kBadField: return "bad_field";
    case ResponseError::kBadLineEnding: return "bad_line_ending";
    case ResponseError::kHeadTooLarge: return "head_too_large";
    case ResponseError::kTooManyFields: return "too_many_fields";
    case ResponseError::kFramingFieldTooLong: return "framing_field_too_long";
    case ResponseError::kBadContentLength: return "bad_content_length";
    case ResponseError::kConflictingContentLength: return "conflicting_content_length";
    case ResponseError::kBadTransferEncoding: return "bad_transfer_encoding";
    case ResponseError::kTransferEncodingInHttp10: return "transfer_encoding_in_http10";
    case ResponseError::kUnexpectedSwitch: return "unexpected_switch";
    case ResponseError::kBadChunk: return "bad_chunk";
    case ResponseError::kTrailerTooLarge: return "trailer_too_large";
    case ResponseError::kTruncated: return "truncated";
    case ResponseError::kDataAfterClose: return "data_after_close";
  }
  return "unknown";
}

ResponseStream::ResponseStream(ResponseLimits limits) noexcept : limits_(limits), body_(limits.body) { start_head(); }

void ResponseStream::reset() noexcept {
  body_ = BodyFramer(limits_.body);
  body_.watch_trailer(usage_field_);
  head_ = ResponseHead{};
  queue_front_ = queued_ = 0;
  state_ = State::kHead;
  error_ = ResponseError::kNone;
  last_connection_close_ = false;
  last_keep_alive_ = true;
  completed_ = 0;
  start_head();
}

bool ResponseStream::expect(RequestKind kind) noexcept {
  if (queued_ == kMaxOutstanding) return false;
  queue_[(queue_front_ + queued_) & (kMaxOutstanding - 1)] = kind;
  ++queued_;
  return true;
}

void ResponseStream::start_head() noexcept {
  head_state_ = HeadState::kStatusLine;
  framing_ = Framing::kOther;
  minor_version_ = 0;
  status_ = 0;
  fields_ = 0;
  line_len_ = 0;
  head_bytes_ = 0;
  content_length_ = 0;
  has_content_length_ = has_transfer_encoding_ = chunked_seen_ = chunked_last_ = chunked_repeated_ = false;
  close_ = keep_alive_option_ = has_usage_ = false;
  usage_ = 0;
}

ResponseStep ResponseStream::fail(ResponseError e) noexcept {
  state_ = State::kFailed;
  error_ = e;
  return {ResponseEvent::kError, e, 0};
}

// Which framing field a name is (empty: a name too long to be one).
// Runs for every field line, so the length picks the one name to compare.
ResponseStream::Framing ResponseStream::framing_of(std::string_view name) const noexcept {
  switch (name.size()) {
    case 14:
      if (iequals_lower(name, "content-length")) return Framing::kContentLength;
      break;
    case 17:
      if (iequals_lower(name, "transfer-encoding")) return Framing::kTransferEncoding;
      break;
    case 10:
      if (iequals_lower(name, "connection")) return Framing::kConnection;
      break;
    default: break;
  }
  if (!name.empty() && name.size() == usage_field_.size() && iequals_lower(name, usage_field_)) return Framing::kUsage;
  return Framing::kOther;
}

// One byte of a head, outside the runs feed_head skips in bulk.
ResponseError ResponseStream::step(unsigned char c) noexcept {
  switch (head_state_) {
    case HeadState::kStatusLine: {
      // "HTTP/1.x SSS": the name is case-sensitive (RFC 9112 2.3), the major
      // version must be 1, the status 100..599 (RFC 9110 15).
      static constexpr std::string_view kPrefix = "HTTP/";
      const uint16_t pos = line_len_++;
      if (pos < kPrefix.size()) return c == static_cast<unsigned char>(kPrefix[pos]) ? ResponseError::kNone
                                                                                       : ResponseError::kBadStatusLine;
      switch (pos) {
        case 5:
          if (c == '1') return ResponseError::kNone;
          return c >= '0' && c <= '9' ? ResponseError::kBadVersion : ResponseError::kBadStatusLine;
        case 6: return c == '.' ? ResponseError::kNone : ResponseError::kBadStatusLine;
        case 7:
          if (c < '0' || c > '9') return ResponseError::kBadStatusLine;
          minor_version_ = static_cast<uint8_t>(c - '0');
          return ResponseError::kNone;
        case 8: return c == ' ' ? ResponseError::kNone : ResponseError::kBadStatusLine;
        default: {
          if (c < '0' || c > '9' || (pos == 9 && (c < '1' || c > '5'))) return ResponseError::kBadStatusLine;
          status_ = static_cast<uint16_t>(status_ * 10 + (c - '0'));
          if (pos == 11) head_state_ = HeadState::kAfterStatus;
          return ResponseError::kNone;
        }
      }
    }
    case HeadState::kAfterStatus:
      // RFC 9112 4 asks for the SP even before an empty reason; servers that
      // end the line right after the code are common and frame the same.
      if (c == ' ') { head_state_ = HeadState::kReason; return ResponseError::kNone; }
      if (c == '\r') { head_state_ = HeadState::kStatusLF; return ResponseError::kNone; }
      return c == '\n' ? ResponseError::kBadLineEnding : ResponseError::kBadStatusLine;
    case HeadState::kReason:
      if (c == '\r') { head_state_ = HeadState::kStatusLF; return ResponseError::kNone; }
      if (c == '\n') return ResponseError::kBadLineEnding;
      return is_ctl(c) ? ResponseError::kBadStatusLine : ResponseError::kNone;
    case HeadState::kStatusLF:
    case HeadState::kFieldLF:
      if (c != '\n') return ResponseError::kBadLineEnding;
      if (head_state_ == HeadState::kFieldLF) {
        const ResponseError e = end_field(std::string_view(line_.data(), line_len_));
        if (e != ResponseError::kNone) return e;
      }
      head_state_ = HeadState::kLineStart;
      return ResponseError::kNone;
    case HeadState::kLineStart:
      if (c == '\r') { head_state_ = HeadState::kFinalLF; return ResponseError::kNone; }
      if (c == '\n') return ResponseError::kBadLineEnding;
      // Whitespace here is obs-fold, or a line the status line would swallow
      // in a lenient parser (RFC 9112 2.2, 5.2): either way, not framable.
      if (!is_tchar(c)) return ResponseError::kBadField;
      if (++fields_ > limits_.max_fields) return ResponseError::kTooManyFields;
      line_[0] = static_cast<char>(c);
      line_len_ = 1;
      head_state_ = HeadState::kName;
      return ResponseError::kNone;
    case HeadState::kName:
      if (is_tchar(c)) {
        if (line_len_ < kFramingNameMax) line_[line_len_] = static_cast<char>(c);
        if (line_len_ <= kFramingNameMax) ++line_len_;  // one past the maximum marks "longer"
        return ResponseError::kNone;
      }
      if (c != ':') return c == '\n' ? ResponseError::kBadLineEnding : ResponseError::kBadField;
      framing_ = framing_of(std::string_view(line_.data(), line_len_ <= kFramingNameMax ? line_len_ : 0));
      line_len_ = 0;
      head_state_ = framing_ == Framing::kOther ? HeadState::kSkipValue : HeadState::kValueStart;
      return ResponseError::kNone;
    case HeadState::kValueStart:
      if (is_ows(c)) return ResponseError::kNone;
      head_state_ = HeadState::kValue;
      [[fallthrough]];
    case HeadState::kValue:
      if (c == '\r') { head_state_ = HeadState::kFieldLF; return ResponseError::kNone; }
      if (c == '\n') return ResponseError::kBadLineEnding;
      if (is_ctl(c)) return ResponseError::kBadField;
      if (line_len_ == line_.size()) return ResponseError::kFramingFieldTooLong;
      line_[line_len_++] = static_cast<char>(c);
      return ResponseError::kNone;
    case HeadState::kSkipValue:
      if (c == '\r') { head_state_ = HeadState::kFieldLF; return ResponseError::kNone; }
      if (c == '\n') return ResponseError::kBadLineEnding;
      return is_ctl(c) ? ResponseError::kBadField : ResponseError::kNone;
    case HeadState::kFinalLF:
      return c == '\n' ? finish_head() : ResponseError::kBadLineEnding;
  }
  return ResponseError::kBadField;
}

// A field line of a framing field is complete: its value is `raw` (in line_
// when read byte by byte, in the piece when taken in bulk).
ResponseError ResponseStream::end_field(std::string_view raw) noexcept {
  const std::string_view value = trim_ows(raw);
  switch (framing_) {
    case Framing::kOther: break;
    case Framing::kContentLength: {
      const auto take = [this](uint64_t n) {
        if (has_content_length_ && n != content_length_) return ResponseError::kConflictingContentLength;
        has_content_length_ = true;
        content_length_ = n;
        return ResponseError::kNone;
      };
      uint64_t n = 0;
      if (read_decimal(value, n)) {  // the usual value, one number: no list walk
        if (const ResponseError e = take(n); e != ResponseError::kNone) return e;
        break;
      }
      // RFC 9110 8.6: a list of identical values, or repeated identical
      // lines, may be taken as that one value; anything else is no length.
      ResponseError e = ResponseError::kNone;
      every_element(value, [&](std::string_view element) {
        uint64_t m = 0;
        e = read_decimal(element, m) ? take(m) : ResponseError::kBadContentLength;
        return e == ResponseError::kNone;
      });
      if (e != ResponseError::kNone) return e;
      break;
    }
    case Framing::kTransferEncoding:
      has_transfer_encoding_ = true;
      for_each_element(value, [this](std::string_view coding) {
        // Only the last coding decides where the body ends (RFC 9112 6.3);
        // parameters make a coding other than "chunked".
        const bool chunked = iequals_lower(coding, "chunked");
        if (chunked && chunked_seen_) chunked_repeated_ = true;
        chunked_seen_ = chunked_seen_ || chunked;
        chunked_last_ = chunked;
      });
      break;
    case Framing::kUsage: {
      // A number, or nothing: a value the origin got wrong charges nothing
      // rather than breaking the stream's framing.
      uint64_t n = 0;
      if (read_decimal(value, n)) {
        has_usage_ = true;
        usage_ = n;
      }
      break;
    }
    case Framing::kConnection: {
      const ConnectionOptions o = connection_options(value);
      close_ = close_ || o.close;
      keep_alive_option_ = keep_alive_option_ || o.keep_alive;
      break;
    }
  }
  framing_ = Framing::kOther;
  line_len_ = 0;
  return ResponseError::kNone;
}

// The empty line ended the head: decide how the response is framed (RFC 9112 6.3).
ResponseError ResponseStream::finish_head() noexcept {
  if (has_transfer_encoding_) {
    // 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing.
    if (minor_version_ == 0) return ResponseError::kTransferEncodingInHttp10;
    // 7: chunked is applied at most once; two readings of such a body differ.
    if (chunked_repeated_) return ResponseError::kBadTransferEncoding;
  }
  const RequestKind kind = queue_[queue_front_];
  ResponseHead h;
  h.status = status_;
  h.minor_version = minor_version_;
  h.request = kind;
  h.head_bytes = head_bytes_;
  h.connection_close = close_;
  h.has_usage = has_usage_;
  h.usage = usage_;
  if (status_ == 101) {
    if (kind != RequestKind::kUpgrade) return ResponseError::kUnexpectedSwitch;
    h.switches = true;
  } else if (status_ < 200) {
    h.interim = true;
  } else if (kind == RequestKind::kConnect && status_ < 300) {
    h.switches = true;
  } else if (kind == RequestKind::kHead || status_ == 204 || status_ == 304) {
    h.body = ResponseBody::kNone;
  } else if (has_transfer_encoding_) {
    // The coding overrides any Content-Length, as the client will read it;
    // without chunked last only the close ends the body.
    h.body = chunked_last_ ? ResponseBody::kChunked : ResponseBody::kUntilClose;
  } else if (has_content_length_) {
    h.body = content_length_ == 0 ? ResponseBody::kNone : ResponseBody::kLength;
    h.content_length = content_length_;
  } else {
    h.body = ResponseBody::kUntilClose;
  }
  h.keep_alive = !close_ && (minor_version_ >= 1 || keep_alive_option_) && !h.switches &&
                 h.body != ResponseBody::kUntilClose;
  head_ = h;
  return ResponseError::kNone;
}

// At the start of a field line: the field lines that lie whole in p[0, n)
// and pass every check step() makes on them, with step()'s effects (the
// fields counted, each framing field's value read by end_field()), found in
// bulk by the block scan (http/response_scan.h). Returns the bytes taken;
// the line after them, if any, is step()'s, which then finds what is wrong
// or incomplete. A framing value too long to keep ends the taking before its
// line (step() reports it). `error`: what end_field() found wrong with a
// framing value (step() would find it at that line's LF).
size_t ResponseStream::field_lines_in_bulk(const char* p, size_t n, ResponseError& error) noexcept {
  static const FieldLineScanFn scan = field_line_scan_for(best_isa());
  // The lengths of the framing fields' names: only those lines are compared.
  uint64_t lengths = uint64_t{1} << 10 | uint64_t{1} << 14 | uint64_t{1} << 17;
  if (!usage_field_.empty()) lengths |= uint64_t{1} << usage_field_.size();
  const FieldLineScan found =
      scan(p, n, limits_.max_head_bytes - head_bytes_, static_cast<uint32_t>(limits_.max_fields - fields_), lengths);
  uint32_t bytes = found.bytes;
  uint16_t lines = found.lines;
  for (size_t k = 0; k < found.candidates; ++k) {
    const FieldLineScan::Candidate& c = found.candidate[k];
    framing_ = framing_of(std::string_view(p + c.line, c.colon - c.line));
    if (framing_ == Framing::kOther) continue;
    size_t v = c.colon + 1;
    while (v < c.cr && is_ows(static_cast<unsigned char>(p[v]))) ++v;
    if (c.cr - v > line_.size()) {  // what step() could not keep: it reports it
      bytes = c.line;
      lines = c.index;
      break;
    }
    error = end_field(std::string_view(p + v, c.cr - v));
    if (error != ResponseError::kNone) return 0;
  }
  framing_ = Framing::kOther;  // as end_field() leaves them
  line_len_ = 0;
  fields_ = static_cast<uint16_t>(fields_ + lines);
  head_bytes_ += bytes;
  return bytes;
}

// At the start of a head: the status line through its LF, if it lies in
// p[0, n) and every check step() makes on it passes ("HTTP/1." DIGIT SP, a
// code 100-599, then CR or SP, a reason without control bytes and CR, then
// LF), with step()'s effects. Returns the bytes taken, or 0 to leave the line
// to step() (nothing has changed).
size_t ResponseStream::whole_status_line(const char* p, size_t n) noexcept {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (n < 14 || std::memcmp(p, "HTTP/1.", 7) != 0 || !digit(p[7]) || p[8] != ' ' || p[9] < '1' || p[9] > '5' ||
      !digit(p[10]) || !digit(p[11])) {
    return 0;
  }
  size_t cr = 12;
  if (p[12] == ' ') cr = 13 + first_ctl(p + 13, n - 13);
  if (cr + 1 >= n || p[cr] != '\r' || p[cr + 1] != '\n') return 0;
  const size_t line = cr + 2;
  if (line > limits_.max_head_bytes - head_bytes_) return 0;
  minor_version_ = static_cast<uint8_t>(p[7] - '0');
  status_ = static_cast<uint16_t>((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
  line_len_ = 0;
  head_state_ = HeadState::kLineStart;
  head_bytes_ += static_cast<uint32_t>(line);
  return line;
}

ResponseStep ResponseStream::feed_head(std::span<const char> piece) noexcept {
  const size_t n = piece.size();
  if (n == 0) return {ResponseEvent::kNeedMore, ResponseError::kNone, 0};
  if (head_bytes_ == 0 && queued_ == 0) return fail(ResponseError::kUnsolicited);
  const uint32_t max = limits_.max_head_bytes;
  size_t i = 0;
  while (i < n) {
    if (head_state_ == HeadState::kSkipValue || head_state_ == HeadState::kReason) {
      // Runs of bytes that are only checked: no state changes until a control byte.
      const size_t j = i + first_ctl(piece.data() + i, n - i);
      if (j - i > max - head_bytes_) return fail(ResponseError::kHeadTooLarge);
      head_bytes_ += static_cast<uint32_t>(j - i);
      i = j;
      if (i == n) break;
    } else if (head_state_ == HeadState::kName) {
      // A name: only the first kFramingNameMax bytes are kept, to recognise
      // the framing fields; the run ends at ':' (or an error) in step().
      size_t j = i;
      while (j < n && is_tchar(static_cast<unsigned char>(piece[j]))) {
        if (line_len_ < kFramingNameMax) line_[line_len_] = piece[j];
        if (line_len_ <= kFramingNameMax) ++line_len_;
        ++j;
      }
      if (j - i > max - head_bytes_) return fail(ResponseError::kHeadTooLarge);
      head_bytes_ += static_cast<uint32_t>(j - i);
      i = j;
      if (i == n) break;
    }
    if (head_state_ == HeadState::kStatusLine && line_len_ == 0) {
      const size_t line = whole_status_line(piece.data() + i, n - i);
      if (line != 0) {
        i += line;
        if (report_status_lines_) return {ResponseEvent::kStatusLine, ResponseError::kNone, i};
        continue;
      }
    }
    if (head_state_ == HeadState::kLineStart) {
      ResponseError e = ResponseError::kNone;
      // A field line never starts with CR; the empty line is step()'s.
      const size_t line = piece[i] == '\r' ? 0 : field_lines_in_bulk(piece.data() + i, n - i, e);
      if (e != ResponseError::kNone) return fail(e);
      if (line != 0) {
        i += line;
        continue;
      }
    }
    if (head_bytes_ == max) return fail(ResponseError::kHeadTooLarge);
    ++head_bytes_;
    const bool final_lf = head_state_ == HeadState::kFinalLF;
    const bool status_lf = head_state_ == HeadState::kStatusLF;
    const ResponseError e = step(static_cast<unsigned char>(piece[i++]));
    if (e != ResponseError::kNone) return fail(e);
    if (status_lf && report_status_lines_) return {ResponseEvent::kStatusLine, ResponseError::kNone, i};
    if (!final_lf) continue;

    // The head is complete and head_ holds it.
    if (head_.interim) {
      start_head();  // the same request awaits its final response
    } else if (head_.switches) {
      state_ = State::kSwitch;
    } else if (head_.body == ResponseBody::kUntilClose) {
      state_ = State::kUntilClose;
    } else {
      if (head_.body == ResponseBody::kChunked) {
        body_.start_chunked();
      } else {
        body_.start_length(head_.body == ResponseBody::kLength ? head_.content_length : 0);
      }
      state_ = State::kBody;
    }
    return {ResponseEvent::kHead, ResponseError::kNone, i};
  }
  return {ResponseEvent::kNeedMore, ResponseError::kNone, n};
}

ResponseStep ResponseStream::end_response(size_t consumed) noexcept {
  if (head_.body == ResponseBody::kChunked && body_.has_trailer_number()) {
    head_.has_usage = true;
    head_.usage = body_.trailer_number();
  }
  queue_front_ = static_cast<uint8_t>((queue_front_ + 1) & (kMaxOutstanding - 1));
  --queued_;
  ++completed_;
  last_connection_close_ = head_.connection_close;
  last_keep_alive_ = head_.keep_alive;
  start_head();
  state_ = State::kHead;
  return {ResponseEvent::kResponseEnd, ResponseError::kNone, consumed};
}

ResponseStep ResponseStream::next(std::span<const char> piece) noexcept {
  switch (state_) {
    case State::kHead: return feed_head(piece);
    case State::kBody: {
      if (body_.done()) return end_response(0);
      const BodyStep r = body_.feed(piece);
      if (r.status == BodyStatus::kError) {
        return fail(r.error == ParseError::kBadChunk ? ResponseError::kBadChunk : ResponseError::kTrailerTooLarge);
      }
      if (r.status == BodyStatus::kMore) return {ResponseEvent::kNeedMore, ResponseError::kNone, r.consumed};
      return end_response(r.consumed);
    }
    case State::kUntilClose: return {ResponseEvent::kNeedMore, ResponseError::kNone, piece.size()};
    case State::kSwitch:
      // The switching response is this request's final one; after it the
      // bytes are the new protocol's.
      end_response(0);
      state_ = State::kPassThrough;
      [[fallthrough]];
    case State::kPassThrough: return {ResponseEvent::kPassThrough, ResponseError::kNone, piece.size()};
    case State::kClosed:
      if (piece.empty()) return {ResponseEvent::kNeedMore, ResponseError::kNone, 0};
      return fail(ResponseError::kDataAfterClose);
    case State::kFailed: break;
  }
  return {ResponseEvent::kError, error_, 0};
}

ResponseStep ResponseStream::close() noexcept {
  switch (state_) {
    case State::kHead:
      if (head_bytes_ != 0) return fail(ResponseError::kTruncated);
      state_ = State::kClosed;
      return {ResponseEvent::kNeedMore, ResponseError::kNone, 0};
    case State::kBody:
      if (!body_.done()) return fail(ResponseError::kTruncated);
      [[fallthrough]];
    case State::kUntilClose: {
      const ResponseStep s = end_response(0);
      state_ = State::kClosed;
      return s;
    }
    case State::kSwitch:
    case State::kPassThrough: return next({});
    case State::kClosed: return {ResponseEvent::kNeedMore, ResponseError::kNone, 0};
    case State::kFailed: break;
  }
  return {ResponseEvent::kError, error_, 0};
}

bool ResponseStream::carry_on(const ResponseStream& dead) noexcept {
  const ResponseHead& h = dead.head_;
  if (!all_bool_bytes({&dead.last_connection_close_, &dead.last_keep_alive_, &dead.report_status_lines_,
                       &dead.has_content_length_, &dead.has_transfer_encoding_, &dead.chunked_seen_,
                       &dead.chunked_last_, &dead.chunked_repeated_, &dead.close_, &dead.keep_alive_option_,
                       &dead.has_usage_, &h.interim, &h.switches, &h.connection_close, &h.keep_alive,
                       &h.has_usage}) ||
      static_cast<uint8_t>(h.request) > static_cast<uint8_t>(RequestKind::kUpgrade) ||
      static_cast<uint8_t>(h.body) > static_cast<uint8_t>(ResponseBody::kUntilClose) ||
      static_cast<uint8_t>(dead.state_) > static_cast<uint8_t>(State::kFailed) ||
      static_cast<uint8_t>(dead.head_state_) > static_cast<uint8_t>(HeadState::kFinalLF) ||
      static_cast<uint8_t>(dead.framing_) > static_cast<uint8_t>(Framing::kUsage) ||
      dead.queue_front_ >= kMaxOutstanding || dead.queued_ > kMaxOutstanding || dead.line_len_ > kMaxFramingValue ||
      dead.head_bytes_ > limits_.max_head_bytes || dead.fields_ > limits_.max_fields) {
    return false;
  }
  for (RequestKind k : dead.queue_) {
    if (static_cast<uint8_t>(k) > static_cast<uint8_t>(RequestKind::kUpgrade)) return false;
  }
  BodyFramer body(limits_.body);
  body.watch_trailer(usage_field_);
  if (!body.carry_on(dead.body_)) return false;
  const ResponseLimits limits = limits_;
  const std::string_view usage = usage_field_;
  const bool report = report_status_lines_;
  copy_bytes(*this, dead);
  limits_ = limits;
  usage_field_ = usage;
  report_status_lines_ = report;
  body_ = body;
  return true;
}

}  // namespace sluice::http
