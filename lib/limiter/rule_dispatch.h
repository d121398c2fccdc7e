// Which of a policy's rules a request may match, told by its path's first
// segment, so that a policy of many routes tries only the rules that can
// match instead of every rule in turn. The rules keep their order (the first
// that applies wins); only a rule none of whose path patterns can match the
// segment is left out: every pattern that begins with a literal segment
// matches only paths whose first segment is that literal (PathPattern::
// first_segment). A rule with no path, or with a pattern that begins with a
// {param} or is "/*", is tried for every path.
//
// Telling the segment costs a word hash and a compare; a policy of few rules
// loses more to that than it saves (each rule's prefix check is a few
// instructions), so below kMinRules every rule is tried in order, as it is
// where some segment would still leave more than half the rules to try.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/path_pattern.h"

namespace sluice::limiter {

class RuleDispatch {
 public:
  static constexpr size_t kMinRules = 8;

  // `patterns[i]`: rule i's path patterns (empty: any path).
  // `min_rules` (tests) overrides kMinRules; the half-the-rules test stays.
  void build(std::span<const std::vector<policy::PathPattern>* const> patterns, size_t min_rules = kMinRules);

  // The rules to try for `path` (normal form, without its query), as indices
  // in rule order.
  [[nodiscard]] std::span<const uint16_t> candidates(std::string_view path) const noexcept {
    if (slots_.empty()) return all_;
    return lookup(path);
  }
  // Whether requests are dispatched (false: every rule is tried).
  [[nodiscard]] bool active() const noexcept { return !slots_.empty(); }

 private:
  struct Entry {
    std::string segment;
    std::vector<uint16_t> rules;  // the segment's own rules and every any-path rule, in order
  };
  [[nodiscard]] std::span<const uint16_t> lookup(std::string_view path) const noexcept;
  [[nodiscard]] size_t slot_of(std::string_view segment) const noexcept;

  std::vector<uint16_t> all_;     // 0 .. n-1
  std::vector<uint16_t> others_;  // the any-path rules: a segment no rule names
  std::vector<Entry> entries_;
  std::vector<uint16_t> slots_;   // open addressing, a power of two; kEmpty or an index into entries_
  unsigned shift_ = 64;
  static constexpr uint16_t kEmpty = UINT16_MAX;
};

}  // namespace sluice::limiter
