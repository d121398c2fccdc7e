// See key_rates.h.
#include "replay/key_rates.h"

#include <algorithm>
#include <cmath>

namespace sluice::replay {

PeriodLimit period_limit(const policy::BucketSpec& b) noexcept {
  if (b.kind == policy::BucketSpec::Kind::kCalendar) return {b.requests, b.window_minutes * time::kNanosPerMinute};
  return {b.count, b.period};
}

void WindowPeak::add(time::Nanos at) {
  if (period_ == 0) return;
  while (size_ > 0 && at - slot(0) >= period_) {
    head_ = (head_ + 1) & (ring_.size() - 1);
    --size_;
  }
  if (size_ == cap_) {  // a period holds more than the cap: the oldest goes, the peak stays at the cap
    head_ = (head_ + 1) & (ring_.size() - 1);
    --size_;
    cut_ = true;
  }
  if (size_ == ring_.size()) grow();
  slot(size_) = at;
  ++size_;
  peak_ = std::max<uint64_t>(peak_, size_);
}

void WindowPeak::grow() {
  std::vector<time::Nanos> bigger(ring_.empty() ? 4 : ring_.size() * 2);
  for (size_t i = 0; i < size_; ++i) bigger[i] = slot(i);
  ring_ = std::move(bigger);
  head_ = 0;
}

size_t peak_cap(uint64_t limit) noexcept {
  const auto over = static_cast<uint64_t>(RateDistribution::kMaxRatio * static_cast<double>(limit)) + 2;
  return static_cast<size_t>(std::clamp<uint64_t>(over, 64, 65536));
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
