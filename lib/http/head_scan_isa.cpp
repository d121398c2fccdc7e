// One instruction set's build of the head scans: the request head's, and a
// response head's field lines. meson compiles this file once per instruction
// set, with one of SLUICE_SCAN_{SCALAR,SSE42,AVX2,AVX512} defined;
// head_parser.cpp and response_stream.cpp pick the build at run time
// (scan_for, field_line_scan_for).
#include <immintrin.h>

#include "http/head_scan.h"
#include "http/response_scan.h"
#include "http/target_region.h"

#if defined(SLUICE_SCAN_AVX512)
#define SLUICE_SCAN_BEGIN SLUICE_TARGET_BEGIN("avx512f,avx512bw,bmi,bmi2,popcnt,lzcnt")
#define SLUICE_SCAN_END SLUICE_TARGET_END
#define SLUICE_SCAN_NS isa_avx512
#define SLUICE_SCAN_KERNEL "http/classify_avx512.inc"
#define SLUICE_SCAN_ENTRY scan_avx512
#define SLUICE_FIELD_LINES_ENTRY scan_field_lines_avx512
#define SLUICE_CLASSIFY_ENTRY classify_block_avx512
#elif defined(SLUICE_SCAN_AVX2)
#define SLUICE_SCAN_BEGIN SLUICE_TARGET_BEGIN("avx2,bmi,bmi2,popcnt,lzcnt")
#define SLUICE_SCAN_END SLUICE_TARGET_END
#define SLUICE_SCAN_NS isa_avx2
#define SLUICE_SCAN_KERNEL "http/classify_avx2.inc"
#define SLUICE_SCAN_ENTRY scan_avx2
#define SLUICE_FIELD_LINES_ENTRY scan_field_lines_avx2
#define SLUICE_CLASSIFY_ENTRY classify_block_avx2
#elif defined(SLUICE_SCAN_SSE42)
#define SLUICE_SCAN_BEGIN SLUICE_TARGET_BEGIN("sse4.2,popcnt")
#define SLUICE_SCAN_END SLUICE_TARGET_END
#define SLUICE_SCAN_NS isa_sse42
#define SLUICE_SCAN_KERNEL "http/classify_sse42.inc"
#define SLUICE_SCAN_ENTRY scan_sse42
#define SLUICE_FIELD_LINES_ENTRY scan_field_lines_sse42
#define SLUICE_CLASSIFY_ENTRY classify_block_sse42
#elif defined(SLUICE_SCAN_SCALAR)
#define SLUICE_SCAN_BEGIN
#define SLUICE_SCAN_END
#define SLUICE_SCAN_NS isa_scalar
#define SLUICE_SCAN_KERNEL "http/classify_scalar.inc"
#define SLUICE_SCAN_ENTRY scan_scalar
#define SLUICE_FIELD_LINES_ENTRY scan_field_lines_scalar
#define SLUICE_CLASSIFY_ENTRY classify_block_scalar
#else
#error "define one of SLUICE_SCAN_{SCALAR,SSE42,AVX2,AVX512}"
#endif

SLUICE_SCAN_BEGIN
namespace sluice::http::SLUICE_SCAN_NS {
#include SLUICE_SCAN_KERNEL
#include "http/head_scan.inc"
#include "http/response_scan.inc"
}  // namespace sluice::http::SLUICE_SCAN_NS
SLUICE_SCAN_END

namespace sluice::http {

ScanResult SLUICE_SCAN_ENTRY(ScanCursor& c, const char* buf, size_t start, size_t end) noexcept {
  return SLUICE_SCAN_NS::scan(c, buf, start, end);
}

BlockMasks SLUICE_CLASSIFY_ENTRY(const char* p) noexcept { return SLUICE_SCAN_NS::classify(p); }

FieldLineScan SLUICE_FIELD_LINES_ENTRY(const char* p, size_t n, uint32_t max_bytes, uint32_t max_lines,
                                       uint64_t lengths) noexcept {
  return SLUICE_SCAN_NS::scan_field_lines(p, n, max_bytes, max_lines, lengths);
}

}  // namespace sluice::http
