// The replay's report as one self-contained HTML page (`sluice-replay --html
// FILE`): inline CSS and SVG, no script or font or image from anywhere else,
// so it opens offline and can be mailed. Plots: requests and refusals over
// time per rule, the distribution of keys' busiest periods against the limit,
// the top refused keys; and every number of the terminal summary, each
// element carrying a `data-metric` attribute so a test can read them back
// (tests/integration/replay_html_check.py holds them to the JSON report).
//
// The data-metric convention. An element `<X data-metric="PATH">TEXT</X>`
// holds one value of the JSON report (report_json.h), PATH being its place
// there, dot-separated, arrays by index, except that a policy's rules are
// named by their rule ("" written as "-"):
//   records, first, threads, inputs.0.records, inputs.0.first_problems.0,
//   policy.requests, policy.rules.per-ip.refused, policy.rules.-.answered,
//   policy.refused_keys.3.refused, policy.series.rules.0.refused.59,
//   policy.rates.0.keys_over, compare.refused_only_by_first,
//   compare.policy.refused, compare.only_second.0.key, ...
// TEXT is the value itself, nothing else inside the element: an integer in
// decimal with no separators; a time as the JSON writes it (iso_time); a
// string (key, rule, file, name, problem) as is, escaped for HTML; a
// fractional number (seconds, records/s, ratios) rounded to the decimals
// shown, so it equals the JSON's within half a unit of its last digit.
// Each PATH occurs once. A listed refused key's `refused` element also
// carries `data-key` = the key. Strings from traffic whose bytes are not
// UTF-8, and control characters other than tab, read as U+FFFD.
// The page shows, and so carries, everything of the JSON but the
// --compare policy's refused keys, series and rates (its totals and rules
// are there).
#pragma once

#include <string>

#include "replay/replay_result.h"

namespace sluice::replay {

[[nodiscard]] std::string render_html(const ReplayReport& report);

}  // namespace sluice::replay
