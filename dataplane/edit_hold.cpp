// See edit_hold.h.
#include "dataplane/edit_hold.h"

#include <algorithm>

namespace sluice::dataplane {

bool EditHold::fits(const SeqShift& shift,
                    const std::array<ParseContext::EditBytes, SeqShift::kMaxEdits>& bytes) noexcept {
  if (shift.pending() > kMaxEdits) return false;
  for (unsigned i = 0; i < shift.pending(); ++i) {
    if (shift.edit(i).removed != 0 || bytes[i].answer_len != 0) return false;
  }
  return true;
}

void EditHold::keep(const SeqShift& shift,
                    const std::array<ParseContext::EditBytes, SeqShift::kMaxEdits>& from) noexcept {
  base = shift.base();
  count = static_cast<uint8_t>(shift.pending());
  for (unsigned i = 0; i < count; ++i) {
    edits[i] = shift.edit(i);
    bytes[i].fields.assign(from[i].fields.view());
    bytes[i].answer_len = 0;
  }
}

void EditHold::restore(SeqShift& shift, std::array<ParseContext::EditBytes, SeqShift::kMaxEdits>& to) const noexcept {
  // Added again in order from the same base, each edit gets the shift it had.
  shift.reset(base);
  for (unsigned i = 0; i < count; ++i) {
    (void)shift.add(edits[i].at, edits[i].removed, edits[i].inserted);  // fewer than kMaxEdits, in order
    to[i].fields.assign(bytes[i].fields.view());
    to[i].answer_len = 0;
  }
}

bool EditHold::acknowledged_by(uint32_t client_ack) const noexcept {
  if (count == 0) return true;
  const SeqShift::Edit& last = edits[count - 1u];
  const uint32_t end = last.at + static_cast<uint32_t>(last.before) + last.inserted;  // the client's numbers
  return static_cast<int32_t>(client_ack - end) >= 0;
}

bool EditHold::valid() const noexcept {
  if (count > kMaxEdits) return false;
  for (unsigned i = 0; i < count; ++i) {
    if (bytes[i].answer_len != 0) return false;  // a length byte cannot name more than its buffer
  }
  return true;
}

HoldPool::HoldPool(size_t count, std::span<EditHold> memory)
    : own_(memory.size() < count ? count : 0), holds_(memory.size() < count ? std::span<EditHold>(own_) : memory.first(count)) {
  if (own_.empty()) std::fill(holds_.begin(), holds_.end(), EditHold{});  // what the last process left there
  free_.reserve(count);
  for (size_t i = 0; i < count; ++i) free_.push_back(static_cast<int32_t>(count - 1 - i));
}

int32_t HoldPool::acquire() noexcept {
  if (free_.empty()) return -1;
  const int32_t i = free_.back();
  free_.pop_back();
  return i;
}

void HoldPool::release(int32_t index) noexcept { free_.push_back(index); }

}  // namespace sluice::dataplane
