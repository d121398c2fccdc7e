// Linear probing with backward-shift deletion: no tombstones, so lookups stay
// short however many flows come and go.
#include "flow_table.h"

#include <atomic>
#include <bit>
#include <cstring>

namespace sluice::dataplane {

namespace {

// Orders the stores around it as written. Only a process killed between
// them could see another order (the stores are this thread's own), and a
// killed process leaves its flow file as its stores left it: a slot must
// be whole before it is marked used.
inline void in_order() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

}  // namespace

size_t FlowTable::capacity_for(size_t flows) noexcept { return std::bit_ceil(flows < 16 ? size_t{16} : flows); }

FlowTable::FlowTable(size_t capacity) {
  const size_t cap = capacity_for(capacity);
  own_slots_ = std::make_unique<TcpFlow[]>(cap);
  own_used_ = std::make_unique<uint8_t[]>(cap);
  slots_ = own_slots_.get();
  used_ = own_used_.get();
  mask_ = cap - 1;
  limit_ = cap - cap / 8;
}

FlowTable::FlowTable(FlowSlots memory) noexcept : slots_(memory.slots.data()), used_(memory.used.data()) {
  const size_t cap = memory.slots.size();
  std::memset(used_, 0, cap);
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
  TcpFlow& f = slots_[i];
  f = TcpFlow{};
  f.key = key;
  f.hash = hash;
  in_order();
  used_[i] = 1;
  ++size_;
  return &f;
}

void FlowTable::erase(TcpFlow* flow) noexcept { erase_slot(static_cast<size_t>(flow - slots_)); }

void FlowTable::erase_slot(size_t i) noexcept {
  used_[i] = 0;
  --size_;
  // Shift back every later flow of the run that would no longer be found.
  for (size_t j = (i + 1) & mask_; used_[j]; j = (j + 1) & mask_) {
    const size_t home = slots_[j].hash & mask_;
    // Flow j may move to hole i if its home is not in (i, j] (cyclically).
    const bool home_between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (home_between) continue;
    // Copied whole before it counts (a crash between leaves the flow in
    // both slots, whole in each: the flow file's reader keeps one).
    slots_[i] = slots_[j];
    in_order();
    used_[i] = 1;
    in_order();
    used_[j] = 0;
    i = j;
  }
}

}  // namespace sluice::dataplane
