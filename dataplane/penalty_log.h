// The keys a worker put in a penalty box, handed to the control thread
// (sluicectl penalty list shows them with their labels; the bucket table
// holds only keyed hashes). Every boxing is offered; a full ring drops the
// record and counts it (penalty_log_dropped).
#pragma once

#include "limiter/decide.h"
#include "spsc_ring.h"
#include "time/clock.h"

namespace sluice::dataplane {

struct PenaltyRecord {
  time::Nanos at = 0;     // when the worker boxed the key (its clock: UTC)
  time::Nanos until = 0;  // when the box ends
  uint8_t rule_slot = 0;  // the rule's CompiledRule::counter_slot
  limiter::KeyLabel label;
  limiter::BucketKey key{};  // the box's key in the bucket table
};

using PenaltyLog = SpscRing<PenaltyRecord>;

// Records each worker's ring holds between two drains (every 100 ms).
inline constexpr size_t kPenaltyLogRecords = 1024;

}  // namespace sluice::dataplane
