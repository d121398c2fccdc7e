// The heads a worker holds for their rule's delay (policy `delay_max`),
// by when each is due: a fixed-capacity min-heap, so that the loop asks
// "is one due?" with one comparison and takes the due ones in order.
//
// An entry names its flow (key, hash) and the context that holds the head,
// not a pointer: a flow that ended meanwhile (a reset, an eviction, an
// expiry) leaves its entry behind, and the taker finds it stale (no flow,
// another context, or a context whose delayed_until differs) and drops it.
// A stale entry occupies its place until it is due, at most delay_max
// (10 s): the bound holds either way.
//
// Capacity: the engine's `delay_slots`, the most requests one worker holds
// at once. When it is full the request path lets no rule delay (a request
// over budget is refused as without delay, and counted): one key, or many,
// cannot make the worker hold more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flow_key.h"
#include "time/clock.h"

namespace sluice::dataplane {

struct DelayedHead {
  time::Nanos until = 0;
  FlowKey key{};
  uint64_t hash = 0;
  int32_t context = -1;
};

class DelayQueue {
 public:
  explicit DelayQueue(size_t capacity);

  [[nodiscard]] bool full() const noexcept { return heap_.size() >= capacity_; }
  [[nodiscard]] size_t size() const noexcept { return heap_.size(); }
  [[nodiscard]] size_t capacity() const noexcept { return capacity_; }
  // Whether the earliest entry is due at `now`.
  [[nodiscard]] bool due(time::Nanos now) const noexcept { return !heap_.empty() && heap_.front().until <= now; }

  // False (nothing kept) when full.
  [[nodiscard]] bool push(const DelayedHead& h) noexcept;
  // The earliest entry, taken out; only when size() != 0.
  [[nodiscard]] DelayedHead pop() noexcept;

 private:
  size_t capacity_;
  std::vector<DelayedHead> heap_;  // reserved to capacity_: push never allocates
};

}  // namespace sluice::dataplane
