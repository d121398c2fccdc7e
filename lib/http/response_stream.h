// The origin-to-client byte stream of one connection, cut into responses and
// matched in order to the requests the data plane forwarded on it. The
// appliance needs this to know which requests still await their answer, and
// so when a response of its own (a 429 for a refused pipelined request) may go
// out between the origin's responses (RFC 9112 9.3.2), and when the
// connection stops being HTTP (101, or a 2xx to CONNECT).
//
// Unlike the request side, nothing here keeps a view into the caller's
// segments: the head is read by a small state machine that keeps only what
// framing needs (status, version, and the values of Content-Length,
// Transfer-Encoding and Connection, in one bounded line buffer); every other
// field line is checked and skipped. A status line that lies whole in the
// piece, and is plainly valid, is taken in one go (its reason scanned 16 bytes
// at a time); field lines that do are taken in bulk, 64 bytes at a time, by
// the request head scan's block kernels (http/response_scan.h), and only the
// lines whose names have a framing field's length are looked at again.
// Anything else goes byte by byte, where every error is found, so every way
// ends in the same state. Bodies are skipped by BodyFramer without
// looking at their data. Strict like the request parser, but an error here
// only means the flow can no longer be framed: the caller bridges it as is.
//
// Hot path: noexcept, no allocation, no system call, fixed size
// (sizeof(ResponseStream) is 432 bytes on x86-64; response_stream.cpp checks
// it stays under 512), so it can live in the per-flow context pool.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "http/body_framer.h"
#include "http/request_head.h"

namespace sluice::http {

enum class ResponseError : uint8_t {
  kNone = 0,
  kUnsolicited,               // a response began while no request was outstanding
  kBadStatusLine,             // not "HTTP/1." DIGIT SP 3DIGIT [SP reason], or a control byte in the reason
  kBadVersion,                // an HTTP version other than 1.x
  kBadField,                  // empty or non-token name, space before ':', obs-fold, control byte in a value
  kBadLineEnding,             // CR without LF, or LF without CR
  kHeadTooLarge,              // past ResponseLimits::max_head_bytes
  kTooManyFields,             // past ResponseLimits::max_fields
  kFramingFieldTooLong,       // a Content-Length, Transfer-Encoding or Connection value past kMaxFramingValue
  kBadContentLength,          // an element that is not 1*DIGIT (at most 18 digits)
  kConflictingContentLength,  // Content-Length values that differ
  kBadTransferEncoding,       // "chunked" listed twice
  kTransferEncodingInHttp10,  // faulty framing per RFC 9112 6.1
  kUnexpectedSwitch,          // 101 to a request that did not ask to upgrade
  kBadChunk,                  // malformed chunked body
  kTrailerTooLarge,           // trailer section past BodyLimits
  kTruncated,                 // the origin closed in the middle of a head or of a delimited body
  kDataAfterClose,            // bytes fed after close()
};

// Stable snake_case name, for counters and logs.
[[nodiscard]] std::string_view to_string(ResponseError e) noexcept;

struct ResponseLimits {
  uint32_t max_head_bytes = 64 * 1024;  // status line through the final CRLF
  uint16_t max_fields = 256;            // field lines of one head
  BodyLimits body;                      // chunk lines and trailers
};

enum class ResponseBody : uint8_t {
  kNone,        // HEAD, 1xx, 204, 304, Content-Length: 0, or a switch
  kLength,      // Content-Length bytes
  kChunked,     // Transfer-Encoding with chunked last
  kUntilClose,  // runs until the origin closes the connection
};

// What one response head says, copied out: valid from kHead until the next kHead.
struct ResponseHead {
  uint16_t status = 0;
  uint8_t minor_version = 1;                     // HTTP/1.x
  RequestKind request = RequestKind::kOrdinary;  // the kind of request it answers
  ResponseBody body = ResponseBody::kNone;
  uint64_t content_length = 0;    // when body is kLength
  uint32_t head_bytes = 0;        // status line through the final CRLF
  bool interim = false;           // 1xx other than a switching 101: the request still awaits its final response
  bool switches = false;          // 101 to an Upgrade, 2xx to a CONNECT: the connection leaves HTTP after this head
  bool connection_close = false;  // Connection lists "close"
  bool keep_alive = true;         // another response may follow on the connection (RFC 9112 9.3): no "close",
                                  // HTTP/1.1 or "keep-alive", not close-delimited, no switch
  bool has_usage = false;         // the usage field (set_usage_field) held a number, in the head or, from
                                  // kResponseEnd on, in a chunked body's trailer section (which wins)
  uint64_t usage = 0;             // that number (DQ05: tokens the request used)
};

enum class ResponseEvent : uint8_t {
  kNeedMore,     // every byte was consumed; nothing to act on yet
  kStatusLine,   // only with report_status_lines(true): a status line is complete, `consumed` marks the
                 // byte after its LF (where field lines may be inserted), status_line_code() is its code
  kHead,         // a response head is complete: head() is valid
  kResponseEnd,  // a final response is complete (body included); outstanding() counts it no more.
                 // `consumed` then marks the byte after it: where a response of the appliance's
                 // own, for the request after this one, may be spliced into the client's stream
  kPassThrough,  // the connection switched protocol and is not framed any more: bridge it
  kError,        // see error; the flow cannot be framed any more: bridge it unframed
};

struct ResponseStep {
  ResponseEvent event;
  ResponseError error;  // set when event is kError
  size_t consumed;      // bytes of the piece up to and including the event (0 on kError)
};

class ResponseStream {
 public:
  // Requests that may be forwarded and not yet answered at once. Past it
  // expect() refuses, and the data plane holds the next request back.
  static constexpr size_t kMaxOutstanding = 32;
  // Longest value of Content-Length, Transfer-Encoding or Connection kept for
  // reading; legitimate ones are a few bytes.
  static constexpr size_t kMaxFramingValue = 256;

  explicit ResponseStream(ResponseLimits limits = {}) noexcept;

  // Forgets everything (queue, counters, current response) for the next flow;
  // the limits stay.
  void reset() noexcept;

  // A request of this kind was forwarded to the origin: its response is due
  // after those of the requests before it. Call it before the request's first
  // byte goes out (the origin may answer early). False when kMaxOutstanding
  // requests are already waiting; nothing is recorded then.
  [[nodiscard]] bool expect(RequestKind kind) noexcept;

  // Consumes origin bytes up to the next event. Call again with the rest of
  // the piece (after `consumed`, even if empty) until the event is kNeedMore,
  // kPassThrough or kError. After kPassThrough every piece is consumed whole;
  // after kError every call returns the same error and consumes nothing.
  [[nodiscard]] ResponseStep next(std::span<const char> piece) noexcept;

  // The origin closed its side (FIN, or a reset the caller treats as one).
  // Ends a close-delimited response (kResponseEnd), or one whose end has not
  // been reported yet; kError kTruncated in the middle of a head or of a
  // Content-Length or chunked body; kNeedMore between responses (requests
  // still outstanding stay counted: they will get no answer). Any later
  // non-empty piece is kError kDataAfterClose.
  [[nodiscard]] ResponseStep close() noexcept;

  // Requests forwarded whose final response has not completed.
  [[nodiscard]] size_t outstanding() const noexcept { return queued_; }
  // The current or last response head.
  [[nodiscard]] const ResponseHead& head() const noexcept { return head_; }
  [[nodiscard]] uint16_t status() const noexcept { return head_.status; }
  // Final responses completed on this flow (a switch counts as one).
  [[nodiscard]] uint64_t completed() const noexcept { return completed_; }
  // Of the last completed final response: whether it listed Connection: close,
  // and whether the connection may carry another response after it.
  [[nodiscard]] bool last_connection_close() const noexcept { return last_connection_close_; }
  [[nodiscard]] bool last_keep_alive() const noexcept { return last_keep_alive_; }
  // True while no byte of a response is in flight: the last one (interim
  // ones included) has ended and nothing of the next has arrived.
  [[nodiscard]] bool at_boundary() const noexcept { return state_ == State::kHead && head_bytes_ == 0; }
  [[nodiscard]] ResponseError error() const noexcept { return error_; }

  // Whether next() also stops after each status line (kStatusLine), for a
  // caller that inserts field lines into responses (reset() keeps it).
  void report_status_lines(bool on) noexcept { report_status_lines_ = on; }
  // The status code of the status line just reported.
  [[nodiscard]] uint16_t status_line_code() const noexcept { return status_; }

  // A field whose value (a whole number) head() reports as `usage`: DQ05's
  // tokens, when the origin reports them in its response head or in the
  // trailer section of a chunked response. `lowercase` must outlive the
  // stream (the compiled policy's) and be at most 32 bytes; empty: none.
  // reset() keeps it.
  void set_usage_field(std::string_view lowercase) noexcept {
    usage_field_ = lowercase;
    body_.watch_trailer(lowercase);
  }

  // Goes on where `dead` stood: a stream of the same layout that another
  // process left in memory (a restart that carries connections on): its
  // queue, counters and place in the current response, head or body. Its
  // limits, usage field and report_status_lines stay this stream's. False,
  // and nothing taken, if a position in it is not one this code writes.
  [[nodiscard]] bool carry_on(const ResponseStream& dead) noexcept;

 private:
  enum class State : uint8_t { kHead, kBody, kUntilClose, kSwitch, kPassThrough, kClosed, kFailed };
  // Position inside a head.
  enum class HeadState : uint8_t {
    kStatusLine,   // the fixed part "HTTP/1.1 200", position in line_len_
    kAfterStatus,  // SP before the reason, or CR
    kReason,
    kStatusLF,
    kLineStart,  // a field name's first byte, or the CR of the empty line
    kName,
    kValueStart,  // leading whitespace of a framing field's value
    kValue,       // a framing field's value, kept in line_
    kSkipValue,   // any other field's value, checked and dropped
    kFieldLF,
    kFinalLF,
  };
  enum class Framing : uint8_t { kOther, kContentLength, kTransferEncoding, kConnection, kUsage };

  ResponseStep fail(ResponseError e) noexcept;
  ResponseStep feed_head(std::span<const char> piece) noexcept;
  [[nodiscard]] size_t field_lines_in_bulk(const char* p, size_t n, ResponseError& error) noexcept;
  [[nodiscard]] size_t whole_status_line(const char* p, size_t n) noexcept;
  [[nodiscard]] Framing framing_of(std::string_view name) const noexcept;
  [[nodiscard]] ResponseError step(unsigned char c) noexcept;
  [[nodiscard]] ResponseError end_field(std::string_view raw) noexcept;
  [[nodiscard]] ResponseError finish_head() noexcept;
  ResponseStep end_response(size_t consumed) noexcept;
  void start_head() noexcept;

  ResponseLimits limits_;
  BodyFramer body_;
  ResponseHead head_;

  // The in-order queue of forwarded requests, a ring.
  std::array<RequestKind, kMaxOutstanding> queue_{};
  uint8_t queue_front_ = 0;
  uint8_t queued_ = 0;

  State state_ = State::kHead;
  ResponseError error_ = ResponseError::kNone;
  bool last_connection_close_ = false;
  bool last_keep_alive_ = true;
  bool report_status_lines_ = false;
  uint64_t completed_ = 0;

  // The head being read.
  HeadState head_state_ = HeadState::kStatusLine;
  Framing framing_ = Framing::kOther;
  uint8_t minor_version_ = 0;
  uint16_t status_ = 0;
  uint16_t fields_ = 0;
  uint16_t line_len_ = 0;  // status-line position, or bytes of line_ in use
  uint32_t head_bytes_ = 0;
  uint64_t content_length_ = 0;
  bool has_content_length_ = false;
  bool has_transfer_encoding_ = false;
  bool chunked_seen_ = false;
  bool chunked_last_ = false;  // the last coding listed so far is "chunked"
  bool chunked_repeated_ = false;
  bool close_ = false;
  bool keep_alive_option_ = false;
  bool has_usage_ = false;
  uint64_t usage_ = 0;
  std::string_view usage_field_;
  std::array<char, kMaxFramingValue> line_;  // a framing field's name, then its value
};

}  // namespace sluice::http
