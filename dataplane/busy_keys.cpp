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

void BusyKeys::record(uint16_t rule, const limiter::KeyLabel& label, uint64_t weight) noexcept {
  size_t smallest = 0;
  uint64_t smallest_count = UINT64_MAX;
  for (size_t i = 0; i < kEntries; ++i) {
    const uint64_t c = count_[i].load(kRelaxed);
    if (c != 0 && key_hash_[i].load(kRelaxed) == label.key_hash && rule_of(meta_[i].load(kRelaxed)) == rule) {
      count_[i].store(c + weight, kRelaxed);
      return;
    }
    if (c < smallest_count) {
      smallest = i;
      smallest_count = c;
    }
  }
  // Not present: it takes the smallest entry's place and count. Its true
  // weight could be anything up to that count (the evicted key's weight may
  // have been its own, unseen), so the count stays an upper bound.
  key_hash_[smallest].store(label.key_hash, kRelaxed);
  meta_[smallest].store(pack_meta(rule, label), kRelaxed);
  error_[smallest].store(smallest_count, kRelaxed);
  for (size_t w = 0; w < kLabelWords; ++w) {
    uint64_t word;
    std::memcpy(&word, label.bytes.data() + w * sizeof word, sizeof word);
    bytes_[smallest][w].store(word, kRelaxed);
  }
  count_[smallest].store(smallest_count + weight, kRelaxed);
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
