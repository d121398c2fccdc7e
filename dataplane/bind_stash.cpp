// See bind_stash.h.
#include "dataplane/bind_stash.h"

#include <cstring>

namespace sluice::dataplane {

BindStash::BindStash(size_t count, uint32_t max_head_bytes)
    : capacity_(size_t{max_head_bytes} + kWindow),
      // Not value-initialised: the pages are committed as stashes use them.
      buffers_(new uint8_t[count * capacity_]),
      slots_(count) {
  free_.reserve(count);
  for (size_t i = count; i-- > 0;) free_.push_back(static_cast<int32_t>(i));
}

int32_t BindStash::acquire() noexcept {
  if (free_.empty()) return -1;
  const int32_t i = free_.back();
  free_.pop_back();
  slots_[static_cast<size_t>(i)] = Slot{};
  return i;
}

void BindStash::release(int32_t index) noexcept { free_.push_back(index); }

bool BindStash::append(int32_t index, uint32_t seq, std::span<const uint8_t> bytes) noexcept {
  Slot& s = slots_[static_cast<size_t>(index)];
  if (s.len == 0) s.start = seq;
  if (s.fin || seq != s.start + s.len || bytes.size() > capacity_ - s.len) return false;
  std::memcpy(buffers_.get() + static_cast<size_t>(index) * capacity_ + s.len, bytes.data(), bytes.size());
  s.len += static_cast<uint32_t>(bytes.size());
  return true;
}

bool BindStash::close(int32_t index, uint32_t seq) noexcept {
  Slot& s = slots_[static_cast<size_t>(index)];
  if (s.len == 0 || seq != s.start + s.len) return false;
  s.fin = true;
  return true;
}

std::span<const uint8_t> BindStash::bytes(int32_t index) const noexcept {
  const Slot& s = slots_[static_cast<size_t>(index)];
  return {buffers_.get() + static_cast<size_t>(index) * capacity_, s.len};
}

}  // namespace sluice::dataplane
