// A fixed single-producer, single-consumer ring of records a worker hands
// to a control thread (Lamport's queue): each side writes only its own
// position, a record is published by the release store of `written_` and
// freed by the release store of `read_`. The worker's push allocates
// nothing, takes no lock and never waits: a full ring drops the record and
// counts it.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace sluice::dataplane {

template <typename Record>
class SpscRing {
 public:
  SpscRing() = default;  // no room: every push is dropped
  // Room for `capacity` records, rounded up to a power of two (0: none).
  explicit SpscRing(size_t capacity) {
    if (capacity == 0) return;
    const size_t rounded = std::bit_ceil(capacity);
    ring_ = std::make_unique<Record[]>(rounded);
    mask_ = rounded - 1;
  }
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // The producer's: the slot of the next record, to fill and then publish(),
  // or nullptr (counted as dropped) when the ring is full.
  [[nodiscard]] Record* slot() noexcept {
    const uint64_t w = written_.load(std::memory_order_relaxed);
    if (!ring_ || w - read_.load(std::memory_order_acquire) > mask_) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return nullptr;
    }
    return &ring_[w & mask_];
  }
  void publish() noexcept { written_.store(written_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // The consumer's: moves up to out.size() records, oldest first, into
  // `out`; how many.
  [[nodiscard]] size_t drain(std::span<Record> out) noexcept {
    const uint64_t r = read_.load(std::memory_order_relaxed);
    const uint64_t available = written_.load(std::memory_order_acquire) - r;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(available, out.size()));
    for (size_t i = 0; i < n; ++i) out[i] = ring_[(r + i) & mask_];
    read_.store(r + n, std::memory_order_release);
    return n;
  }
  // Records dropped because the ring was full.
  [[nodiscard]] uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  [[nodiscard]] size_t capacity() const noexcept { return ring_ ? mask_ + 1 : 0; }

 private:
  size_t mask_ = 0;
  std::unique_ptr<Record[]> ring_;
  // The producer's and the consumer's positions on lines of their own.
  alignas(64) std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> read_{0};
};

}  // namespace sluice::dataplane
