// Internal to the response stream: the field lines of a response head taken in
// bulk, 64 bytes at a time, on the request head scan's block kernels
// (http/block_masks.h). Compiled once per instruction set beside the request
// head scan (head_scan_isa.cpp includes response_scan.inc); ResponseStream
// picks the build at run time. The scan only finds and checks lines; what a
// framing field's value means stays with ResponseStream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "http/block_masks.h"

namespace sluice::http {

// What one scan found, from a field line's first byte.
struct FieldLineScan {
  // A line whose name has one of the lengths asked for: the caller compares
  // the name and reads the value. Offsets from the scan's start.
  struct Candidate {
    uint32_t line;   // the line's first byte (its name)
    uint32_t colon;  // the ':' after the name
    uint32_t cr;     // the CR before its LF
    uint16_t index;  // lines before it in this scan
  };
  static constexpr size_t kMaxCandidates = 8;

  uint32_t bytes = 0;  // the whole lines taken, through the last one's LF
  uint16_t lines = 0;  // how many
  uint8_t candidates = 0;
  std::array<Candidate, kMaxCandidates> candidate;
};

// Takes the field lines of p[0, n) from its start while each is whole and
// plainly valid (a name of token bytes, a ':', a value without control bytes
// but the CR of its CRLF), at most `max_lines` of them and `max_bytes` bytes;
// stops before the first that is not (the empty line included), and before a
// (kMaxCandidates + 1)th candidate. `lengths`: bit k set asks for the names of
// k bytes (k < 64) as candidates. Never reads outside p[0, n).
using FieldLineScanFn = FieldLineScan (*)(const char* p, size_t n, uint32_t max_bytes, uint32_t max_lines,
                                          uint64_t lengths) noexcept;
FieldLineScan scan_field_lines_scalar(const char*, size_t, uint32_t, uint32_t, uint64_t) noexcept;
FieldLineScan scan_field_lines_sse42(const char*, size_t, uint32_t, uint32_t, uint64_t) noexcept;
FieldLineScan scan_field_lines_avx2(const char*, size_t, uint32_t, uint32_t, uint64_t) noexcept;
FieldLineScan scan_field_lines_avx512(const char*, size_t, uint32_t, uint32_t, uint64_t) noexcept;
[[nodiscard]] FieldLineScanFn field_line_scan_for(Isa isa) noexcept;

}  // namespace sluice::http
