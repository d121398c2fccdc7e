// See in_flight.h.
#include "limiter/in_flight.h"

namespace sluice::limiter {

namespace {

uint64_t with_count(uint16_t epoch, uint64_t count) noexcept { return (uint64_t{epoch} << 48) | count; }

bool add_one(BucketTable& table, const BucketKey& key, uint16_t epoch, uint64_t limit) noexcept {
  BucketTable::Found f = table.find_or_claim(key);
  if (f.overflow) return false;
  for (;;) {
    uint64_t w = f.slot->load(0);
    if (w == BucketTable::kFrozen) return false;  // being reclaimed: no slot of its own
    const uint64_t n = in_flight_count(w, epoch);
    if (n >= limit) return false;
    if (f.slot->word(0).compare_exchange_weak(w, with_count(epoch, n + 1), std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
      return true;
    }
  }
}

}  // namespace

bool take_in_flight(BucketTable& table, const BucketKey& key, uint16_t epoch, uint32_t limit, bool force) noexcept {
  return add_one(table, key, epoch, force ? (uint64_t{1} << 48) - 1 : limit);
}

void retake_in_flight(BucketTable& table, const BucketKey& key, uint16_t epoch) noexcept {
  (void)add_one(table, key, epoch, (uint64_t{1} << 48) - 1);
}

void release_in_flight(BucketTable& table, const BucketKey& key, uint16_t epoch) noexcept {
  BucketSlot* s = table.find(key);
  if (s == nullptr) return;
  uint64_t w = s->load(0);
  for (;;) {
    const uint64_t n = in_flight_count(w, epoch);
    if (n == 0) return;
    if (s->word(0).compare_exchange_weak(w, with_count(epoch, n - 1), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      return;
    }
  }
}

}  // namespace sluice::limiter
