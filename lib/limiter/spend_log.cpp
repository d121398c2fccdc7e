// See spend_log.h.
#include "limiter/spend_log.h"

#include <bit>
#include <stdexcept>

namespace sluice::limiter {

SpendLog::SpendLog(size_t keys_per_half) {
  if (keys_per_half < 16 || !std::has_single_bit(keys_per_half)) {
    throw std::invalid_argument("a spend log holds a power of two keys per half, at least 16");
  }
  mask_ = keys_per_half - 1;
  limit_ = keys_per_half / 4 * 3;
  for (Half& h : halves_) h.slots = std::make_unique<KeySpend[]>(keys_per_half);
}

KeySpend* SpendLog::entry(const BucketKey& key, uint64_t spent) noexcept {
  Half& h = halves_[active_.load(std::memory_order_acquire)];
  // k1's bits above the bucket index are hash bits (bucket_key.h).
  for (size_t i = (key.k1 >> 16) & mask_;; i = (i + 1) & mask_) {
    KeySpend& s = h.slots[i];
    if (s.key == key) return &s;
    if (s.key.k0 != 0) continue;  // another key's: probe on
    if (h.used == limit_) {
      // Relaxed: counters, read by the metrics; the worker is the only writer.
      lost_.store(lost_.load(std::memory_order_relaxed) + spent, std::memory_order_relaxed);
      lost_records_.store(lost_records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return nullptr;
    }
    s = KeySpend{key, 0, 0, 0};
    ++h.used;
    return &s;
  }
}

namespace {
uint64_t saturating_add(uint64_t a, uint64_t b) noexcept { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
}  // namespace

void SpendLog::record(const BucketKey& key, Nanos spent) noexcept {
  if (KeySpend* s = entry(key, spent)) s->spent = saturating_add(s->spent, spent);
}

void SpendLog::record_window(const BucketKey& key, uint32_t minute, uint64_t requests, uint64_t tokens) noexcept {
  KeySpend* s = entry(key, requests);
  if (s == nullptr) return;
  if (s->minute != minute) {
    if (s->minute > minute && (s->spent != 0 || s->tokens != 0)) return;  // a late charge for a minute that is over
    *s = KeySpend{key, 0, 0, minute};
  }
  s->spent = saturating_add(s->spent, requests);
  s->tokens = saturating_add(s->tokens, tokens);
}

unsigned SpendLog::flip() noexcept {
  const unsigned was = active_.load(std::memory_order_relaxed);
  active_.store(was ^ 1u, std::memory_order_release);
  return was;
}

void SpendLog::drain(unsigned half, std::vector<KeySpend>& out) {
  Half& h = halves_[half & 1u];
  if (h.used == 0) return;
  for (size_t i = 0; i <= mask_; ++i) {
    KeySpend& s = h.slots[i];
    if (s.key.k0 == 0) continue;
    out.push_back(s);
    s = KeySpend{};
  }
  h.used = 0;
}

}  // namespace sluice::limiter
