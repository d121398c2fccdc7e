// See key_rates.h.
#include "replay/key_rates.h"

#include <algorithm>
#include <cmath>

namespace sluice::replay {

PeriodLimit period_limit(const policy::BucketSpec& b) noexcept {
  if (b.kind == policy::BucketSpec::Kind::kCalendar) return {b.requests, b.window_minutes * time::kNanosPerMinute};
  return {b.count, b.period};
}

uint64_t busiest_window(std::span<const time::Nanos> times, time::Nanos period) noexcept {
  uint64_t best = 0;
  size_t from = 0;
  for (size_t to = 0; to < times.size(); ++to) {
    while (times[to] - times[from] >= period) ++from;
    best = std::max<uint64_t>(best, to - from + 1);
  }
  return best;
}

void add_key_peak(RateDistribution& d, uint64_t peak, uint64_t limit) noexcept {
  const size_t bins = static_cast<size_t>(std::lround(RateDistribution::kMaxRatio / RateDistribution::kBinWidth)) + 1;
  if (d.keys_by_ratio.size() != bins) d.keys_by_ratio.assign(bins, 0);
  if (limit == 0) return;
  const double ratio = static_cast<double>(peak) / static_cast<double>(limit);
  const size_t bin = std::min(bins - 1, static_cast<size_t>(ratio / RateDistribution::kBinWidth));
  ++d.keys_by_ratio[bin];
  ++d.keys;
  if (peak > limit) ++d.keys_over;
  d.max_ratio = std::max(d.max_ratio, ratio);
}

}  // namespace sluice::replay
