// The median of a benchmark's repetitions: what perf/ reports, since this
// machine is shared and noisy.
#pragma once

#include <algorithm>
#include <vector>

namespace sluice::perf {

[[nodiscard]] inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace sluice::perf
