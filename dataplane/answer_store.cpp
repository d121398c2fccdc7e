// An answer never wraps around the end of the ring: the tail is skipped, so
// every answer is one contiguous span.
#include "answer_store.h"

#include <atomic>
#include <bit>
#include <cstring>

namespace sluice::dataplane {

size_t AnswerStore::ring_size(size_t capacity) noexcept {
  return std::bit_ceil(capacity < 8192 ? size_t{8192} : capacity);
}

AnswerStore::AnswerStore(size_t capacity, std::span<std::byte> ring, uint64_t* written)
    : mask_(ring_size(capacity) - 1), written_(written) {
  if (written_ != nullptr && ring.size() == ring_size(capacity)) {
    bytes_ = reinterpret_cast<char*>(ring.data());
    return;
  }
  memory_.emplace(ring_size(capacity));
  bytes_ = reinterpret_cast<char*>(memory_->data());
  written_ = &own_written_;
}

uint64_t AnswerStore::put(std::span<const char> answer) noexcept {
  const size_t cap = mask_ + 1;
  const size_t len = answer.size() < cap ? answer.size() : cap;
  uint64_t pos = *written_;
  if ((pos & mask_) + len > cap) pos += cap - (pos & mask_);
  *written_ = pos + len;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the count in memory before the copy
  std::memcpy(bytes_ + (pos & mask_), answer.data(), len);
  return pos;
}

std::span<const char> AnswerStore::get(uint64_t pos, size_t len) const noexcept {
  if (*written_ - pos > mask_ + 1 || len > mask_ + 1 || (pos & mask_) + len > mask_ + 1) return {};
  return {bytes_ + (pos & mask_), len};
}

}  // namespace sluice::dataplane
