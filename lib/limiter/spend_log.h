// What one worker admitted on `scope: cluster` buckets since the control
// plane last looked. The worker adds each admission's cost (the
// bucket's emission interval, in nanoseconds) to its key's entry; the
// control plane's cluster sync turns the log over every sync interval and
// sends the sums to Redis. The hot path stays as it was: no lock, no system
// call, no allocation, and nothing shared with another worker.
//
// Two halves, one written at a time. The control plane flips which half the
// worker writes, waits until the worker has passed a quiescent state (it
// then writes only the other half: its RCU report orders its writes before
// the wait returns), reads the retired half and clears it. A key's entry is
// found by open addressing on the key's own hash bits; a half that is full
// refuses new keys, and what it refused is counted (`lost`): spending the
// cluster never hears of, so the operator can size the log.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "limiter/bucket_key.h"
#include "time/clock.h"

namespace sluice::limiter {

using Nanos = time::Nanos;

// A key's spending since the last sync. A rate (GCRA) bucket's: admissions
// times their emission interval (saturating), nanoseconds. A calendar
// window's: the requests counted and the tokens charged in the window that
// begins at `minute` (what an earlier window counted no longer matters once
// it is over).
struct KeySpend {
  BucketKey key;
  Nanos spent = 0;      // GCRA: nanoseconds; window: requests
  uint64_t tokens = 0;  // window: tokens
  uint32_t minute = 0;  // window: the first minute of the window counted (calendar_window.h's window_of)
};

class SpendLog {
 public:
  // Keys per half, a power of two; a half takes at most 3/4 of them.
  explicit SpendLog(size_t keys_per_half = 8192);

  // The worker: `spent` more on `key`. No lock, no allocation.
  void record(const BucketKey& key, Nanos spent) noexcept;
  // The worker: a calendar window's requests and tokens in the window
  // beginning at `minute`; a key counted in an earlier window starts again
  // from this one.
  void record_window(const BucketKey& key, uint32_t minute, uint64_t requests, uint64_t tokens) noexcept;

  // The control plane: the worker writes the other half from now on; returns
  // the half retired. drain() it only once the worker has passed a
  // quiescent state.
  [[nodiscard]] unsigned flip() noexcept;
  // The control plane: appends the retired half's spends to `out` and
  // clears it for its next turn.
  void drain(unsigned half, std::vector<KeySpend>& out);

  // Spending refused because a half was full (a rate's nanoseconds and a
  // window's requests, added up: a size, not a unit), and the records
  // refused (any thread).
  [[nodiscard]] uint64_t lost() const noexcept { return lost_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t lost_records() const noexcept { return lost_records_.load(std::memory_order_relaxed); }

 private:
  struct Half {
    std::unique_ptr<KeySpend[]> slots;
    size_t used = 0;
  };
  // The key's entry in the active half, claimed if new; null if the half
  // is full (counted as lost, `spent` with it).
  [[nodiscard]] KeySpend* entry(const BucketKey& key, uint64_t spent) noexcept;

  size_t mask_;
  size_t limit_;
  Half halves_[2];
  std::atomic<unsigned> active_{0};
  std::atomic<uint64_t> lost_{0};
  std::atomic<uint64_t> lost_records_{0};
};

}  // namespace sluice::limiter
