// See clock.h.
#include "time/clock.h"

#include <cpuid.h>
#include <time.h>
#include <x86intrin.h>

namespace sluice::time {

namespace {

Nanos read_clock(clockid_t id) noexcept {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<Nanos>(ts.tv_sec) * kNanosPerSecond + static_cast<Nanos>(ts.tv_nsec);
}

Nanos realtime() noexcept { return read_clock(CLOCK_REALTIME); }
Nanos monotonic() noexcept { return read_clock(CLOCK_MONOTONIC); }
Nanos monotonic_raw() noexcept { return read_clock(CLOCK_MONOTONIC_RAW); }

bool cpu_has_invariant_tsc() noexcept {
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000007u) return false;
  __cpuid(0x80000007u, eax, ebx, ecx, edx);
  return (edx & (1u << 8)) != 0;
}

}  // namespace

ClockSources kernel_clocks() noexcept { return {realtime, monotonic}; }

Nanos SystemClock::now() const noexcept { return realtime(); }

TscClock::TscClock(ClockSources sources) noexcept : invariant_(cpu_has_invariant_tsc()), sources_(sources) {
  // Measure the tick rate against CLOCK_MONOTONIC_RAW over ~10 ms.
  const uint64_t t0 = __rdtsc();
  const Nanos m0 = monotonic_raw();
  Nanos m1 = m0;
  while (m1 - m0 < 10'000'000) m1 = monotonic_raw();
  const uint64_t t1 = __rdtsc();
  ns_per_tick_ = static_cast<double>(m1 - m0) / static_cast<double>(t1 - t0);
  utc_offset_ = static_cast<int64_t>(sources_.realtime() - sources_.monotonic());
  reanchor();
}

Nanos TscClock::now() const noexcept {
  uint64_t before, after, tsc;
  Nanos utc;
  do {
    before = seq_.load(std::memory_order_acquire);
    tsc = anchor_tsc_.load(std::memory_order_relaxed);
    utc = anchor_utc_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    after = seq_.load(std::memory_order_relaxed);
  } while (before != after || (before & 1) != 0);
  const uint64_t ticks = __rdtsc() - tsc;
  return utc + static_cast<Nanos>(static_cast<double>(ticks) * ns_per_tick_);
}

void TscClock::reanchor() noexcept {
  const uint64_t tsc = __rdtsc();
  const Nanos mono = sources_.monotonic();
  // UTC's offset from the monotonic clock moves only when UTC is stepped
  // (or slewed differently): followed at a bounded rate, never jumped to.
  const int64_t target = static_cast<int64_t>(sources_.realtime() - mono);
  const int64_t diff = target - utc_offset_;
  const auto slew = static_cast<int64_t>(kMaxSlewPerReanchor);
  utc_offset_ += diff > slew ? slew : (diff < -slew ? -slew : diff);
  behind_utc_ = target - utc_offset_;
  const Nanos utc = mono + static_cast<Nanos>(utc_offset_);
  const uint64_t s = seq_.load(std::memory_order_relaxed);
  seq_.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  anchor_tsc_.store(tsc, std::memory_order_relaxed);
  anchor_utc_.store(utc, std::memory_order_relaxed);
  seq_.store(s + 2, std::memory_order_release);
}

}  // namespace sluice::time
