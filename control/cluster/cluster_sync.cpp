// See cluster_sync.h.
#include "control/cluster/cluster_sync.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <random>

#include "limiter/calendar_window.h"

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

ClusterSync::ClusterSync(limiter::BucketTable& table, ClusterGcra& gcra, ClusterWindow& window, std::string prefix)
    : table_(table), gcra_(gcra), window_(window), prefix_(std::move(prefix)) {
  // Only told apart from the other boxes' entries in a change log: random,
  // so two processes on one host (or a restarted one) never share it.
  std::random_device rd;
  char id[24];
  std::snprintf(id, sizeof id, "%08x%08x", rd(), rd());
  box_id_ = id;
}

std::string ClusterSync::redis_key(const limiter::BucketKey& key) const {
  char group[16], hash[40];
  std::snprintf(group, sizeof group, ":{g%03u}:", static_cast<unsigned>(key.k0 % kGroups));
  std::snprintf(hash, sizeof hash, ":%016" PRIx64 "%016" PRIx64, key.k0, key.k1 & ~uint64_t{0xffff});
  const std::string& name = shared(key.bucket()) ? buckets_[key.bucket()].name : std::string();
  return prefix_ + group + name + hash;
}

std::string ClusterSync::redis_key(const limiter::BucketKey& key, uint32_t minute) const {
  return redis_key(key) + ":" + std::to_string(minute);
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

bool ClusterSync::publish_window(const limiter::BucketKey& key, uint32_t minute, uint64_t requests,
                                 uint64_t tokens) noexcept {
  const limiter::BucketTable::Found f = table_.find_or_claim(key);
  if (f.overflow) return false;
  bool moved = false;
  const uint64_t totals[2] = {std::min<uint64_t>(requests, UINT32_MAX), std::min<uint64_t>(tokens, UINT32_MAX)};
  for (unsigned w = 0; w < 2; ++w) {
    uint64_t cur = f.slot->load(w);
    for (;;) {
      if (cur == limiter::BucketTable::kFrozen) break;
      // A word of a later minute stays: the box has moved on.
      if ((cur >> 32) > minute && limiter::count_in(cur, cur >> 32) != 0) break;
      if (limiter::count_in(cur, minute) >= totals[w]) break;
      if (f.slot->word(w).compare_exchange_weak(cur, limiter::pack(minute, totals[w]), std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
        moved = true;
        break;
      }
    }
  }
  return moved;
}

void ClusterSync::failed(const RedisLink::Result& r, std::span<const KeySpend> spends, const std::vector<size_t>& group,
                         Report& report) {
  if (report.error == RedisError::kNone) {
    report.error = r.error;
    report.detail = r.detail;
  }
  for (size_t i : group) report.unsent.push_back(spends[i]);
}

void ClusterSync::set_buckets(std::vector<SharedBucket> buckets) {
  buckets_ = std::move(buckets);
  rate_kinds_.clear();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    if (!buckets_[k].name.empty() && !buckets_[k].window) rate_kinds_.emplace(buckets_[k].name, static_cast<uint16_t>(k));
  }
}

std::string ClusterSync::log_key(unsigned group) const {
  char tag[24];
  std::snprintf(tag, sizeof tag, ":{g%03u}:log", group);
  return prefix_ + tag;
}

std::string ClusterSync::epoch_key(unsigned group) const {
  char tag[24];
  std::snprintf(tag, sizeof tag, ":{g%03u}:epoch", group);
  return prefix_ + tag;
}

bool ClusterSync::key_of(std::string_view name, unsigned group, limiter::BucketKey& key) const {
  constexpr size_t kHex = 32;
  if (name.size() < kHex + 2 || name[name.size() - kHex - 1] != ':') return false;
  const auto it = rate_kinds_.find(std::string(name.substr(0, name.size() - kHex - 1)));
  if (it == rate_kinds_.end()) return false;  // a bucket this box does not share (another policy)
  const std::string_view hex = name.substr(name.size() - kHex);
  uint64_t k[2] = {0, 0};
  for (unsigned h = 0; h < 2; ++h) {
    const char* b = hex.data() + 16 * h;
    const auto [end, ec] = std::from_chars(b, b + 16, k[h], 16);
    if (ec != std::errc() || end != b + 16) return false;
  }
  if (k[0] % kGroups != group || (k[1] & 0xffff) != 0) return false;
  key = limiter::BucketKey{k[0], k[1] | it->second};
  return true;
}

bool ClusterSync::publish_held(const limiter::BucketKey& key, uint64_t tat) noexcept {
  limiter::BucketSlot* slot = table_.find(key);
  if (slot == nullptr) return false;
  uint64_t cur = slot->load(0);
  while (cur != limiter::BucketTable::kFrozen && cur < tat) {
    if (slot->word(0).compare_exchange_weak(cur, tat, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return true;
    }
  }
  return false;
}

void ClusterSync::sync_rates(std::span<const KeySpend> spends, const std::array<std::vector<size_t>, kGroups>& groups,
                             limiter::Nanos box_now, RedisLink::Clock::time_point now, Report& report) {
  // Groups by the node that holds them (one name for a single Redis), in the
  // order of the groups, so a box's calls go alike from sync to sync.
  std::vector<std::pair<std::string, std::vector<unsigned>>> nodes;
  // Every group read at every kReadEvery-th sync only; in between, only the
  // groups with spends are written to.
  const bool read_all = syncs_++ % kReadEvery == 0;
  for (unsigned g = 0; g < kGroups; ++g) {
    if (groups[g].empty() && !read_all) continue;
    const std::string node = gcra_.node_of(log_key(g));
    auto it = std::find_if(nodes.begin(), nodes.end(), [&node](const auto& n) { return n.first == node; });
    if (it == nodes.end()) it = nodes.insert(nodes.end(), {node, {}});
    it->second.push_back(g);
  }
  // A call per node (more where a node's spends pass kMaxCallSpends), all
  // on their way at once.
  std::vector<std::vector<Part>> calls;
  for (const auto& [node, node_groups] : nodes) {
    std::vector<Part> parts;
    size_t in_call = 0;
    for (unsigned g : node_groups) {
      const std::vector<size_t>& all = groups[g];
      size_t taken = 0;
      do {
        if (in_call >= kMaxCallSpends) {
          calls.push_back(std::move(parts));
          parts.clear();
          in_call = 0;
        }
        const size_t n = std::min(all.size() - taken, kMaxCallSpends - in_call);
        parts.push_back(Part{g, std::vector<size_t>(all.begin() + taken, all.begin() + taken + n), taken == 0 && read_all});
        taken += n;
        in_call += n;
      } while (taken < all.size());
    }
    if (!parts.empty()) calls.push_back(std::move(parts));
  }
  run(spends, calls, box_now, now, report);
  reseed(spends, box_now, now, report);
}

void ClusterSync::call(std::span<const KeySpend> spends, const std::vector<Part>& parts, limiter::Nanos box_now,
                       RedisLink::Clock::time_point now, Report& report) {
  run(spends, {parts}, box_now, now, report);
}

void ClusterSync::run(std::span<const KeySpend> spends, const std::vector<std::vector<Part>>& calls,
                      limiter::Nanos box_now, RedisLink::Clock::time_point now, Report& report) {
  std::vector<std::vector<GroupSync>> batches(calls.size());
  std::vector<std::span<GroupSync>> spans;
  for (size_t c = 0; c < calls.size(); ++c) {
    batches[c] = prepare(spends, calls[c], box_now);
    spans.emplace_back(batches[c]);
  }
  std::vector<int64_t> clocks(calls.size(), 0);
  std::vector<RedisLink::Result> results = gcra_.sync_calls(spans, box_id_, clocks, now);
  for (size_t c = 0; c < calls.size(); ++c) answer(spends, calls[c], batches[c], results[c], clocks[c], box_now, now, report);
}

std::vector<GroupSync> ClusterSync::prepare(std::span<const KeySpend> spends, const std::vector<Part>& parts,
                                            limiter::Nanos box_now) {
  std::vector<GroupSync> batch(parts.size());
  for (size_t p = 0; p < parts.size(); ++p) {
    GroupSync& gs = batch[p];
    gs.log_key = log_key(parts[p].group);
    gs.epoch_key = epoch_key(parts[p].group);
    gs.cursor = parts[p].read ? cursor_[parts[p].group] : "-";
    for (size_t i : parts[p].spends) {
      const KeySpend& s = spends[i];
      // Rounded up to whole microseconds: a box never tells Redis it spent
      // less than it did.
      const uint64_t spent_ns = std::min<uint64_t>(s.spent, kNever);
      gs.spends.push_back(
          ClusterSpend{redis_key(s.key), spent_ns / 1000 + (spent_ns % 1000 != 0), floor_us(s.key, box_now)});
    }
  }
  return batch;
}

void ClusterSync::answer(std::span<const KeySpend> spends, const std::vector<Part>& parts,
                         const std::vector<GroupSync>& batch, const RedisLink::Result& r, int64_t redis_now_us,
                         limiter::Nanos box_now, RedisLink::Clock::time_point now, Report& report) {
  if (r.error == RedisError::kServer && parts.size() > 1) {
    // A node that no longer holds every group the map gave it (a failover,
    // a resharding): each group alone, routed (and redirected) by its log.
    for (const Part& p : parts) call(spends, {p}, box_now, now, report);
    return;
  }
  if (r.error != RedisError::kNone) {
    for (const Part& p : parts) failed(r, spends, p.spends, report);
    return;
  }
  ++report.calls;
  for (size_t p = 0; p < parts.size(); ++p) {
    const unsigned g = parts[p].group;
    const GroupSync& gs = batch[p];
    // A new epoch where the box had seen another: Redis lost the group.
    if (!epoch_[g].empty() && epoch_[g] != gs.epoch) reseed_[g] = true;
    epoch_[g] = gs.epoch;
    if (parts[p].read && gs.next_cursor != "-") cursor_[g] = gs.next_cursor;
    report.sent += parts[p].spends.size();
    for (size_t j = 0; j < parts[p].spends.size(); ++j) {
      const limiter::BucketKey& key = spends[parts[p].spends[j]].key;
      if (gs.ahead_us[j] <= 0) {  // the shared bucket is full: nothing to add
        known_.erase(key);
        continue;
      }
      // A lead past any bucket's (a value gone wrong in Redis) is cut to
      // kMaxLead: the key stays refused, never wrapping round to full.
      const auto lead_us = static_cast<uint64_t>(gs.ahead_us[j]);
      const limiter::Nanos lead = lead_us > kMaxLead / 1000 ? kMaxLead : lead_us * 1000;
      learn(key, box_now + lead, box_now);
      report.published += publish(key, box_now + lead);
    }
    for (const auto& [name, tat_us] : gs.learned) {
      limiter::BucketKey key;
      if (tat_us <= redis_now_us || !key_of(name, g, key)) continue;
      const auto lead_us = static_cast<uint64_t>(tat_us - redis_now_us);
      const limiter::Nanos lead = lead_us > kMaxLead / 1000 ? kMaxLead : lead_us * 1000;
      if (!publish_held(key, box_now + lead)) continue;
      learn(key, box_now + lead, box_now);
      ++report.learned;
      ++report.published;
    }
  }
}

void ClusterSync::reseed(std::span<const KeySpend> spends, limiter::Nanos box_now, RedisLink::Clock::time_point now,
                         Report& report) {
  if (std::find(reseed_.begin(), reseed_.end(), true) == reseed_.end()) return;
  // Keys this sync sent already carried their floor.
  std::unordered_map<limiter::BucketKey, bool, KnownHash> sent;
  for (const KeySpend& s : spends) sent.emplace(s.key, true);
  std::vector<KeySpend> floors;
  std::array<std::vector<size_t>, kGroups> by_group;
  for (const auto& [key, tat] : known_) {
    const unsigned g = key.k0 % kGroups;
    if (!reseed_[g] || tat <= box_now || sent.contains(key) || !shared(key.bucket()) || window(key.bucket())) continue;
    by_group[g].push_back(floors.size());
    floors.push_back(KeySpend{key, 0});
  }
  for (unsigned g = 0; g < kGroups; ++g) {
    if (!reseed_[g]) continue;
    const size_t unsent_before = report.unsent.size();
    for (size_t taken = 0; taken < by_group[g].size(); taken += kMaxCallSpends) {
      const size_t n = std::min(by_group[g].size() - taken, kMaxCallSpends);
      call(floors, {Part{g, std::vector<size_t>(by_group[g].begin() + taken, by_group[g].begin() + taken + n), false}},
           box_now, now, report);
    }
    // Floors are not spends: none is counted again; a group whose floors
    // did not all go is seeded at the next sync.
    const bool done = report.unsent.size() == unsent_before;
    report.unsent.resize(unsent_before);
    reseed_[g] = !done;
    if (done) report.reseeded += by_group[g].size();
  }
}

uint64_t ClusterSync::floor_us(const limiter::BucketKey& key, limiter::Nanos box_now) {
  const auto it = known_.find(key);
  if (it == known_.end()) return 0;
  if (it->second <= box_now) {
    known_.erase(it);
    return 0;
  }
  return (it->second - box_now) / 1000;  // rounded down: never more than was learned
}

void ClusterSync::learn(const limiter::BucketKey& key, limiter::Nanos tat, limiter::Nanos box_now) {
  if (known_.size() >= kMaxKnown && !known_.contains(key)) {
    std::erase_if(known_, [box_now](const auto& kv) { return kv.second <= box_now; });
    if (known_.size() >= kMaxKnown) return;  // all still ahead: this one is not remembered
  }
  known_[key] = tat;
}

void ClusterSync::sync_windows(std::span<const KeySpend> spends, const std::vector<size_t>& group,
                               RedisLink::Clock::time_point now, Report& report) {
  if (group.empty()) return;
  std::vector<WindowSpend> batch;
  for (size_t i : group) {
    const KeySpend& s = spends[i];
    // Kept a minute past its window's end, so that a box whose clock is a
    // little behind still finds the count.
    const uint64_t ttl_ms = (uint64_t{calendar(s.key.bucket()).span_minutes} + 1) * 60'000;
    batch.push_back(WindowSpend{redis_key(s.key, s.minute), s.spent, s.tokens, ttl_ms});
  }
  std::vector<WindowTotal> totals;
  const RedisLink::Result r = window_.apply(batch, totals, now);
  if (r.error != RedisError::kNone) return failed(r, spends, group, report);
  report.sent += group.size();
  for (size_t j = 0; j < group.size(); ++j) {
    const KeySpend& s = spends[group[j]];
    report.published += publish_window(s.key, s.minute, totals[j].requests, totals[j].tokens);
  }
}

ClusterSync::Report ClusterSync::sync(std::span<const KeySpend> spends, limiter::Nanos box_now,
                                      RedisLink::Clock::time_point now) {
  Report report;
  // Per hash tag, rate buckets and windows apart: each batch is one script.
  std::array<std::vector<size_t>, kGroups> rates, windows;
  for (size_t i = 0; i < spends.size(); ++i) {
    const uint16_t kind = spends[i].key.bucket();
    if (!shared(kind)) continue;  // not a cluster bucket (any more)
    (window(kind) ? windows : rates)[spends[i].key.k0 % kGroups].push_back(i);
  }
  if (!rate_kinds_.empty()) sync_rates(spends, rates, box_now, now, report);
  for (unsigned g = 0; g < kGroups; ++g) sync_windows(spends, windows[g], now, report);
  return report;
}

size_t ClusterSync::share_locally(std::span<const KeySpend> spends, uint32_t others, limiter::Nanos box_now) noexcept {
  size_t charged = 0;
  for (const KeySpend& s : spends) {
    if (!shared(s.key.bucket()) || others == 0) continue;
    if (window(s.key.bucket())) {
      charged += share_window_locally(s, others);
      continue;
    }
    if (s.spent == 0) continue;
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

bool ClusterSync::share_window_locally(const KeySpend& s, uint32_t others) noexcept {
  if (s.spent == 0 && s.tokens == 0) return false;
  const limiter::BucketTable::Found f = table_.find_or_claim(s.key);
  if (f.overflow) return false;
  const uint64_t extra[2] = {std::min<uint64_t>(s.spent, UINT32_MAX) * others,
                             std::min<uint64_t>(s.tokens, UINT32_MAX) * others};
  for (unsigned w = 0; w < 2; ++w) {
    if (extra[w] == 0) continue;
    uint64_t cur = f.slot->load(w);
    while (cur != limiter::BucketTable::kFrozen) {
      const uint64_t count = std::min<uint64_t>(limiter::count_in(cur, s.minute) + extra[w], UINT32_MAX);
      if ((cur >> 32) > s.minute && limiter::count_in(cur, cur >> 32) != 0) break;  // that minute is over
      if (f.slot->word(w).compare_exchange_weak(cur, limiter::pack(s.minute, count), std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
        break;
      }
    }
  }
  return true;
}

}  // namespace sluice::control
