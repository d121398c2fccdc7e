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

namespace {

// Which of the worker's searched entries are (rule, hash) in use, as a mask,
// and the smallest count: every entry compared, no early exit and no branch,
// so the loops vectorise. Built twice below, for AVX2 and for the baseline.
struct Search {
  uint32_t match;     // the entries of (rule, hash)
  uint32_t smallest;  // the entries with the smallest count (free ones count 0)
  uint64_t smallest_count;
};

template <size_t N>
[[gnu::always_inline]] inline Search search_entries(const std::array<uint64_t, N>& hashes,
                                                    const std::array<uint64_t, N>& counts,
                                                    const std::array<uint64_t, N>& rules, uint64_t hash,
                                                    uint64_t rule) noexcept {
  static_assert(N <= 32, "the match mask is 32 bits");
  uint32_t match = 0;
  uint64_t smallest = UINT64_MAX;
  for (size_t i = 0; i < N; ++i) {
    const uint32_t same = static_cast<uint32_t>(counts[i] != 0) & static_cast<uint32_t>(hashes[i] == hash) &
                          static_cast<uint32_t>(rules[i] == rule);
    match |= same << i;
    smallest = std::min(smallest, counts[i]);
  }
  uint32_t smallest_mask = 0;
  for (size_t i = 0; i < N; ++i) smallest_mask |= static_cast<uint32_t>(counts[i] == smallest) << i;
  return {match, smallest_mask, smallest};
}

using Entries = std::array<uint64_t, BusyKeys::kEntries>;
using SearchFn = Search (*)(const Entries&, const Entries&, const Entries&, uint64_t, uint64_t) noexcept;

[[gnu::target("avx2")]] Search search_avx2(const Entries& h, const Entries& c, const Entries& r, uint64_t hash,
                                           uint64_t rule) noexcept {
  return search_entries(h, c, r, hash, rule);
}
Search search_baseline(const Entries& h, const Entries& c, const Entries& r, uint64_t hash, uint64_t rule) noexcept {
  return search_entries(h, c, r, hash, rule);
}

}  // namespace

void BusyKeys::record(uint16_t rule, const limiter::KeyLabel& label, uint64_t weight) noexcept {
  // Chosen once per process.
  static const SearchFn search = __builtin_cpu_supports("avx2") ? search_avx2 : search_baseline;
  const Search found = search(own_.key_hash, own_.count, own_.rule, label.key_hash, rule);
  const uint32_t match = found.match;
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
  const uint64_t smallest_count = found.smallest_count;
  const size_t smallest = static_cast<size_t>(__builtin_ctz(found.smallest));
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
