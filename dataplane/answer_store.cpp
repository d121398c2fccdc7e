// An answer never wraps around the end of the ring: the tail is skipped, so
// every answer is one contiguous span.
#include "answer_store.h"

#include <bit>
#include <cstring>

namespace sluice::dataplane {

namespace {

size_t ring_size(size_t capacity) { return std::bit_ceil(capacity < 8192 ? size_t{8192} : capacity); }

}  // namespace

AnswerStore::AnswerStore(size_t capacity)
    : memory_(ring_size(capacity)), bytes_(reinterpret_cast<char*>(memory_.data())), mask_(ring_size(capacity) - 1) {}

uint64_t AnswerStore::put(std::span<const char> answer) noexcept {
  const size_t cap = mask_ + 1;
  const size_t len = answer.size() < cap ? answer.size() : cap;
  const size_t off = written_ & mask_;
  if (off + len > cap) written_ += cap - off;
  const uint64_t pos = written_;
  std::memcpy(bytes_ + (pos & mask_), answer.data(), len);
  written_ += len;
  return pos;
}

std::span<const char> AnswerStore::get(uint64_t pos, size_t len) const noexcept {
  if (written_ - pos > mask_ + 1 || len > mask_ + 1) return {};
  return {bytes_ + (pos & mask_), len};
}

}  // namespace sluice::dataplane
