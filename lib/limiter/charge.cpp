// See charge.h.
#include "limiter/charge.h"

namespace sluice::limiter {

GcraCharge charge_gcra(BucketTable& table, const BucketKey& key, Nanos now, const GcraLimit& limit,
                       Nanos max_wait) noexcept {
  BucketTable::Found f = table.find_or_claim(key);
  for (;;) {
    uint64_t tat = f.slot->load(0);
    if (tat == BucketTable::kFrozen) {
      f = {&table.overflow_slot(key.bucket()), true};
      continue;
    }
    const GcraDecision d = gcra_decide(tat, now, limit, max_wait);
    if (!d.admit) return {d, f.overflow};
    if (f.slot->word(0).compare_exchange_weak(tat, d.new_tat, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return {d, f.overflow};
    }
  }
}

WindowCharge charge_window(BucketTable& table, const BucketKey& key, Nanos now, const WindowLimit& limit) noexcept {
  BucketTable::Found f = table.find_or_claim(key);
  for (;;) {
    uint64_t requests = f.slot->load(0);
    const uint64_t tokens = f.slot->load(1);
    if (requests == BucketTable::kFrozen || tokens == BucketTable::kFrozen) {
      f = {&table.overflow_slot(key.bucket()), true};
      continue;
    }
    const WindowDecision d = window_decide(requests, tokens, now, limit);
    if (!d.write) return {d, f.overflow};
    if (f.slot->word(0).compare_exchange_weak(requests, d.new_requests, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
      return {d, f.overflow};
    }
  }
}

void charge_tokens(BucketTable& table, const BucketKey& key, uint64_t tokens, Nanos now,
                   const Calendar& calendar) noexcept {
  BucketTable::Found f = table.find_or_claim(key);
  for (;;) {
    uint64_t word = f.slot->load(1);
    if (word == BucketTable::kFrozen) {
      f = {&table.overflow_slot(key.bucket()), true};
      continue;
    }
    if (f.slot->word(1).compare_exchange_weak(word, window_charge(word, tokens, now, calendar), std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
      return;
    }
  }
}

namespace {

BucketSlot* charged_slot(BucketTable& table, const BucketKey& key, bool overflow) noexcept {
  if (overflow) return &table.overflow_slot(key.bucket());
  BucketSlot* s = table.find(key);
  if (s != nullptr && s->load(0) == BucketTable::kFrozen) return &table.overflow_slot(key.bucket());
  return s;
}

}  // namespace

void uncharge_gcra(BucketTable& table, const BucketKey& key, bool overflow, Nanos interval) noexcept {
  BucketSlot* s = charged_slot(table, key, overflow);
  if (s == nullptr) return;  // reclaimed since: full, nothing to take back
  uint64_t tat = s->load(0);
  while (tat != BucketTable::kFrozen &&
         !s->word(0).compare_exchange_weak(tat, tat > interval ? tat - interval : 0, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
  }
}

void uncharge_window(BucketTable& table, const BucketKey& key, bool overflow, uint64_t window) noexcept {
  BucketSlot* s = charged_slot(table, key, overflow);
  if (s == nullptr) return;
  uint64_t word = s->load(0);
  for (;;) {
    const uint32_t n = count_in(word, window);
    if (word == BucketTable::kFrozen || n == 0) return;  // frozen, or that window is over
    if (s->word(0).compare_exchange_weak(word, pack(window, n - 1), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      return;
    }
  }
}

GcraStanding peek_gcra_standing(BucketTable& table, const BucketKey& key, Nanos now, const GcraLimit& limit) noexcept {
  const BucketSlot* s = table.find(key);
  const uint64_t tat = s ? s->load(0) : 0;
  return gcra_standing(tat == BucketTable::kFrozen ? 0 : tat, now, limit);
}

WindowDecision peek_window(BucketTable& table, const BucketKey& key, Nanos now, const WindowLimit& limit) noexcept {
  const BucketSlot* s = table.find(key);
  const uint64_t requests = s ? s->load(0) : 0;
  const uint64_t tokens = s ? s->load(1) : 0;
  const bool frozen = requests == BucketTable::kFrozen || tokens == BucketTable::kFrozen;
  return window_decide(frozen ? 0 : requests, frozen ? 0 : tokens, now, limit);
}

GcraDecision peek_gcra(BucketTable& table, const BucketKey& key, Nanos now, const GcraLimit& limit) noexcept {
  const BucketSlot* s = table.find(key);
  const uint64_t tat = s ? s->load(0) : 0;
  return gcra_decide(tat == BucketTable::kFrozen ? 0 : tat, now, limit);
}

}  // namespace sluice::limiter
