// Incremental, zero-copy parser for one HTTP/1.1 request head (RFC 9112).
//
// Feed it the bytes of a connection as they arrive, in any pieces. Views in
// the resulting RequestHead point into the pieces themselves, so the caller
// keeps every piece fed since reset() alive until the head is complete (the
// data plane holds those segments anyway: it forwards or drops a request as a
// whole). Only a line split across two pieces is copied, into the spill
// buffer the caller lends, so a head that arrives in one piece costs no copy.
//
// Strict by design: anything two HTTP parsers could read differently is an
// error with a precise kind (see parse_error.h), because an inline limiter
// that frames a request differently from the origin can be walked past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "http/block_masks.h"
#include "http/field_set.h"
#include "http/head_scan.h"
#include "http/parse_error.h"
#include "http/request_head.h"

namespace sluice::http {

struct HeadLimits {
  uint32_t max_head_bytes = 16 * 1024;  // request line through the final CRLF; past it: 431
  uint16_t max_fields = 100;            // field lines; past it: 431
};

enum class HeadStatus : uint8_t { kIncomplete, kComplete, kError };

struct FeedResult {
  HeadStatus status;
  ParseError error;   // set when status is kError
  size_t consumed;    // bytes of this piece that belong to the head: all of them while
                      // kIncomplete, up to the final CRLF when kComplete, 0 on kError
};

class HeadParser {
 public:
  // `fields` must outlive the parser. `field_store` receives every field line
  // (lines past its size are counted and checked but not recorded). `spill`
  // holds lines split across pieces; a head larger than the spill can only
  // arrive whole, so give it max_head_bytes unless memory is tight.
  HeadParser(const FieldSet& fields, HeadLimits limits, std::span<FieldLine> field_store, std::span<char> spill,
             Isa isa = best_isa()) noexcept;

  HeadParser(const HeadParser&) = delete;
  HeadParser& operator=(const HeadParser&) = delete;

  // Forgets the current head; the next byte fed starts a new one.
  void reset() noexcept;

  [[nodiscard]] FeedResult feed(std::span<const char> piece) noexcept;

  [[nodiscard]] const RequestHead& head() const noexcept { return head_; }
  [[nodiscard]] std::span<const FieldLine> fields() const noexcept {
    return {field_store_.data(), head_.field_count < field_store_.size() ? head_.field_count : field_store_.size()};
  }
  // True once any byte of the current head has been fed.
  [[nodiscard]] bool started() const noexcept { return head_bytes_ != 0; }
  [[nodiscard]] Isa isa() const noexcept { return isa_; }

 private:
  FeedResult finish(size_t consumed) noexcept;
  FeedResult fail(ParseError e) noexcept;

  const FieldSet& fields_;
  HeadLimits limits_;
  std::span<FieldLine> field_store_;
  std::span<char> spill_;
  ScanFn scan_;
  Isa isa_;

  RequestHead head_;
  ScanCursor cursor_;
  size_t head_bytes_ = 0;      // bytes fed into the current head, spilled ones included
  size_t spill_used_ = 0;      // bytes of spill_ holding views of earlier lines
  size_t partial_start_ = 0;   // spill_ offset of a line still waiting for its LF
  bool partial_ = false;       // a line is waiting in spill_
  HeadStatus done_ = HeadStatus::kIncomplete;  // sticky once complete or failed
  ParseError error_ = ParseError::kNone;
};

}  // namespace sluice::http
