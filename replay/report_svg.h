// The pieces the HTML report (report_html.cpp) is built from: escaping of
// text that came from traffic (keys, rule names, file names), number and UTC
// time texts, the colours per rule, and the three inline SVG plots. Every
// coordinate written is finite, whatever the data (all zero, one bin, none).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "replay/replay_result.h"

namespace sluice::replay::html {

// `text` with & < > " ' as character references, so it is safe in element
// text and in quoted attributes, SVG included. Bytes that are not UTF-8 and
// control characters other than tab become U+FFFD, so the page stays
// well formed whatever bytes a client sent.
void append_escaped(std::string& out, std::string_view text);
[[nodiscard]] std::string escaped(std::string_view text);

// At most `max_chars` characters of `text` (not escaped), "…" when cut.
[[nodiscard]] std::string shortened(std::string_view text, size_t max_chars);

// `value` with `decimals` digits after the point; "0" when not finite.
[[nodiscard]] std::string decimal(double value, int decimals);
// Nanoseconds as seconds, exactly: "60", "0.25".
[[nodiscard]] std::string seconds_text(time::Nanos ns);
// UTC, strftime's `format` (e.g. "%H:%M"); "%L" in it is the milliseconds.
[[nodiscard]] std::string utc_text(time::Nanos t, std::string_view format);
// A rule as shown: the "" row is "(no rule)".
[[nodiscard]] std::string rule_display(std::string_view rule);

// The warm colour of refusals, and the neutral one of what went through.
inline constexpr const char* kRefusedColour = "#c8553d";
inline constexpr const char* kNeutralColour = "#6b7785";

// One colour per rule, in policy order, the same in every plot and table.
class RulePalette {
 public:
  explicit RulePalette(const std::vector<RuleCounts>& rules);
  [[nodiscard]] const char* colour(std::string_view rule) const;

 private:
  std::vector<std::string> rules_;
};

// Plot 1, one panel per rule: its requests per bin of time, the refused
// part in the warm colour; an x axis of UTC times. Needs a series with bins.
[[nodiscard]] std::string series_plot(const TimeSeries& series, const TimeSeries::Rule& rule, const char* colour);
// Plot 2: the rule's keys by busiest period / limit, the limit marked.
[[nodiscard]] std::string rate_plot(const RateDistribution& rate, const char* colour);
// Plot 3: refusals of the busiest refused keys, with their first refusal.
[[nodiscard]] std::string top_keys_plot(const std::vector<RefusedKey>& keys, const RulePalette& palette);

}  // namespace sluice::replay::html
