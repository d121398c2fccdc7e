// Sampled refusals for the audit log (--refusal-log): the worker
// offers each request it refuses (429) or answers itself (400, 401, 404,
// ...); at most one offer per `interval` of the worker's own clock is kept,
// copied into a fixed single-producer, single-consumer ring that a control
// thread drains and logs (sluiced's main loop, every 100 ms).
//
// The worker's side allocates nothing, takes no lock, makes no system call
// and never waits: the ring is allocated at construction; when sampling is
// off, or the interval has not passed, an offer is one comparison; a full
// ring drops the record and counts it.
//
// A record holds only what may be logged: the rule's counter slot (its
// name is looked up when the record is logged), the status, and the key's
// label as decide() made it (a client address, a credential's keyed
// digest, a user id, a key's text: never a credential itself), or the
// client's address where no bucket was charged (a request that does not
// parse).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>

#include "limiter/decide.h"
#include "net/ip_address.h"
#include "spsc_ring.h"
#include "time/clock.h"

namespace sluice::dataplane {

struct RefusalRecord {
  time::Nanos at = 0;      // when the worker decided (its clock: UTC)
  uint16_t status = 0;     // 429, or the answer's
  bool has_rule = false;   // false: no rule applied (a request that does not parse)
  uint8_t rule_slot = 0;   // the rule's CompiledRule::counter_slot
  limiter::KeyLabel label;
};

class RefusalSampler {
 public:
  // Off: every offer is refused by its first comparison, and nothing is
  // allocated.
  RefusalSampler() = default;
  // Room for `capacity` records (rounded up to a power of two; 0: off),
  // at most one offer kept per `interval`.
  RefusalSampler(size_t capacity, time::Nanos interval);
  RefusalSampler(const RefusalSampler&) = delete;
  RefusalSampler& operator=(const RefusalSampler&) = delete;

  // A worker's share of `per_second` records a second for `workers`
  // workers: the interval between two of its samples (0 records: off), and
  // a ring that holds a second of them (64 to 4096 records).
  [[nodiscard]] static time::Nanos interval_for(unsigned per_second, unsigned workers) noexcept;
  [[nodiscard]] static size_t capacity_for(unsigned per_second, unsigned workers) noexcept;

  // The worker's: a refusal or answer decided at `now` for a request from
  // `client`.
  void offer(time::Nanos now, const limiter::Decision& d, const net::IpAddress& client) noexcept {
    if (now < next_) [[likely]] return;
    take(now, d, client);
  }

  // The control thread's: moves up to out.size() records, oldest first,
  // into `out`; how many.
  [[nodiscard]] size_t drain(std::span<RefusalRecord> out) noexcept { return ring_.drain(out); }
  // Records sampled but dropped because the ring was full.
  [[nodiscard]] uint64_t dropped() const noexcept { return ring_.dropped(); }
  [[nodiscard]] size_t capacity() const noexcept { return ring_.capacity(); }

 private:
  static constexpr time::Nanos kNever = std::numeric_limits<time::Nanos>::max();

  void take(time::Nanos now, const limiter::Decision& d, const net::IpAddress& client) noexcept;

  // The worker's: when the next offer may be kept (kNever: off).
  time::Nanos next_ = kNever;
  time::Nanos interval_ = 0;
  SpscRing<RefusalRecord> ring_;
};

}  // namespace sluice::dataplane
