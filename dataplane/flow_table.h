// One worker's TCP flows: a fixed-capacity open-addressing table, allocated
// at start and never grown, so a flood of SYNs costs a bounded amount of
// memory (a full table refuses new flows; the worker drops their SYNs). Only
// its worker touches it: no atomics, no locks. Idle flows are swept a few
// slots per loop pass. sluiced gives it memory in the flow file
// (control/flow_file.h), so that its flows outlive the process; a slot is
// marked used only once its flow is whole, so a process killed at any
// instruction leaves every used slot a whole flow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "tcp_flow.h"

namespace sluice::dataplane {

struct FlowTimeouts {
  time::Nanos half_open = 10'000'000'000;   // SYN seen, handshake not finished
  time::Nanos idle = 600'000'000'000;       // established, no segment either way
  time::Nanos closed = 5'000'000'000;       // after FINs, a RST, or an answer
};

// Memory for a table: `slots` and `used` of one size, a power of two
// (FlowTable::capacity_for).
struct FlowSlots {
  std::span<TcpFlow> slots;
  std::span<uint8_t> used;
};

class FlowTable {
 public:
  // The slots a table for `flows` flows has: a power of two, at least 16.
  [[nodiscard]] static size_t capacity_for(size_t flows) noexcept;

  // `capacity` is rounded up to a power of two; at most 7/8 of it is used.
  explicit FlowTable(size_t capacity);
  // A table on memory it does not own (capacity_for sizes it), empty.
  explicit FlowTable(FlowSlots memory) noexcept;

  [[nodiscard]] TcpFlow* find(const FlowKey& key, uint64_t hash) noexcept;
  // A new flow for `key` (which must not be present), or nullptr when full.
  [[nodiscard]] TcpFlow* insert(const FlowKey& key, uint64_t hash) noexcept;
  // Starts loading the slot `hash` begins at, so a burst's lookups overlap
  // their cache misses instead of adding them up.
  void prefetch(uint64_t hash) const noexcept {
    const size_t i = hash & mask_;
    __builtin_prefetch(&used_[i]);
    __builtin_prefetch(&slots_[i]);
  }

  // Removes `flow`. Pointers to other flows may move: do not hold them across.
  void erase(TcpFlow* flow) noexcept;

  // Visits up to `slots` slots from where the last sweep stopped and calls
  // `on_expire(flow)` then erases each flow idle past its state's timeout;
  // `on_live(flow)` sees each other flow (it must not erase it).
  template <typename OnExpire, typename OnLive>
  size_t sweep(time::Nanos now, const FlowTimeouts& t, size_t slots, OnExpire&& on_expire, OnLive&& on_live) noexcept;
  template <typename OnExpire>
  size_t sweep(time::Nanos now, const FlowTimeouts& t, size_t slots, OnExpire&& on_expire) noexcept {
    return sweep(now, t, slots, on_expire, [](TcpFlow&) {});
  }

  // The flow in slot `i` (below capacity()), or nullptr if the slot is free.
  [[nodiscard]] TcpFlow* at_slot(size_t i) noexcept { return used_[i] ? &slots_[i] : nullptr; }
  [[nodiscard]] size_t slot_of(const TcpFlow& flow) const noexcept { return static_cast<size_t>(&flow - slots_); }
  [[nodiscard]] size_t size() const noexcept { return size_; }
  [[nodiscard]] size_t capacity() const noexcept { return mask_ + 1; }
  [[nodiscard]] size_t limit() const noexcept { return limit_; }

  [[nodiscard]] static bool expired(const TcpFlow& f, time::Nanos now, const FlowTimeouts& t) noexcept {
    time::Nanos timeout = t.idle;
    switch (f.state) {
      case FlowState::kSynSent:
      case FlowState::kSynReceived:
        timeout = t.half_open;
        break;
      case FlowState::kAnswered:
      case FlowState::kClosed:
        timeout = t.closed;
        break;
      default:
        break;
    }
    return now - f.last_seen > timeout;
  }

 private:
  void erase_slot(size_t i) noexcept;

  std::unique_ptr<TcpFlow[]> own_slots_;  // none when on memory given
  std::unique_ptr<uint8_t[]> own_used_;
  TcpFlow* slots_ = nullptr;
  uint8_t* used_ = nullptr;
  size_t mask_ = 0;
  size_t limit_ = 0;
  size_t size_ = 0;
  size_t cursor_ = 0;
};

template <typename OnExpire, typename OnLive>
size_t FlowTable::sweep(time::Nanos now, const FlowTimeouts& t, size_t slots, OnExpire&& on_expire,
                        OnLive&& on_live) noexcept {
  size_t removed = 0;
  for (size_t n = 0; n < slots; ++n) {
    const size_t i = cursor_;
    if (used_[i] && expired(slots_[i], now, t)) {
      on_expire(slots_[i]);
      erase_slot(i);
      ++removed;
      continue;  // a later flow may have shifted into slot i: look at it again
    }
    if (used_[i]) on_live(slots_[i]);
    cursor_ = (cursor_ + 1) & mask_;
  }
  return removed;
}

}  // namespace sluice::dataplane
