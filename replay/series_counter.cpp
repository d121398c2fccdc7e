// See series_counter.h.
#include "replay/series_counter.h"

#include <algorithm>

#include "replay/outcome_tally.h"

namespace sluice::replay {

void SeriesCounter::count(size_t rule, time::Nanos at, bool refused) {
  if (!started_) {
    started_ = true;
    origin_ = at - at % kUnits.back();
  }
  // A record earlier than the first (later than the reorder window allowed)
  // lands in the first cell.
  size_t cell = static_cast<size_t>((at - std::min(at, origin_)) / kUnits[unit_]);
  while (cell >= kMaxCells && unit_ + 1 < kUnits.size()) {
    coarsen();
    cell = static_cast<size_t>((at - std::min(at, origin_)) / kUnits[unit_]);
  }
  cell = std::min(cell, kMaxCells - 1);  // past 600 days of hours: the last cell
  std::vector<Cell>& row = cells_[rule];
  if (row.size() <= cell) row.resize(cell + 1);
  ++row[cell].requests;
  if (refused) ++row[cell].refused;
}

void SeriesCounter::coarsen() {
  const size_t factor = static_cast<size_t>(kUnits[unit_ + 1] / kUnits[unit_]);
  for (std::vector<Cell>& row : cells_) {
    std::vector<Cell> merged((row.size() + factor - 1) / factor);
    for (size_t i = 0; i < row.size(); ++i) {
      merged[i / factor].requests += row[i].requests;
      merged[i / factor].refused += row[i].refused;
    }
    row = std::move(merged);
  }
  ++unit_;
}

TimeSeries SeriesCounter::finish(const std::vector<std::string>& names, time::Nanos first, time::Nanos last) const {
  TimeSeries s;
  s.bin = bin_width_for(last - first);
  s.start = first - first % s.bin;
  const size_t bins = static_cast<size_t>((last - s.start) / s.bin) + 1;
  for (size_t r = 0; r < names.size(); ++r) {
    TimeSeries::Rule out{names[r], std::vector<uint64_t>(bins, 0), std::vector<uint64_t>(bins, 0)};
    const std::vector<Cell>& row = cells_.at(r);
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i].requests == 0) continue;
      const time::Nanos at = origin_ + i * kUnits[unit_];
      const size_t bin = std::min(bins - 1, static_cast<size_t>((at - std::min(at, s.start)) / s.bin));
      out.requests[bin] += row[i].requests;
      out.refused[bin] += row[i].refused;
    }
    s.rules.push_back(std::move(out));
  }
  return s;
}

}  // namespace sluice::replay
