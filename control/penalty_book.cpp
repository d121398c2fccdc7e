// See penalty_book.h.
#include "control/penalty_book.h"

#include <algorithm>

namespace sluice::control {

void PenaltyBook::add(Entry e) {
  std::lock_guard lock(mutex_);
  if (entries_.size() >= kMaxEntries && !entries_.contains(e.box_key)) make_room(e.since);
  entries_[e.box_key] = std::move(e);
}

void PenaltyBook::make_room(time::Nanos now) {
  std::erase_if(entries_, [now](const auto& kv) { return kv.second.until <= now; });
  while (entries_.size() >= kMaxEntries) {
    auto soonest = std::min_element(entries_.begin(), entries_.end(),
                                    [](const auto& a, const auto& b) { return a.second.until < b.second.until; });
    entries_.erase(soonest);
  }
}

std::vector<PenaltyBook::Entry> PenaltyBook::current(
    time::Nanos now, const std::function<time::Nanos(const limiter::BucketKey&)>& still_boxed, size_t limit) {
  std::vector<Entry> out;
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const time::Nanos until = it->second.until > now ? still_boxed(it->first) : 0;
    if (until <= now) {
      it = entries_.erase(it);
      continue;
    }
    out.push_back(it->second);
    out.back().until = until;  // the table's: a later boxing may have moved it on
    ++it;
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.until > b.until; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

void PenaltyBook::forget(const limiter::BucketKey& box_key) {
  std::lock_guard lock(mutex_);
  entries_.erase(box_key);
}

size_t PenaltyBook::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace sluice::control
