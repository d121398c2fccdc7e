// See credential_slots.h.
#include "limiter/credential_slots.h"

namespace sluice::limiter {

namespace {

constexpr uint64_t slot_word(uint32_t tag, uint32_t second) noexcept { return uint64_t{tag} << 32 | second; }
constexpr uint32_t tag_of(uint64_t w) noexcept { return static_cast<uint32_t>(w >> 32); }
constexpr uint32_t second_of(uint64_t w) noexcept { return static_cast<uint32_t>(w); }

bool quiet_at(uint64_t w, Nanos quiet, uint32_t now_s) noexcept {
  const uint32_t quiet_s = static_cast<uint32_t>((quiet + time::kNanosPerSecond - 1) / time::kNanosPerSecond);
  return tag_of(w) == 0 || now_s - second_of(w) >= quiet_s;
}

}  // namespace

bool take_credential_slot(BucketTable& records, const BucketKey& address, uint32_t tag, unsigned slots, Nanos quiet,
                          Nanos now) noexcept {
  const BucketTable::Found f = records.find_or_claim(address);
  if (f.overflow) return false;  // no record to be had: the stricter answer
  BucketSlot& r = *f.slot;
  const auto now_s = static_cast<uint32_t>(now / time::kNanosPerSecond);
  // Already holding a slot: refresh it.
  for (unsigned i = 0; i < slots; ++i) {
    uint64_t w = r.load(i);
    while (w != BucketTable::kFrozen && tag_of(w) == tag) {
      if (second_of(w) >= now_s) return true;
      if (r.word(i).compare_exchange_weak(w, slot_word(tag, now_s), std::memory_order_acq_rel)) return true;
    }
    if (w == BucketTable::kFrozen) return false;  // the record is being retired
  }
  // Take an empty or quiet slot. The swap checks the slot is still what we
  // judged quiet, so an active credential's slot is never taken.
  for (unsigned i = 0; i < slots; ++i) {
    uint64_t w = r.load(i);
    if (w == BucketTable::kFrozen) return false;
    if (quiet_at(w, quiet, now_s) &&
        r.word(i).compare_exchange_strong(w, slot_word(tag, now_s), std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

bool credential_record_idle(const uint64_t* words, unsigned slots, Nanos quiet, Nanos now) noexcept {
  const auto now_s = static_cast<uint32_t>(now / time::kNanosPerSecond);
  for (unsigned i = 0; i < slots; ++i) {
    if (!quiet_at(words[i], quiet, now_s)) return false;
  }
  return true;
}

}  // namespace sluice::limiter
