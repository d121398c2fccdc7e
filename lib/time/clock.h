// Time for the limiter: UTC nanoseconds since the UNIX epoch, because
// calendar-minute windows (DQ03) need wall-clock minutes and every other
// algorithm is happy with any monotonic nanosecond count. The hot path never
// calls a clock itself: the caller reads one per burst and passes `now` in,
// so tests drive decisions with a ManualClock and simulate minutes exactly.
#pragma once

#include <atomic>
#include <cstdint>

namespace sluice::time {

using Nanos = uint64_t;  // UTC nanoseconds since 1970-01-01T00:00:00Z

inline constexpr Nanos kNanosPerSecond = 1'000'000'000ull;
inline constexpr Nanos kNanosPerMinute = 60 * kNanosPerSecond;

class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual Nanos now() const noexcept = 0;
};

// Set by hand; for tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = 0) noexcept : now_(start) {}
  [[nodiscard]] Nanos now() const noexcept override { return now_.load(std::memory_order_relaxed); }
  void set(Nanos t) noexcept { now_.store(t, std::memory_order_relaxed); }
  void advance(Nanos d) noexcept { now_.fetch_add(d, std::memory_order_relaxed); }

 private:
  std::atomic<Nanos> now_;
};

// CLOCK_REALTIME through the vDSO: no system call, about 20 ns.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] Nanos now() const noexcept override;
};

// Where TscClock reads the kernel's clocks (tests pass their own).
struct ClockSources {
  Nanos (*realtime)() noexcept;   // CLOCK_REALTIME: UTC, which an operator or NTP may step
  Nanos (*monotonic)() noexcept;  // CLOCK_MONOTONIC: never stepped, NTP-slewed like UTC
};
[[nodiscard]] ClockSources kernel_clocks() noexcept;

// The TSC scaled to UTC: a few ns per read. Monotonic underneath: the TSC is
// anchored to CLOCK_MONOTONIC at construction and whenever reanchor() is
// called (the control thread does so every second), so TSC drift stays
// bounded, and UTC is CLOCK_MONOTONIC plus an offset taken at start. A step
// of the system clock therefore moves no bucket; each reanchor() moves the
// offset towards UTC's by at most kMaxSlewPerReanchor (0.05% of a second, a
// second's step is absorbed in 2000 s), so calendar windows (DQ03) follow a
// corrected clock without a jump. Readers on any thread; reanchor() from one
// thread at a time. Needs an invariant TSC (constant_tsc and nonstop_tsc),
// which the constructor checks.
class TscClock final : public Clock {
 public:
  static constexpr Nanos kMaxSlewPerReanchor = 500'000;

  explicit TscClock(ClockSources sources = kernel_clocks()) noexcept;
  [[nodiscard]] Nanos now() const noexcept override;
  void reanchor() noexcept;
  [[nodiscard]] bool invariant_tsc() const noexcept { return invariant_; }
  // How far UTC is from this clock (UTC minus now), as of the last
  // reanchor(): what is still to be slewed after a step.
  [[nodiscard]] int64_t behind_utc() const noexcept { return behind_utc_; }

 private:
  // A sequence lock around the anchor: odd while the writer updates it, so a
  // reader that saw the same even value before and after has a whole anchor.
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> anchor_tsc_{0};
  std::atomic<Nanos> anchor_utc_{0};
  double ns_per_tick_ = 1.0;
  bool invariant_ = false;
  ClockSources sources_;
  int64_t utc_offset_ = 0;  // now = CLOCK_MONOTONIC + this (reanchor()'s thread only)
  int64_t behind_utc_ = 0;
};

}  // namespace sluice::time
