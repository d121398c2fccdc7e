// See rule_dispatch.h.
#include "limiter/rule_dispatch.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

namespace sluice::limiter {

namespace {

// The first segment of a path: between its leading '/' and the next '/'.
std::string_view first_segment(std::string_view path) noexcept {
  if (path.empty() || path.front() != '/') return {};
  const size_t end = path.find('/', 1);
  return path.substr(1, end == std::string_view::npos ? std::string_view::npos : end - 1);
}

// A segment's hash: its first eight bytes and its length, multiplied.
uint64_t segment_hash(std::string_view s) noexcept {
  uint64_t w = 0;
  if (!s.empty()) std::memcpy(&w, s.data(), std::min<size_t>(s.size(), 8));
  return (w ^ (s.size() * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
}

}  // namespace

void RuleDispatch::build(std::span<const std::vector<policy::PathPattern>* const> patterns, size_t min_rules) {
  all_.clear();
  others_.clear();
  entries_.clear();
  slots_.clear();
  for (size_t i = 0; i < patterns.size(); ++i) all_.push_back(static_cast<uint16_t>(i));
  if (patterns.size() < min_rules || patterns.size() >= kEmpty) return;
  // Each rule's first segments, or none: it is tried for every path.
  std::vector<std::optional<std::vector<std::string_view>>> firsts(patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (patterns[i]->empty()) continue;
    std::vector<std::string_view> segs;
    bool any = false;
    for (const policy::PathPattern& p : *patterns[i]) {
      const std::optional<std::string_view> f = p.first_segment();
      if (!f) any = true;
      else segs.push_back(*f);
    }
    if (!any) firsts[i] = std::move(segs);
  }
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (!firsts[i]) {
      others_.push_back(static_cast<uint16_t>(i));
      continue;
    }
    for (std::string_view seg : *firsts[i]) {
      if (std::none_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.segment == seg; })) {
        entries_.push_back({std::string(seg), {}});
      }
    }
  }
  // Each segment's list: the rules that name it and the any-path rules, in
  // rule order.
  for (Entry& e : entries_) {
    for (size_t i = 0; i < patterns.size(); ++i) {
      const bool names = firsts[i] && std::find(firsts[i]->begin(), firsts[i]->end(), e.segment) != firsts[i]->end();
      if (!firsts[i] || names) e.rules.push_back(static_cast<uint16_t>(i));
    }
  }
  // Worth its lookup only if it leaves most rules out: a policy whose
  // routes share one first segment (every path under /api/) is tried in
  // order.
  size_t longest = others_.size();
  for (const Entry& e : entries_) longest = std::max(longest, e.rules.size());
  if (longest > patterns.size() / 2) {
    entries_.clear();
    others_.clear();
    return;
  }
  const size_t size = std::bit_ceil(std::max<size_t>(entries_.size() * 2, 8));
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(size));
  slots_.assign(size, kEmpty);
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t s = segment_hash(entries_[i].segment) >> shift_;
    while (slots_[s] != kEmpty) s = (s + 1) & (size - 1);
    slots_[s] = static_cast<uint16_t>(i);
  }
}

std::span<const uint16_t> RuleDispatch::lookup(std::string_view path) const noexcept {
  const std::string_view seg = first_segment(path);
  size_t s = segment_hash(seg) >> shift_;
  for (;;) {
    const uint16_t e = slots_[s];
    if (e == kEmpty) return others_;
    if (entries_[e].segment == seg) return entries_[e].rules;
    s = (s + 1) & (slots_.size() - 1);
  }
}

}  // namespace sluice::limiter
