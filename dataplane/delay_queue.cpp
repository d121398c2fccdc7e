// See delay_queue.h.
#include "delay_queue.h"

#include <algorithm>

namespace sluice::dataplane {

namespace {

// std::*_heap keep the greatest first: the earliest is the "greatest".
bool later(const DelayedHead& a, const DelayedHead& b) noexcept { return a.until > b.until; }

}  // namespace

DelayQueue::DelayQueue(size_t capacity) : capacity_(capacity) { heap_.reserve(capacity); }

bool DelayQueue::push(const DelayedHead& h) noexcept {
  if (full()) return false;
  heap_.push_back(h);
  std::push_heap(heap_.begin(), heap_.end(), later);
  return true;
}

DelayedHead DelayQueue::pop() noexcept {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  const DelayedHead h = heap_.back();
  heap_.pop_back();
  return h;
}

}  // namespace sluice::dataplane
