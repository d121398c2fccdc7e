// Every input's records as one stream in time order, without holding any
// input whole. Each input is put in order within its look-back: a log is
// written as requests end, so records timed at their start come up to the
// longest request late, and several workers writing one file interleave.
// A record is let go once its input has shown one at least the look-back
// later (or ended). The inputs are then merged record by record on
// (at, order), a k-way merge. An input is opened only when the merge
// reaches the earliest time it can hold, so a week of daily files costs
// one day's reader at a time, not a week's.
//
// A record later than its input's look-back allows (its place is already
// past) is decided next, at its own time, and counted: late() tells how
// many, and by how much at most, so the report can say the window was too
// short rather than reorder silently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "replay/record_source.h"
#include "time/clock.h"

namespace sluice::replay {

struct MergeInput {
  // Opens the input, once, when the merge reaches `starts`; or `opened` is
  // given (a pipe, which cannot be read twice; records in memory).
  std::function<std::unique_ptr<RecordSource>()> open;
  std::unique_ptr<RecordSource> opened;
  time::Nanos starts = 0;    // no record of the input is earlier
  time::Nanos look_back = 0;
};

struct MergeWindow {
  std::optional<time::Nanos> since, until;  // records outside [since, until) are dropped
};

class TimeMerge final : public RecordStream {
 public:
  TimeMerge(std::vector<MergeInput> inputs, MergeWindow window);
  bool next(RequestRecord& out) override;

  struct Lateness {
    uint64_t records = 0;   // let go after a later record of their input
    time::Nanos most = 0;   // the most any was behind
  };
  [[nodiscard]] Lateness late() const noexcept { return late_; }
  // Records of input `i` kept (in the window), by input index.
  [[nodiscard]] uint64_t kept(size_t i) const noexcept { return i < kept_.size() ? kept_[i] : 0; }
  // The most records any input held waiting in its look-back at once.
  [[nodiscard]] size_t most_held() const noexcept { return most_held_; }

 private:
  struct Input {
    MergeInput spec;
    std::unique_ptr<RecordSource> source;
    std::vector<RequestRecord> batch;
    size_t at = 0;
    bool ended = false;
    std::deque<RequestRecord> held;  // in (at, order) order
    time::Nanos newest = 0;          // the latest `at` taken in
    time::Nanos let_go = 0;          // the latest `at` let go
    bool any_let_go = false;
  };
  struct Head {
    time::Nanos at;
    uint64_t order;
    size_t input;
    bool operator>(const Head& o) const noexcept { return at != o.at ? at > o.at : order > o.order; }
  };

  // Takes records in until the input's earliest held one may go; false
  // when the input has nothing left.
  bool ready(Input& in);
  void take_in(Input& in, RequestRecord&& r);
  void open_due(time::Nanos now);
  void activate(size_t i);

  std::vector<Input> inputs_;
  std::vector<size_t> unopened_;  // by `starts`, latest first (the next to open at the back)
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads_;
  MergeWindow window_;
  Lateness late_;
  std::vector<uint64_t> kept_;
  size_t most_held_ = 0;
};

}  // namespace sluice::replay
