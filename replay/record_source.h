// How records reach the replay without any input being held whole: a
// RecordSource hands out one input's records a batch at a time, in the
// input's order (time order, or nearly: time_merge.h puts them right); a
// RecordStream is the one ordered stream the decisions are taken from.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "replay/record.h"

namespace sluice::replay {

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Appends the input's next records to `out`; false once it has no more
  // (a batch may be empty: a piece of blank lines).
  [[nodiscard]] virtual bool next(std::vector<RequestRecord>& out) = 0;
};

class RecordStream {
 public:
  virtual ~RecordStream() = default;
  // The next record to decide; false at the end.
  [[nodiscard]] virtual bool next(RequestRecord& out) = 0;
};

// Records already in memory (a capture, whose flows are put back together
// whole; a test's), sorted by (at, order) and handed out in order.
class RecordsInMemory final : public RecordSource, public RecordStream {
 public:
  explicit RecordsInMemory(std::vector<RequestRecord> records) : records_(std::move(records)) {
    std::stable_sort(records_.begin(), records_.end(), [](const RequestRecord& a, const RequestRecord& b) {
      return a.at != b.at ? a.at < b.at : a.order < b.order;
    });
  }
  bool next(std::vector<RequestRecord>& out) override {
    const size_t n = std::min(kBatch, records_.size() - at_);
    for (size_t i = 0; i < n; ++i) out.push_back(std::move(records_[at_ + i]));
    at_ += n;
    return n > 0;
  }
  bool next(RequestRecord& out) override {
    if (at_ == records_.size()) return false;
    out = std::move(records_[at_++]);
    return true;
  }

 private:
  static constexpr size_t kBatch = 4096;
  std::vector<RequestRecord> records_;
  size_t at_ = 0;
};

}  // namespace sluice::replay
