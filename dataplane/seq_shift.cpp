// See seq_shift.h. Positions compare in TCP's modulo-2^32 order; shifts are
// kept wide and applied modulo 2^32.
#include "dataplane/seq_shift.h"

namespace sluice::dataplane {

namespace {

bool before(uint32_t a, uint32_t b) noexcept { return static_cast<int32_t>(a - b) < 0; }
uint32_t shifted(uint32_t x, int64_t shift) noexcept { return x + static_cast<uint32_t>(shift); }

}  // namespace

void SeqShift::reset(int64_t base) noexcept {
  count_ = 0;
  base_ = base;
}

void SeqShift::renumber_sender(uint32_t delta) noexcept {
  base_ += delta;
  for (unsigned i = 0; i < count_; ++i) {
    edits_[i].at -= delta;
    edits_[i].before += delta;
  }
}

void SeqShift::renumber_receiver(uint32_t delta) noexcept {
  base_ += delta;
  for (unsigned i = 0; i < count_; ++i) edits_[i].before += delta;
}

int64_t SeqShift::total_shift() const noexcept {
  if (count_ == 0) return base_;
  const Edit& e = edits_[count_ - 1];
  return e.before + e.inserted - static_cast<int64_t>(e.removed);
}

bool SeqShift::add(uint32_t at, uint32_t removed, uint32_t inserted) noexcept {
  if (count_ == kMaxEdits) return false;
  if (count_ > 0) {
    const Edit& last = edits_[count_ - 1];
    if (before(at, last.at + last.removed)) return false;
  }
  edits_[count_] = Edit{at, removed, inserted, total_shift()};
  ++count_;
  return true;
}

void SeqShift::set_last_removed(uint32_t removed) noexcept {
  if (count_ != 0) edits_[count_ - 1].removed = removed;
}

uint32_t SeqShift::forward(uint32_t x) const noexcept {
  int64_t shift = base_;
  for (unsigned i = 0; i < count_; ++i) {
    const Edit& e = edits_[i];
    // Before the edit; a segment that starts right at it follows the
    // inserted bytes (they went out with the segment that ends there).
    if (before(x, e.at)) return shifted(x, e.before);
    if (before(x, e.at + e.removed)) return shifted(e.at, e.before + e.inserted);  // a removed byte
    shift = e.before + e.inserted - static_cast<int64_t>(e.removed);
  }
  return shifted(x, shift);
}

uint32_t SeqShift::backward(uint32_t y) const noexcept {
  int64_t shift = base_;
  for (unsigned i = 0; i < count_; ++i) {
    const Edit& e = edits_[i];
    const uint32_t q = shifted(e.at, e.before);  // where the edit begins for the receiver
    if (before(y, q + e.inserted)) {
      // Before the edit's end: the sender's bytes up to the edit at most
      // (removed bytes count as delivered once what replaced them is).
      return before(q, y) ? e.at : shifted(y, -e.before);
    }
    shift = e.before + e.inserted - static_cast<int64_t>(e.removed);
  }
  return shifted(y, -shift);
}

void SeqShift::acknowledged(uint32_t y) noexcept {
  if (count_ == 0) return;
  const Edit& last = edits_[count_ - 1];
  acknowledged(y, last.at + last.removed);
}

void SeqShift::acknowledged(uint32_t y, uint32_t sender_limit) noexcept {
  unsigned done = 0;
  while (done < count_) {
    const Edit& e = edits_[done];
    const uint32_t end = shifted(e.at, e.before + e.inserted);
    if (before(y, end) || before(sender_limit, e.at + e.removed)) break;
    base_ = e.before + e.inserted - static_cast<int64_t>(e.removed);
    ++done;
  }
  if (done == 0) return;
  for (unsigned i = done; i < count_; ++i) edits_[i - done] = edits_[i];
  count_ -= done;
}

}  // namespace sluice::dataplane
