// See cluster_sync.h.
#include "control/cluster_sync.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>

namespace sluice::control {
namespace {

// A spend past this (a saturated sum) counts as this much: a bucket 146
// years deep, still a sum Redis's doubles hold exactly in microseconds.
constexpr uint64_t kNever = uint64_t{1} << 62;
// The furthest a published TAT runs ahead of now (about 73 years): a value
// gone wrong in Redis leaves its key refused, with every sum the charge
// makes (and the Retry-After it answers) still in range.
constexpr limiter::Nanos kMaxLead = limiter::Nanos{1} << 61;

}  // namespace

ClusterSync::ClusterSync(limiter::BucketTable& table, ClusterGcra& gcra, std::string prefix)
    : table_(table), gcra_(gcra), prefix_(std::move(prefix)) {}

std::string ClusterSync::redis_key(const limiter::BucketKey& key) const {
  char group[16], hash[40];
  std::snprintf(group, sizeof group, ":{g%02u}:", static_cast<unsigned>(key.k0 % kGroups));
  std::snprintf(hash, sizeof hash, ":%016" PRIx64 "%016" PRIx64, key.k0, key.k1 & ~uint64_t{0xffff});
  const std::string& name = shared(key.bucket()) ? names_[key.bucket()] : std::string();
  return prefix_ + group + name + hash;
}

bool ClusterSync::publish(const limiter::BucketKey& key, uint64_t tat) noexcept {
  const limiter::BucketTable::Found f = table_.find_or_claim(key);
  // A key without a slot of its own (its region full or being reclaimed) is
  // charged to the shared overflow bucket, which is stricter already.
  if (f.overflow) return false;
  uint64_t cur = f.slot->load(0);
  while (cur != limiter::BucketTable::kFrozen && cur < tat) {
    if (f.slot->word(0).compare_exchange_weak(cur, tat, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

ClusterSync::Report ClusterSync::sync(std::span<const KeySpend> spends, limiter::Nanos box_now,
                                      RedisLink::Clock::time_point now) {
  Report report;
  std::array<std::vector<size_t>, kGroups> groups;
  for (size_t i = 0; i < spends.size(); ++i) {
    if (!shared(spends[i].key.bucket())) continue;  // not a cluster bucket (any more)
    groups[spends[i].key.k0 % kGroups].push_back(i);
  }
  std::vector<ClusterSpend> batch;
  std::vector<int64_t> ahead_us;
  for (const std::vector<size_t>& group : groups) {
    if (group.empty()) continue;
    batch.clear();
    for (size_t i : group) {
      const KeySpend& s = spends[i];
      // Rounded up to whole microseconds: a box never tells Redis it spent
      // less than it did.
      const uint64_t spent_ns = std::min<uint64_t>(s.spent, kNever);
      batch.push_back(ClusterSpend{redis_key(s.key), spent_ns / 1000 + (spent_ns % 1000 != 0)});
    }
    const RedisLink::Result r = gcra_.apply(batch, ahead_us, now);
    if (r.error != RedisError::kNone) {
      if (report.error == RedisError::kNone) {
        report.error = r.error;
        report.detail = r.detail;
      }
      for (size_t i : group) report.unsent.push_back(spends[i]);
      continue;
    }
    report.sent += group.size();
    for (size_t j = 0; j < group.size(); ++j) {
      if (ahead_us[j] <= 0) continue;  // the shared bucket is full: nothing to add
      // A lead past any bucket's (a value gone wrong in Redis) is cut to
      // kMaxLead: the key stays refused, never wrapping round to full.
      const auto lead_us = static_cast<uint64_t>(ahead_us[j]);
      const limiter::Nanos lead = lead_us > kMaxLead / 1000 ? kMaxLead : lead_us * 1000;
      report.published += publish(spends[group[j]].key, box_now + lead);
    }
  }
  return report;
}

size_t ClusterSync::share_locally(std::span<const KeySpend> spends, uint32_t others, limiter::Nanos box_now) noexcept {
  size_t charged = 0;
  for (const KeySpend& s : spends) {
    if (!shared(s.key.bucket()) || s.spent == 0 || others == 0) continue;
    uint64_t extra = 0;
    if (__builtin_mul_overflow(std::min<uint64_t>(s.spent, kNever), others, &extra)) extra = kNever;
    const limiter::BucketTable::Found f = table_.find_or_claim(s.key);
    if (f.overflow) continue;
    // As a charge would: from now if the bucket had filled meanwhile, and
    // never past kMaxLead ahead of now.
    uint64_t cur = f.slot->load(0);
    while (cur != limiter::BucketTable::kFrozen) {
      const uint64_t base = std::max<uint64_t>(cur, box_now);
      const uint64_t next = std::min<uint64_t>(base + std::min<uint64_t>(extra, kMaxLead), box_now + kMaxLead);
      if (f.slot->word(0).compare_exchange_weak(cur, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        ++charged;
        break;
      }
    }
  }
  return charged;
}

}  // namespace sluice::control
