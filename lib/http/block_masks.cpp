// Run-time choice of the head scan's instruction set.
#include "http/block_masks.h"

#include <cstdlib>
#include <string_view>

#include "http/head_scan.h"
#include "http/response_scan.h"

namespace sluice::http {

bool isa_supported(Isa isa) noexcept {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kSse42: return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("ssse3");
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("bmi2");
  }
  return false;
}

std::string_view to_string(Isa isa) noexcept {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kSse42: return "sse42";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

namespace {

Isa find_best_isa() noexcept {
  Isa best = Isa::kScalar;
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) best = isa;
  }
  if (const char* forced = std::getenv("SLUICE_ISA"); forced != nullptr) {
    for (Isa isa : kAllIsas) {
      if (to_string(isa) == forced && isa_supported(isa) && isa <= best) return isa;
    }
  }
  return best;
}

}  // namespace

Isa best_isa() noexcept {
  // Once per process: a parser is built for every request in flight, and the
  // environment lookup is not free.
  static const Isa best = find_best_isa();
  return best;
}

ScanFn scan_for(Isa isa) noexcept {
  switch (isa) {
    case Isa::kSse42: return scan_sse42;
    case Isa::kAvx2: return scan_avx2;
    case Isa::kAvx512: return scan_avx512;
    case Isa::kScalar: break;
  }
  return scan_scalar;
}

FieldLineScanFn field_line_scan_for(Isa isa) noexcept {
  switch (isa) {
    case Isa::kSse42: return scan_field_lines_sse42;
    case Isa::kAvx2: return scan_field_lines_avx2;
    case Isa::kAvx512: return scan_field_lines_avx512;
    case Isa::kScalar: break;
  }
  return scan_field_lines_scalar;
}

BlockMasks classify_block(Isa isa, const char* p) noexcept {
  switch (isa) {
    case Isa::kSse42: return classify_block_sse42(p);
    case Isa::kAvx2: return classify_block_avx2(p);
    case Isa::kAvx512: return classify_block_avx512(p);
    case Isa::kScalar: break;
  }
  return classify_block_scalar(p);
}

}  // namespace sluice::http
