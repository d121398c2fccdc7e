// The space-saving table of busy_keys.h: the worker's record() and the
// control thread's snapshot().
#include "busy_keys.h"

#include <algorithm>
#include <cstring>

namespace sluice::dataplane {

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

constexpr uint64_t pack_meta(uint16_t rule, const limiter::KeyLabel& label) noexcept {
  return uint64_t{rule} | uint64_t{static_cast<uint8_t>(label.kind)} << 16 | uint64_t{label.len} << 24;
}

constexpr uint16_t rule_of(uint64_t meta) noexcept {
  return static_cast<uint16_t>(meta);
}

}  // namespace

// Built for AVX2 and for the baseline, picked once at load time (an ifunc):
// the searches below are loops over plain words that AVX2 does 4 at a time.
[[gnu::target_clones("avx2", "default")]] void BusyKeys::record(uint16_t rule, const limiter::KeyLabel& label,
                                                                uint64_t weight) noexcept {
  // Its entry, if it has one: every entry compared, no early exit and no
  // branch, so the loop vectorises.
  const uint64_t hash = label.key_hash;
  const uint64_t rule_word = rule;
  uint32_t match = 0;
  for (size_t i = 0; i < kEntries; ++i) {
    const uint32_t same = static_cast<uint32_t>(own_.count[i] != 0) & static_cast<uint32_t>(own_.key_hash[i] == hash) &
                          static_cast<uint32_t>(own_.rule[i] == rule_word);
    match |= same << i;
  }
  static_assert(kEntries <= 32, "the match mask is 32 bits");
  if (match != 0) {
    const size_t i = static_cast<size_t>(__builtin_ctz(match));
    own_.count[i] += weight;
    count_[i].store(own_.count[i], kRelaxed);
    return;
  }
  // Not present: it takes the smallest entry's place and count (the first
  // of the smallest, free ones counting 0). Its true weight could be
  // anything up to that count (the evicted key's weight may have been its
  // own, unseen), so the count stays an upper bound.
  uint64_t smallest_count = UINT64_MAX;
  for (size_t i = 0; i < kEntries; ++i) smallest_count = std::min(smallest_count, own_.count[i]);
  uint32_t smallest_mask = 0;
  for (size_t i = 0; i < kEntries; ++i) smallest_mask |= static_cast<uint32_t>(own_.count[i] == smallest_count) << i;
  const size_t smallest = static_cast<size_t>(__builtin_ctz(smallest_mask));
  own_.key_hash[smallest] = label.key_hash;
  own_.rule[smallest] = rule;
  own_.count[smallest] = smallest_count + weight;
  key_hash_[smallest].store(label.key_hash, kRelaxed);
  meta_[smallest].store(pack_meta(rule, label), kRelaxed);
  error_[smallest].store(smallest_count, kRelaxed);
  for (size_t w = 0; w < kLabelWords; ++w) {
    uint64_t word;
    std::memcpy(&word, label.bytes.data() + w * sizeof word, sizeof word);
    bytes_[smallest][w].store(word, kRelaxed);
  }
  count_[smallest].store(own_.count[smallest], kRelaxed);
}

std::vector<BusyKeys::Entry> BusyKeys::snapshot() const {
  std::vector<Entry> out;
  out.reserve(kEntries);
  for (size_t i = 0; i < kEntries; ++i) {
    Entry e;
    e.count = count_[i].load(kRelaxed);
    if (e.count == 0) continue;
    const uint64_t meta = meta_[i].load(kRelaxed);
    e.rule = rule_of(meta);
    e.error = std::min(error_[i].load(kRelaxed), e.count);  // a torn read must not claim more error than count
    e.label.key_hash = key_hash_[i].load(kRelaxed);
    e.label.kind = static_cast<limiter::KeyLabel::Kind>(static_cast<uint8_t>(meta >> 16));
    e.label.len = static_cast<uint8_t>(std::min<uint64_t>(static_cast<uint8_t>(meta >> 24), e.label.bytes.size()));
    for (size_t w = 0; w < kLabelWords; ++w) {
      const uint64_t word = bytes_[i][w].load(kRelaxed);
      std::memcpy(e.label.bytes.data() + w * sizeof word, &word, sizeof word);
    }
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    if (a.count != b.count) return a.count > b.count;
    if (a.label.key_hash != b.label.key_hash) return a.label.key_hash < b.label.key_hash;  // a stable order
    return a.rule < b.rule;
  });
  return out;
}

}  // namespace sluice::dataplane
