// TB07, the credential-slot ceiling: one client address holds budgets of its
// own for at most N credentials at once. Each address has a record of N
// slots, each one 64-bit word: a 32-bit tag of the credential's digest and the
// second it was last used. A credential already in a slot keeps it and
// refreshes it; a new one takes a slot that is empty or has been quiet for the
// quiet time; past that, the request is counted against the address's bare
// budget instead. Records live in a bucket table of their own (N words per
// slot), so they are claimed, found and reclaimed the same lock-free way.
#pragma once

#include <cstdint>

#include "limiter/bucket_table.h"
#include "time/clock.h"

namespace sluice::limiter {

using time::Nanos;

// True if the credential (tag, never 0) holds or takes a slot of the address
// whose record key is `address`. `slots` is N (the table's words per slot
// must be at least N).
[[nodiscard]] bool take_credential_slot(BucketTable& records, const BucketKey& address, uint32_t tag,
                                        unsigned slots, Nanos quiet, Nanos now) noexcept;

// True if every slot of a record is empty or quiet: dropping it changes no
// answer (the idle predicate the control thread reclaims records with).
[[nodiscard]] bool credential_record_idle(const uint64_t* words, unsigned slots, Nanos quiet, Nanos now) noexcept;

[[nodiscard]] inline uint32_t credential_tag(uint64_t digest_bits) noexcept {
  const auto t = static_cast<uint32_t>(digest_bits ^ (digest_bits >> 32));
  return t == 0 ? 1 : t;
}

}  // namespace sluice::limiter
