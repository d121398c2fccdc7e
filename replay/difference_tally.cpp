// See difference_tally.h.
#include "replay/difference_tally.h"

#include <algorithm>
#include <utility>

#include "control/key_label_text.h"

namespace sluice::replay {

DifferenceTally::Stop DifferenceTally::stop_of(const DecidedNote& d) noexcept {
  if (!d.judged) return Stop::kNone;
  if (d.unparsed) return Stop::kUnparsed;
  if (d.verdict == limiter::Verdict::kRefuse) return Stop::kRefused;
  if (d.verdict == limiter::Verdict::kAnswer) return Stop::kAnswered;
  return Stop::kNone;
}

void DifferenceTally::count(const RequestRecord& r, const DecidedNote& first, const DecidedNote& second) {
  const Stop a = stop_of(first), b = stop_of(second);
  if (a == Stop::kNone && b == Stop::kNone) return;
  for (const auto& [kind, split] : {std::pair{Stop::kRefused, &refused_}, std::pair{Stop::kAnswered, &answered_},
                                    std::pair{Stop::kUnparsed, &unparsed_}}) {
    if (a == kind && b == kind) {
      ++split->both;
    } else if (a == kind) {
      ++split->only[0];
    } else if (b == kind) {
      ++split->only[1];
    }
  }
  // Who one policy refused or answered and the other let through.
  const auto listed = [](Stop s) { return s == Stop::kRefused || s == Stop::kAnswered; };
  if (listed(a) && b == Stop::kNone) add(groups_[0], r, first);
  if (listed(b) && a == Stop::kNone) add(groups_[1], r, second);
}

void DifferenceTally::add(Groups& groups, const RequestRecord& r, const DecidedNote& d) {
  const bool keyed = d.label.kind != limiter::KeyLabel::Kind::kNone;
  uint64_t id = keyed ? d.label.key_hash : 0;
  if (!keyed) {
    for (uint8_t b : r.conn.peer.bytes) id = (id ^ b) * 0x100000001b3ull;  // FNV-1a over the address
  }
  id ^= static_cast<uint64_t>(static_cast<uint16_t>(d.rule)) << 48;
  Who& w = groups[id];
  if (w.requests++ == 0) {
    w.rule = d.rule;
    w.label = d.label;
    w.peer = r.conn.peer;
    w.first = r.at;
  }
}

std::vector<Difference> DifferenceTally::largest(const Groups& groups, const PolicyLimiter& limiter,
                                                 size_t top_keys) const {
  std::vector<const Who*> all;
  for (const auto& [id, w] : groups) all.push_back(&w);
  const size_t n = std::min(top_keys, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const Who* a, const Who* b) {
                      return a->requests != b->requests ? a->requests > b->requests : a->first < b->first;
                    });
  const control::UserNamer names = [&limiter](uint64_t id) { return limiter.user_name(id); };
  std::vector<Difference> out;
  for (size_t i = 0; i < n; ++i) {
    const Who& w = *all[i];
    const bool keyed = w.label.kind != limiter::KeyLabel::Kind::kNone;
    out.push_back({.key = keyed ? control::key_label_text(w.label, names) : w.peer.to_string(),
                   .rule = w.rule >= 0 ? limiter.policy().rules[static_cast<size_t>(w.rule)].name : std::string(),
                   .requests = w.requests,
                   .first = w.first});
  }
  return out;
}

Comparison DifferenceTally::finish(size_t top_keys) const {
  Comparison c;
  if (!limiters_[1]) return c;
  c.refused_by_both = refused_.both;
  c.refused_only_by_first = refused_.only[0];
  c.refused_only_by_second = refused_.only[1];
  c.answered_by_both = answered_.both;
  c.answered_only_by_first = answered_.only[0];
  c.answered_only_by_second = answered_.only[1];
  c.unparsed_by_both = unparsed_.both;
  c.unparsed_only_by_first = unparsed_.only[0];
  c.unparsed_only_by_second = unparsed_.only[1];
  c.only_first = largest(groups_[0], *limiters_[0], top_keys);
  c.only_second = largest(groups_[1], *limiters_[1], top_keys);
  c.only_first_keys = groups_[0].size();
  c.only_second_keys = groups_[1].size();
  return c;
}

}  // namespace sluice::replay
