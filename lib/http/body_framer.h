// Finds where a request body ends, so the next head on a keep-alive or
// pipelined connection is found where the origin will find it: exactly
// Content-Length bytes, or chunked coding (RFC 9112 7.1) with its extensions
// and trailer section validated as strictly as a head. It looks at no byte of
// chunk data and copies nothing. It can read one trailer field's value, a
// whole number (DQ05: the tokens an upstream reports after a chunked body).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "http/parse_error.h"

namespace sluice::http {

struct BodyLimits {
  uint32_t max_chunk_line = 4096;      // chunk-size line, extensions included
  uint32_t max_trailer_bytes = 16384;  // whole trailer section
  uint16_t max_trailer_fields = 100;
};

enum class BodyStatus : uint8_t { kMore, kDone, kError };

struct BodyStep {
  BodyStatus status;
  ParseError error;  // set when status is kError
  size_t consumed;   // bytes of the piece that belong to the body (0 on kError)
};

class BodyFramer {
 public:
  explicit BodyFramer(BodyLimits limits = {}) noexcept : limits_(limits) {}

  void start_length(uint64_t length) noexcept;
  void start_chunked() noexcept;

  [[nodiscard]] BodyStep feed(std::span<const char> piece) noexcept;
  [[nodiscard]] bool done() const noexcept { return state_ == State::kDone; }

  // A trailer field (`lowercase`, compared without case; it must outlive the
  // framer; empty: none) whose value, a whole number of at most 18 digits
  // between optional whitespace, trailer_number() reports once the chunked
  // body has ended. start_*() keep it. The last such field counts: if its
  // value is not such a number, there is none.
  void watch_trailer(std::string_view lowercase) noexcept { watched_ = lowercase; }
  [[nodiscard]] bool has_trailer_number() const noexcept { return has_number_; }
  [[nodiscard]] uint64_t trailer_number() const noexcept { return number_; }

  // Goes on where `dead` stood: a framer of the same layout that another
  // process left in memory (a restart that carries connections on). Its
  // position is taken, not its limits nor the field it watched (this one's
  // stay: `dead`'s views point into a process that is gone). False, and
  // nothing taken, if its state is not one this code writes.
  [[nodiscard]] bool carry_on(const BodyFramer& dead) noexcept;

 private:
  enum class State : uint8_t {
    kDone,
    kLength,          // counting down Content-Length
    kSize,            // chunk-size hex digits
    kExtWs,           // BWS, which must lead to ';'
    kExtAfterValue,   // after a quoted value: ';', BWS or CR
    kExtNameStart,    // after ';': BWS or the first name byte
    kExtName,
    kExtAfterName,    // BWS after a name: '=' or ';' must follow
    kExtValueStart,   // after '=': BWS, token or quoted-string
    kExtToken,
    kExtQuoted,
    kExtQuotedPair,
    kSizeLF,          // the LF after the size line's CR
    kData,
    kDataCR,
    kDataLF,
    kTrailerStart,    // start of a trailer line, or of the final CRLF
    kTrailerName,
    kTrailerValue,
    kTrailerLF,
    kFinalLF,
    kFailed,
  };

  // Reading the watched trailer field's value.
  enum class Number : uint8_t { kNotWatched, kLeading, kDigits, kTrailing, kBad };
  void watch_name_byte(unsigned char c) noexcept;
  void watch_value_byte(unsigned char c) noexcept;

  BodyStep fail(ParseError e) noexcept;
  // One byte of a non-data state; false on a framing error.
  [[nodiscard]] bool step(unsigned char c) noexcept;
  [[nodiscard]] bool size_step(unsigned char c) noexcept;
  [[nodiscard]] bool extension_step(unsigned char c) noexcept;
  [[nodiscard]] bool trailer_step(unsigned char c) noexcept;

  BodyLimits limits_;
  State state_ = State::kDone;
  bool name_match_ = false;  // the current trailer name is the watched one so far
  Number number_state_ = Number::kNotWatched;
  bool has_number_ = false;
  uint64_t remaining_ = 0;  // Content-Length left, or chunk data left
  uint64_t chunk_size_ = 0;
  uint32_t line_bytes_ = 0;  // of the current size line
  uint32_t size_digits_ = 0;
  uint32_t trailer_bytes_ = 0;
  uint16_t trailer_fields_ = 0;
  ParseError error_ = ParseError::kNone;
  uint8_t name_pos_ = 0;  // bytes of the current trailer name matched so far (while name_match_)
  uint8_t number_digits_ = 0;
  std::string_view watched_;
  uint64_t number_ = 0;
};

}  // namespace sluice::http
