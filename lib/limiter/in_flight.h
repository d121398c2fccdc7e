// In-flight requests per key (a rule's `concurrency`): one word in the
// shared bucket table counts a key's requests admitted and not yet
// answered, taken at admission and given back when the response ends, the
// connection is reset, expires or is evicted (the data plane's UsageNote).
//
// The word is the count (low 48 bits) under an epoch (high 16 bits): each
// process start takes the next epoch (the flow file's generation), so the
// counts a dead process left (for connections that are not carried
// across, whose releases will never come) read as zero, and the carried
// connections take their slots again under the new epoch. Nothing leaks
// across a crash, and nothing is counted twice.
#pragma once

#include <cstdint>

#include "limiter/bucket_table.h"

namespace sluice::limiter {

[[nodiscard]] inline uint64_t in_flight_count(uint64_t word, uint16_t epoch) noexcept {
  return word != BucketTable::kFrozen && (word >> 48) == epoch ? word & ((uint64_t{1} << 48) - 1) : 0;
}

// Takes one of `limit` slots for `key`; false when all are taken, or when
// the key has no slot of its own (a full table: counting keys together
// would refuse one for another's requests, so none is admitted). With
// `force` (a shadow rule, which forwards anyway) the slot is taken past
// the limit.
[[nodiscard]] bool take_in_flight(BucketTable& table, const BucketKey& key, uint16_t epoch, uint32_t limit,
                                  bool force) noexcept;
// Gives one back (a slot of another epoch is a dead process's: left alone).
void release_in_flight(BucketTable& table, const BucketKey& key, uint16_t epoch) noexcept;
// A carried connection's slot, taken again under this process's epoch,
// whatever the limit (it was admitted before).
void retake_in_flight(BucketTable& table, const BucketKey& key, uint16_t epoch) noexcept;

}  // namespace sluice::limiter
