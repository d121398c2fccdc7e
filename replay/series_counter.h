// The requests and refusals of each rule over time, counted as the replay
// decides them, before the span of the whole input is known (a streamed
// input's last record comes last). Counts are kept in cells of a second;
// once the cells would pass kMaxCells they are merged into cells of a
// minute, then of an hour, so the table stays small however long the input
// runs. finish() cuts the cells into TimeSeries' bins for the span: every
// bin width bin_width_for() picks for a span that long is a whole number of
// cells, so no cell is split and the bins are exact.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "replay/replay_result.h"
#include "time/clock.h"

namespace sluice::replay {

class SeriesCounter {
 public:
  explicit SeriesCounter(size_t rules) : cells_(rules) {}

  void count(size_t rule, time::Nanos at, bool refused);

  // The bins for [first, last] (the records' span), one row per rule in
  // `names`' order.
  [[nodiscard]] TimeSeries finish(const std::vector<std::string>& names, time::Nanos first, time::Nanos last) const;

  static constexpr size_t kMaxCells = 4 * 3600;

 private:
  struct Cell {
    uint64_t requests = 0, refused = 0;
  };
  void coarsen();

  static constexpr std::array<time::Nanos, 3> kUnits = {time::kNanosPerSecond, time::kNanosPerMinute,
                                                         60 * time::kNanosPerMinute};
  size_t unit_ = 0;             // into kUnits
  time::Nanos origin_ = 0;      // the hour of the first time counted: every unit's cells line up from it
  bool started_ = false;
  std::vector<std::vector<Cell>> cells_;  // per rule
};

}  // namespace sluice::replay
