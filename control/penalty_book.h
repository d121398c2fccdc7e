// The keys the workers put in penalty boxes, as the control thread heard
// of them (each worker's ring, drained every 100 ms): for `sluicectl
// penalty list`, which shows each with its rule, its label (an address, a
// user, a key's text) and when its box ends. The bucket table is the
// truth, the book only its index: a key released, or a box whose slot was
// reclaimed, is shown only while the table still holds it boxed (the
// caller's `still_boxed`). Bounded: past kMaxEntries, the entries whose box
// ended go first, then the ones ending soonest.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "limiter/bucket_key.h"
#include "time/clock.h"

namespace sluice::control {

class PenaltyBook {
 public:
  static constexpr size_t kMaxEntries = 65536;

  struct Entry {
    std::string rule;
    std::string key;  // the label's text
    limiter::BucketKey box_key{};
    time::Nanos since = 0;
    time::Nanos until = 0;
  };

  // A key boxed (again: its entry is replaced).
  void add(Entry e);
  // The boxes that hold at `now` by the book and by `still_boxed` (given a
  // box's key, when it ends in the table, 0 if not boxed), ending latest
  // first; at most `limit`. Entries found over are forgotten.
  [[nodiscard]] std::vector<Entry> current(time::Nanos now,
                                           const std::function<time::Nanos(const limiter::BucketKey&)>& still_boxed,
                                           size_t limit);
  void forget(const limiter::BucketKey& box_key);
  [[nodiscard]] size_t size() const;

 private:
  struct KeyLess {
    bool operator()(const limiter::BucketKey& a, const limiter::BucketKey& b) const noexcept {
      return a.k0 != b.k0 ? a.k0 < b.k0 : a.k1 < b.k1;
    }
  };
  void make_room(time::Nanos now);

  mutable std::mutex mutex_;
  std::map<limiter::BucketKey, Entry, KeyLess> entries_;
};

}  // namespace sluice::control
