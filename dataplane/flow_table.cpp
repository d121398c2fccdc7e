// Linear probing with backward-shift deletion: no tombstones, so lookups stay
// short however many flows come and go.
#include "flow_table.h"

#include <bit>

namespace sluice::dataplane {

FlowTable::FlowTable(size_t capacity) {
  const size_t cap = std::bit_ceil(capacity < 16 ? size_t{16} : capacity);
  slots_ = std::make_unique<TcpFlow[]>(cap);
  used_ = std::make_unique<uint8_t[]>(cap);
  mask_ = cap - 1;
  limit_ = cap - cap / 8;
}

TcpFlow* FlowTable::find(const FlowKey& key, uint64_t hash) noexcept {
  for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
    if (!used_[i]) return nullptr;
    if (slots_[i].hash == hash && slots_[i].key == key) return &slots_[i];
  }
}

TcpFlow* FlowTable::insert(const FlowKey& key, uint64_t hash) noexcept {
  if (size_ >= limit_) return nullptr;
  size_t i = hash & mask_;
  while (used_[i]) i = (i + 1) & mask_;
  used_[i] = 1;
  ++size_;
  TcpFlow& f = slots_[i];
  f = TcpFlow{};
  f.key = key;
  f.hash = hash;
  return &f;
}

void FlowTable::erase(TcpFlow* flow) noexcept { erase_slot(static_cast<size_t>(flow - slots_.get())); }

void FlowTable::erase_slot(size_t i) noexcept {
  used_[i] = 0;
  --size_;
  // Shift back every later flow of the run that would no longer be found.
  for (size_t j = (i + 1) & mask_; used_[j]; j = (j + 1) & mask_) {
    const size_t home = slots_[j].hash & mask_;
    // Flow j may move to hole i if its home is not in (i, j] (cyclically).
    const bool home_between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (home_between) continue;
    slots_[i] = slots_[j];
    used_[i] = 1;
    used_[j] = 0;
    i = j;
  }
}

}  // namespace sluice::dataplane
