// Charging a request to its bucket in the shared table: the algorithm's
// decision applied with compare-and-swap, retried only when another thread
// changed the same bucket in between. A refusal writes nothing. These are the
// only functions that touch bucket state on the hot path.
#pragma once

#include "limiter/bucket_table.h"
#include "limiter/calendar_window.h"
#include "limiter/gcra.h"

namespace sluice::limiter {

struct GcraCharge {
  GcraDecision decision;
  bool overflow;  // charged to the kind's shared overflow bucket
};

struct WindowCharge {
  WindowDecision decision;
  bool overflow;
};

// `max_wait`: gcra_decide's (a rule's delay).
[[nodiscard]] GcraCharge charge_gcra(BucketTable& table, const BucketKey& key, Nanos now, const GcraLimit& limit,
                                     Nanos max_wait = 0) noexcept;

// One request against a calendar window: the request word is `a`, the token
// word `b`.
[[nodiscard]] WindowCharge charge_window(BucketTable& table, const BucketKey& key, Nanos now,
                                         const WindowLimit& limit) noexcept;

// Tokens a finished request used, added to the window of `now` (DQ05).
void charge_tokens(BucketTable& table, const BucketKey& key, uint64_t tokens, Nanos now,
                   const Calendar& calendar) noexcept;

// The state of a key's bucket without charging it: what a request would be
// told now (for `sluicectl bucket show`).
[[nodiscard]] GcraDecision peek_gcra(BucketTable& table, const BucketKey& key, Nanos now,
                                     const GcraLimit& limit) noexcept;
// What a key's GCRA bucket holds at `now` (gcra_standing), charging nothing.
[[nodiscard]] GcraStanding peek_gcra_standing(BucketTable& table, const BucketKey& key, Nanos now,
                                              const GcraLimit& limit) noexcept;
// What charge_window() would decide, without counting anything.
[[nodiscard]] WindowDecision peek_window(BucketTable& table, const BucketKey& key, Nanos now,
                                         const WindowLimit& limit) noexcept;

// Layered budgets, all or none: an admission charge_gcra() or
// charge_window() made, taken back because another of the rule's buckets
// refused. A GCRA admission moved the TAT on by one interval, so the TAT
// goes back by one (a TAT left at or before now reads as a full bucket
// either way); a window's admission counted one request in `window` (its
// first minute), taken off unless that window is over. `overflow`: the
// charge went to the kind's overflow bucket. Others' admissions in between
// are kept: a request refused meanwhile because of this one's charge was
// refused in the limiter's favour.
void uncharge_gcra(BucketTable& table, const BucketKey& key, bool overflow, Nanos interval) noexcept;
void uncharge_window(BucketTable& table, const BucketKey& key, bool overflow, uint64_t window) noexcept;

}  // namespace sluice::limiter
