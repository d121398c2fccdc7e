// The judged bytes of a flow, kept until the origin acknowledges them; see
// judged_bytes.h.
#include "judged_bytes.h"

#include <algorithm>
#include <cstring>

#include "tcp_flow.h"

namespace sluice::dataplane {

JudgedBytes::JudgedBytes(size_t capacity)
    : own_(std::make_unique<char[]>(capacity)), bytes_(own_.get()), capacity_(capacity) {}

JudgedBytes::JudgedBytes(std::span<char> memory) noexcept : bytes_(memory.data()), capacity_(memory.size()) {}

void JudgedBytes::reset(uint32_t seq) noexcept {
  used_ = 0;
  front_ = count_ = 0;
  acked_ = let_go_to_ = seq;
}

void JudgedBytes::trim_front(uint32_t n) noexcept {
  Entry& e = at(0);
  e.seq += n;
  e.off += n;
  e.len -= n;
  if (e.len != 0) return;
  front_ = (front_ + 1) % kMaxRanges;
  if (--count_ == 0) used_ = 0;
}

void JudgedBytes::let_go(uint32_t n) noexcept {
  const uint32_t end = at(0).seq + n;
  // Let go of before the origin has it: a repeat of it can no longer be checked.
  if (seq_lt(acked_, end) && seq_lt(let_go_to_, end)) let_go_to_ = end;
  trim_front(n);
}

void JudgedBytes::make_room(size_t len) noexcept {
  if (count_ == kMaxRanges) let_go(at(0).len);
  while (used_ + len > capacity_) {
    if (count_ != 0 && at(0).off != 0) {
      // The recorded ranges to the front of the buffer.
      const uint32_t start = at(0).off;
      std::memmove(bytes_, bytes_ + start, used_ - start);
      used_ -= start;
      for (unsigned i = 0; i < count_; ++i) at(i).off -= start;
      continue;
    }
    // Only as much of the oldest as the new bytes need.
    let_go(static_cast<uint32_t>(std::min<size_t>(used_ + len - capacity_, at(0).len)));
  }
}

void JudgedBytes::record(uint32_t seq, std::span<const char> first, std::span<const char> second) noexcept {
  const size_t len = first.size() + second.size();
  if (len == 0) return;
  if (len > capacity_) {
    const uint32_t end = seq + static_cast<uint32_t>(len);
    if (seq_lt(let_go_to_, end)) let_go_to_ = end;
    return;
  }
  make_room(len);
  std::memcpy(bytes_ + used_, first.data(), first.size());
  if (!second.empty()) std::memcpy(bytes_ + used_ + first.size(), second.data(), second.size());
  if (count_ != 0) {
    Entry& last = at(count_ - 1);
    if (last.seq + last.len == seq && last.off + last.len == used_) {
      // The stream goes on where the last range ended (a body's next
      // piece, the next head): one range.
      last.len += static_cast<uint32_t>(len);
      used_ += len;
      return;
    }
  }
  entries_[(front_ + count_) % kMaxRanges] = Entry{seq, static_cast<uint32_t>(len), static_cast<uint32_t>(used_)};
  ++count_;
  used_ += len;
}

void JudgedBytes::acknowledged(uint32_t ack) noexcept {
  if (!seq_lt(acked_, ack)) return;
  acked_ = ack;
  while (count_ != 0 && seq_lt(at(0).seq, acked_)) {
    const uint32_t have = acked_ - at(0).seq;
    trim_front(have < at(0).len ? have : at(0).len);
  }
}

RepeatCheck JudgedBytes::check(uint32_t seq, std::span<char> payload) noexcept {
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
    const char* judged = bytes_ + e.off + (from - e.seq);
    const size_t n = to - from;
    if (std::memcmp(here, judged, n) != 0) {
      std::memcpy(here, judged, n);
      result = RepeatCheck::kRewritten;
    }
  }
  return result;
}

bool JudgedBytes::carry_on(const JudgedBytes& dead) noexcept {
  if (dead.front_ >= kMaxRanges || dead.count_ > kMaxRanges) return false;
  uint32_t end = dead.let_go_to_;
  for (unsigned i = 0; i < dead.count_; ++i) {
    const Entry& e = dead.entries_[(dead.front_ + i) % kMaxRanges];
    if (seq_lt(end, e.seq + e.len)) end = e.seq + e.len;
  }
  reset(dead.acked_);
  let_go_to_ = seq_lt(dead.acked_, end) ? end : dead.acked_;
  return true;
}

}  // namespace sluice::dataplane
