// See time_merge.h.
#include "replay/time_merge.h"

#include <algorithm>

namespace sluice::replay {

namespace {
bool before(const RequestRecord& a, const RequestRecord& b) noexcept {
  return a.at != b.at ? a.at < b.at : a.order < b.order;
}
}  // namespace

TimeMerge::TimeMerge(std::vector<MergeInput> inputs, MergeWindow window) : window_(window) {
  inputs_.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs_[i].spec = std::move(inputs[i]);
    unopened_.push_back(i);
  }
  std::stable_sort(unopened_.begin(), unopened_.end(),
                   [&](size_t a, size_t b) { return inputs_[a].spec.starts > inputs_[b].spec.starts; });
}

void TimeMerge::activate(size_t i) {
  Input& in = inputs_[i];
  in.source = in.spec.opened ? std::move(in.spec.opened) : in.spec.open();
  if (!in.source) {
    in.ended = true;
    return;
  }
  if (ready(in)) heads_.push({in.held.front().at, in.held.front().order, i});
}

void TimeMerge::open_due(time::Nanos now) {
  while (!unopened_.empty() && inputs_[unopened_.back()].spec.starts <= now) {
    const size_t i = unopened_.back();
    unopened_.pop_back();
    activate(i);
  }
}

void TimeMerge::take_in(Input& in, RequestRecord&& r) {
  if (in.any_let_go && r.at < in.let_go) {
    // Its place is past: it goes next, at its own time, and is counted.
    ++late_.records;
    late_.most = std::max(late_.most, in.let_go - r.at);
    in.held.push_front(std::move(r));
    return;
  }
  in.newest = std::max(in.newest, r.at);
  // Mostly in order: the place is found from the back.
  auto it = in.held.end();
  while (it != in.held.begin() && before(r, *std::prev(it))) --it;
  in.held.insert(it, std::move(r));
}

bool TimeMerge::ready(Input& in) {
  for (;;) {
    if (!in.held.empty() && (in.ended || in.held.front().at + in.spec.look_back <= in.newest)) return true;
    if (in.at == in.batch.size()) {
      if (in.ended) return false;
      in.batch.clear();
      in.at = 0;
      if (!in.source->next(in.batch)) {
        in.ended = true;
        in.source.reset();  // its reader's buffers go now, not at the merge's end
        continue;
      }
    }
    // A batch at a time keeps the held deque's insertions cheap and the
    // batch's room reused.
    while (in.at < in.batch.size()) take_in(in, std::move(in.batch[in.at++]));
    most_held_ = std::max(most_held_, in.held.size());
  }
}

bool TimeMerge::next(RequestRecord& out) {
  for (;;) {
    if (heads_.empty()) {
      // Every open input is done: the next one opens (only it: the others
      // may start days later).
      if (unopened_.empty()) return false;
      const size_t i = unopened_.back();
      unopened_.pop_back();
      activate(i);
      continue;
    }
    // An input due before the earliest head opens first: it may hold an
    // earlier record.
    open_due(heads_.top().at);
    const Head h = heads_.top();
    heads_.pop();
    Input& in = inputs_[h.input];
    out = std::move(in.held.front());
    in.held.pop_front();
    in.let_go = std::max(in.let_go, out.at);
    in.any_let_go = true;
    if (ready(in)) heads_.push({in.held.front().at, in.held.front().order, h.input});
    if ((window_.since && out.at < *window_.since) || (window_.until && out.at >= *window_.until)) continue;
    if (out.kind != RequestRecord::Kind::kRequest) return true;
    if (kept_.size() <= out.input) kept_.resize(out.input + 1, 0);
    ++kept_[out.input];
    return true;
  }
}

}  // namespace sluice::replay
