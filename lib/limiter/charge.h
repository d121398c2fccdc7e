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

[[nodiscard]] GcraCharge charge_gcra(BucketTable& table, const BucketKey& key, Nanos now,
                                     const GcraLimit& limit) noexcept;

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

}  // namespace sluice::limiter
