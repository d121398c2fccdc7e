// See bind_stash.h.
#include "dataplane/bind_stash.h"

#include <cstring>

namespace sluice::dataplane {

BindStash::BindStash(size_t count, uint32_t max_head_bytes, std::span<uint8_t> buffers, std::span<StashSlot> slots)
    : capacity_(buffer_bytes(max_head_bytes)) {
  if (buffers.size() >= count * capacity_ && slots.size() >= count) {
    buffers_ = buffers.data();
    slots_ = slots.first(count);
  } else {
    // Not value-initialised: the pages are committed as stashes use them.
    own_buffers_.reset(new uint8_t[count * capacity_]);
    own_slots_.resize(count);
    buffers_ = own_buffers_.get();
    slots_ = own_slots_;
  }
  free_.reserve(count);
  for (size_t i = count; i-- > 0;) free_.push_back(static_cast<int32_t>(i));
}

int32_t BindStash::acquire() noexcept {
  if (free_.empty()) return -1;
  const int32_t i = free_.back();
  free_.pop_back();
  slots_[static_cast<size_t>(i)] = StashSlot{};
  return i;
}

void BindStash::release(int32_t index) noexcept { free_.push_back(index); }

bool BindStash::append(int32_t index, uint32_t seq, std::span<const uint8_t> bytes) noexcept {
  StashSlot& s = slots_[static_cast<size_t>(index)];
  if (s.len == 0) s.start = seq;
  if (s.fin != 0 || seq != s.start + s.len || bytes.size() > capacity_ - s.len) return false;
  std::memcpy(buffers_ + static_cast<size_t>(index) * capacity_ + s.len, bytes.data(), bytes.size());
  s.len += static_cast<uint32_t>(bytes.size());
  return true;
}

bool BindStash::close(int32_t index, uint32_t seq) noexcept {
  StashSlot& s = slots_[static_cast<size_t>(index)];
  if (s.len == 0 || seq != s.start + s.len) return false;
  s.fin = 1;
  return true;
}

std::span<const uint8_t> BindStash::bytes(int32_t index) const noexcept {
  const StashSlot& s = slots_[static_cast<size_t>(index)];
  return {buffers_ + static_cast<size_t>(index) * capacity_, s.len};
}

}  // namespace sluice::dataplane
