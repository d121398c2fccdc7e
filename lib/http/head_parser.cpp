// See head_parser.h. The scanning itself is in head_scan.inc; this file keeps
// the incremental bookkeeping: the size limit, and lines split across pieces.
#include "http/head_parser.h"

#include <algorithm>
#include <cstring>

namespace sluice::http {

HeadParser::HeadParser(const FieldSet& fields, HeadLimits limits, std::span<FieldLine> field_store,
                       std::span<char> spill, Isa isa) noexcept
    : fields_(fields),
      limits_(limits),
      field_store_(field_store),
      spill_(spill),
      scan_(scan_for(isa_supported(isa) ? isa : Isa::kScalar)),
      isa_(isa_supported(isa) ? isa : Isa::kScalar) {
  reset();
}

void HeadParser::reset() noexcept {
  // Tracked values are only read where their count is non-zero, so the counts
  // are all that needs clearing: this runs once per request.
  head_.tracked_count.fill(0);
  // Each view is cleared on its own: a chained assignment reads one back and
  // stalls on store forwarding, once per request.
  head_.method = {};
  head_.target = {};
  head_.path = {};
  head_.query = {};
  head_.authority = {};
  head_.method_kind = Method::kOther;
  head_.has_query = false;
  head_.version = Version::kHttp11;
  head_.field_count = 0;
  head_.head_bytes = 0;
  head_.body = BodyKind::kNone;
  head_.content_length = 0;
  head_.keep_alive = true;
  head_.upgrade = head_.expect_continue = false;

  cursor_ = ScanCursor{&fields_,
                       &head_,
                       field_store_.data(),
                       static_cast<uint16_t>(std::min<size_t>(field_store_.size(), UINT16_MAX)),
                       limits_.max_fields,
                       false,
                       FieldSemantics{}};
  head_bytes_ = spill_used_ = partial_start_ = 0;
  partial_ = false;
  done_ = HeadStatus::kIncomplete;
  error_ = ParseError::kNone;
}

FeedResult HeadParser::fail(ParseError e) noexcept {
  done_ = HeadStatus::kError;
  error_ = e;
  return {HeadStatus::kError, e, 0};
}

FeedResult HeadParser::finish(size_t consumed) noexcept {
  head_.head_bytes = static_cast<uint32_t>(head_bytes_);
  if (head_.version == Version::kHttp20Preface && head_.field_count != 0) {
    return fail(ParseError::kUnsupportedVersion);
  }
  if (const ParseError e = cursor_.semantics.finish(head_); e != ParseError::kNone) return fail(e);
  done_ = HeadStatus::kComplete;
  return {HeadStatus::kComplete, ParseError::kNone, consumed};
}

FeedResult HeadParser::feed(std::span<const char> piece) noexcept {
  if (done_ != HeadStatus::kIncomplete) return {done_, error_, 0};
  if (piece.empty()) return {HeadStatus::kIncomplete, ParseError::kNone, 0};
  const char* p = piece.data();
  const size_t n = piece.size();
  size_t off = 0;

  if (partial_) {
    // Complete the line waiting in the spill buffer, then scan it there.
    const size_t allowance = limits_.max_head_bytes - head_bytes_;
    const size_t window = std::min(n, allowance);
    const void* lf = window ? std::memchr(p, '\n', window) : nullptr;
    const size_t take = lf ? static_cast<size_t>(static_cast<const char*>(lf) - p) + 1 : window;
    if (spill_used_ + take > spill_.size()) return fail(ParseError::kHeadTooLarge);
    std::memcpy(spill_.data() + spill_used_, p, take);
    spill_used_ += take;
    head_bytes_ += take;
    if (lf == nullptr) {
      if (n > allowance) return fail(ParseError::kHeadTooLarge);
      return {HeadStatus::kIncomplete, ParseError::kNone, n};
    }
    partial_ = false;
    off = take;
    const ScanResult r = scan_(cursor_, spill_.data(), partial_start_, spill_used_);
    if (r.stop == ScanStop::kError) return fail(r.error);
    if (r.stop == ScanStop::kComplete) return finish(off);
    // kPartial: the one line in the spill was consumed whole.
  }

  const size_t end = off + std::min(n - off, limits_.max_head_bytes - head_bytes_);
  const ScanResult r = scan_(cursor_, p, off, end);
  if (r.stop == ScanStop::kError) return fail(r.error);
  if (r.stop == ScanStop::kComplete) {
    head_bytes_ += r.pos - off;
    return finish(r.pos);
  }
  head_bytes_ += end - off;
  if (end < n) return fail(ParseError::kHeadTooLarge);
  const size_t tail = end - r.pos;
  if (tail != 0) {
    if (spill_used_ + tail > spill_.size()) return fail(ParseError::kHeadTooLarge);
    std::memcpy(spill_.data() + spill_used_, p + r.pos, tail);
    partial_start_ = spill_used_;
    spill_used_ += tail;
    partial_ = true;
  }
  return {HeadStatus::kIncomplete, ParseError::kNone, n};
}

}  // namespace sluice::http
