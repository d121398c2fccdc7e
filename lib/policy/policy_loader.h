// Reads a policy file (YAML, config/README.md documents every field). Strict:
// an unknown key, a wrong type or an impossible number is an error with the
// file, line and column where it was found, and a file with any error yields
// no policy at all, so nothing is ever half applied.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"

namespace sluice::policy {

struct PolicyError {
  std::string file;
  int line = 0;    // 1-based; 0 when the error is about the file as a whole
  int column = 0;  // 1-based
  std::string message;

  // "file:line:column: message"
  [[nodiscard]] std::string to_string() const;
};

struct LoadResult {
  std::optional<Policy> policy;     // set iff errors is empty
  std::vector<PolicyError> errors;  // in file order
};

// `name` is what error messages call the source (usually its path).
[[nodiscard]] LoadResult load_policy_text(std::string_view text, const std::string& name);
[[nodiscard]] LoadResult load_policy_file(const std::string& path);

// Parses "600/min", "10/s", "5/second", "100/hour", "10000/day": a count per period.
[[nodiscard]] bool parse_rate(std::string_view s, uint64_t& count, Nanos& period);
// Parses a calendar window's UTC offset: "UTC", "Z", or "+05:30", "-08:00"
// (at most 14 hours), into minutes east of UTC.
[[nodiscard]] bool parse_utc_offset(std::string_view s, int32_t& minutes);
// Parses "250ms", "60s", "10m", "1h".
[[nodiscard]] bool parse_duration(std::string_view s, Nanos& out);

}  // namespace sluice::policy
