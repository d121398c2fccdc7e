// Internal to the head parser: the state one scan over a contiguous buffer
// reads and updates, and the per-instruction-set scan functions. The scan
// itself lives in head_scan.inc and is compiled once per instruction set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "http/block_masks.h"
#include "http/field_semantics.h"
#include "http/field_set.h"
#include "http/parse_error.h"
#include "http/request_head.h"

namespace sluice::http {

struct ScanCursor {
  const FieldSet* fields;
  RequestHead* head;
  FieldLine* store;         // where field lines are recorded; may be null
  uint16_t store_capacity;  // entries in `store`
  uint16_t max_fields;
  bool request_line_done;
  FieldSemantics semantics;
};

enum class ScanStop : uint8_t {
  kPartial,   // ran out of bytes inside the line that starts at `pos`
  kComplete,  // the head ends just before `pos`
  kError,
};

struct ScanResult {
  ScanStop stop;
  ParseError error;
  size_t pos;
};

// Scans complete lines of buf[start, end), each from its first byte, and
// records them in the cursor. Never reads outside [buf + start, buf + end).
using ScanFn = ScanResult (*)(ScanCursor&, const char* buf, size_t start, size_t end) noexcept;
ScanResult scan_scalar(ScanCursor&, const char* buf, size_t start, size_t end) noexcept;
ScanResult scan_sse42(ScanCursor&, const char* buf, size_t start, size_t end) noexcept;
ScanResult scan_avx2(ScanCursor&, const char* buf, size_t start, size_t end) noexcept;
ScanResult scan_avx512(ScanCursor&, const char* buf, size_t start, size_t end) noexcept;
[[nodiscard]] ScanFn scan_for(Isa isa) noexcept;

// The slow, byte-at-a-time side of the scan, shared by every instruction set.
// `line` runs from the first byte of a line through its LF.
[[nodiscard]] ParseError classify_request_line_error(std::string_view line) noexcept;
[[nodiscard]] ParseError classify_field_line_error(std::string_view line) noexcept;
// Splits and checks a request line whose separators the scan found.
[[nodiscard]] ParseError finish_request_line(ScanCursor& c, std::string_view method, std::string_view target,
                                             size_t query_offset, std::string_view version) noexcept;
// Each instruction set's kernel on its own, for tests that hold the SIMD
// kernels to the scalar one. `p` points at 64 readable bytes.
BlockMasks classify_block_scalar(const char* p) noexcept;
BlockMasks classify_block_sse42(const char* p) noexcept;
BlockMasks classify_block_avx2(const char* p) noexcept;
BlockMasks classify_block_avx512(const char* p) noexcept;
[[nodiscard]] BlockMasks classify_block(Isa isa, const char* p) noexcept;

}  // namespace sluice::http
