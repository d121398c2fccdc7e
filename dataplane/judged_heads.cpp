// The judged heads of a flow, kept until the origin acknowledges them; see
// judged_heads.h.
#include "judged_heads.h"

#include <algorithm>
#include <cstring>

#include "tcp_flow.h"

namespace sluice::dataplane {

JudgedHeads::JudgedHeads(size_t capacity) : bytes_(std::make_unique<char[]>(capacity)), capacity_(capacity) {}

void JudgedHeads::reset(uint32_t seq) noexcept {
  used_ = 0;
  front_ = count_ = 0;
  acked_ = let_go_to_ = seq;
}

void JudgedHeads::drop_front() noexcept {
  const Entry& e = at(0);
  const uint32_t end = e.seq + e.len;
  // Let go of before the origin has it: a repeat of it can no longer be checked.
  if (seq_lt(acked_, end) && seq_lt(let_go_to_, end)) let_go_to_ = end;
  front_ = (front_ + 1) % kMaxHeads;
  if (--count_ == 0) used_ = 0;
}

void JudgedHeads::make_room(size_t len) noexcept {
  if (count_ == kMaxHeads) drop_front();
  while (used_ + len > capacity_) {
    if (count_ != 0 && at(0).off != 0) {
      // The recorded heads to the front of the buffer.
      const uint32_t start = at(0).off;
      std::memmove(bytes_.get(), bytes_.get() + start, used_ - start);
      used_ -= start;
      for (unsigned i = 0; i < count_; ++i) at(i).off -= start;
      continue;
    }
    drop_front();
  }
}

void JudgedHeads::record(uint32_t seq, std::span<const char> first, std::span<const char> second) noexcept {
  const size_t len = first.size() + second.size();
  if (len == 0) return;
  if (len > capacity_) {
    const uint32_t end = seq + static_cast<uint32_t>(len);
    if (seq_lt(let_go_to_, end)) let_go_to_ = end;
    return;
  }
  make_room(len);
  std::memcpy(bytes_.get() + used_, first.data(), first.size());
  if (!second.empty()) std::memcpy(bytes_.get() + used_ + first.size(), second.data(), second.size());
  entries_[(front_ + count_) % kMaxHeads] = Entry{seq, static_cast<uint32_t>(len), static_cast<uint32_t>(used_)};
  ++count_;
  used_ += len;
}

void JudgedHeads::acknowledged(uint32_t ack) noexcept {
  if (!seq_lt(acked_, ack)) return;
  acked_ = ack;
  while (count_ != 0 && seq_le(at(0).seq + at(0).len, acked_)) {
    front_ = (front_ + 1) % kMaxHeads;
    if (--count_ == 0) used_ = 0;
  }
}

RepeatCheck JudgedHeads::check(uint32_t seq, std::span<char> payload) noexcept {
  const uint32_t end = seq + static_cast<uint32_t>(payload.size());
  if (seq_lt(acked_, let_go_to_) && seq_lt(seq, let_go_to_) && seq_lt(acked_, end)) return RepeatCheck::kUnverifiable;
  RepeatCheck result = RepeatCheck::kUnchanged;
  for (unsigned i = 0; i < count_; ++i) {
    const Entry& e = at(i);
    const uint32_t e_end = e.seq + e.len;
    const uint32_t from = seq_lt(seq, e.seq) ? e.seq : seq;
    const uint32_t to = seq_lt(end, e_end) ? end : e_end;
    if (!seq_lt(from, to)) continue;
    char* here = payload.data() + (from - seq);
    const char* judged = bytes_.get() + e.off + (from - e.seq);
    const size_t n = to - from;
    if (std::memcmp(here, judged, n) != 0) {
      std::memcpy(here, judged, n);
      result = RepeatCheck::kRewritten;
    }
  }
  return result;
}

}  // namespace sluice::dataplane
