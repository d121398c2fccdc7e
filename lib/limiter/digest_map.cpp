// See digest_map.h.
#include "limiter/digest_map.h"

#include <bit>

namespace sluice::limiter {

namespace {

constexpr uint64_t kErased = 1;
constexpr uint64_t kReusable = 2;

// Stored keys never have lo == 0.
uint64_t stored_lo(const Digest& d) noexcept { return d.lo | (uint64_t{1} << 63); }

}  // namespace

DigestMap::DigestMap(size_t capacity) : capacity_(capacity) {
  const size_t slots = std::bit_ceil(std::max<size_t>(16, capacity + capacity / 3 + 1));
  slots_ = std::make_unique<Slot[]>(slots);
  mask_ = slots - 1;
}

std::optional<uint64_t> DigestMap::find(const Digest& d) const noexcept {
  const uint64_t lo = stored_lo(d);
  size_t i = home(lo, d.hi);
  for (unsigned probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    const uint64_t k = s.lo.load(std::memory_order_acquire);
    if (k == lo) {
      if (s.hi.load(std::memory_order_acquire) == d.hi) return s.value.load(std::memory_order_acquire);
      continue;
    }
    if (k == 0 && s.hi.load(std::memory_order_acquire) == 0) return std::nullopt;  // empty: end of the sequence
  }
  return std::nullopt;
}

DigestMap::Put DigestMap::put(const Digest& d, uint64_t value) noexcept {
  const uint64_t lo = stored_lo(d);
  size_t i = home(lo, d.hi);
  Slot* free_slot = nullptr;
  for (unsigned probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    const uint64_t k = s.lo.load(std::memory_order_relaxed);
    const uint64_t h = s.hi.load(std::memory_order_relaxed);
    if (k == lo && h == d.hi) {
      s.value.store(value, std::memory_order_release);
      return Put::kUpdated;
    }
    if (k == 0 && h != kErased && free_slot == nullptr) free_slot = &s;
    if (k == 0 && h == 0) break;
  }
  if (free_slot == nullptr || size_ >= capacity_) return Put::kFull;
  // Value and high half first; the low half, stored last with release,
  // publishes the entry.
  free_slot->value.store(value, std::memory_order_relaxed);
  free_slot->hi.store(d.hi, std::memory_order_relaxed);
  free_slot->lo.store(lo, std::memory_order_release);
  ++size_;
  return Put::kInserted;
}

bool DigestMap::erase(const Digest& d) noexcept {
  const uint64_t lo = stored_lo(d);
  size_t i = home(lo, d.hi);
  for (unsigned probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    const uint64_t k = s.lo.load(std::memory_order_relaxed);
    const uint64_t h = s.hi.load(std::memory_order_relaxed);
    if (k == lo && h == d.hi) {
      s.lo.store(0, std::memory_order_release);
      s.hi.store(kErased, std::memory_order_release);
      retired_.push_back({i, epoch_});
      --size_;
      return true;
    }
    if (k == 0 && h == 0) return false;
  }
  return false;
}

void DigestMap::end_grace(uint64_t token) noexcept {
  size_t kept = 0;
  for (const Retired& r : retired_) {
    if (r.epoch < token) {
      slots_[r.slot].hi.store(kReusable, std::memory_order_release);
    } else {
      retired_[kept++] = r;
    }
  }
  retired_.resize(kept);
}

}  // namespace sluice::limiter
