// A map from 128-bit digests to 64-bit values with one writer and lock-free
// readers: the live-run set (TB01, TB12) and the credential-to-user map
// (RF04), which the control thread feeds and every worker reads. Fixed
// capacity; readers never wait and never see a half-written entry.
//
// An erased entry's slot is reused only after a grace period the caller
// reports (begin_grace, wait, end_grace), so a reader that found the entry
// just before it was erased reads its value, never another key's.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "limiter/bucket_key.h"

namespace sluice::limiter {

class DigestMap {
 public:
  // Room for `capacity` entries (the table is sized at least 4/3 of it).
  explicit DigestMap(size_t capacity);

  // Any thread.
  [[nodiscard]] std::optional<uint64_t> find(const Digest& d) const noexcept;

  // The writer (one thread at a time).
  enum class Put : uint8_t { kInserted, kUpdated, kFull };
  Put put(const Digest& d, uint64_t value) noexcept;
  bool erase(const Digest& d) noexcept;
  // Erased slots become reusable after a grace period: call begin_grace(),
  // wait until every reader has passed a quiescent state, then end_grace()
  // with the token.
  [[nodiscard]] uint64_t begin_grace() noexcept { return ++epoch_; }
  void end_grace(uint64_t token) noexcept;

  [[nodiscard]] size_t size() const noexcept { return size_; }
  [[nodiscard]] size_t capacity() const noexcept { return capacity_; }

 private:
  struct Slot {
    std::atomic<uint64_t> lo{0};   // 0: no entry
    std::atomic<uint64_t> hi{0};   // with lo == 0: 0 empty, 1 erased, 2 reusable
    std::atomic<uint64_t> value{0};
  };
  static constexpr unsigned kMaxProbe = 128;

  [[nodiscard]] size_t home(uint64_t lo, uint64_t hi) const noexcept { return (lo ^ (hi >> 7)) & mask_; }

  std::unique_ptr<Slot[]> slots_;
  size_t mask_;
  size_t capacity_;
  size_t size_ = 0;
  uint64_t epoch_ = 0;
  struct Retired {
    size_t slot;
    uint64_t epoch;
  };
  std::vector<Retired> retired_;
};

}  // namespace sluice::limiter
