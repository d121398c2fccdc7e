// The replay's report as JSON (`sluice-replay --json`): every number of the
// terminal summary and of the HTML page, for scripts and for the tests that
// hold the three to the same figures. Times are UTC, ISO 8601 with
// milliseconds ("2026-12-02T13:55:36.123Z").
//
//   {"inputs": [{"name", "format", "units_read", "records", "problems",
//                "first_problems": ["FILE:LINE:COLUMN: message", ...]}],
//    "credential_labels", "records", "first", "last", "threads", "load_seconds", "decide_seconds",
//    "records_per_second",
//    "policy": OUTCOME,
//    "compare": {"policy": OUTCOME, "refused_by_both", "refused_only_by_first",
//                "refused_only_by_second", "answered_by_both", "answered_only_by_first",
//                "answered_only_by_second", "unparsed_by_both", "unparsed_only_by_first",
//                "unparsed_only_by_second", "only_first_keys", "only_second_keys",
//                "only_first": [{"key", "rule", "requests", "first"}], "only_second": [...]}}
//
//   OUTCOME = {"file", "name", "requests", "forwarded", "exempt", "admitted",
//              "refused", "answered", "unparsed", "usage_reports",
//              "rules": [{"rule", "admitted", "refused", "answered", "shadow_refused", "delayed",
//                         "delay_seconds"}],
//              "refused_key_count",
//              "refused_keys": [{"rule", "key", "requests", "refused", "first_refusal", "last_refusal"}],
//              "series": {"start", "bin_seconds", "rules": [{"rule", "requests": [..], "refused": [..]}]},
//              "rates": [{"rule", "bucket", "limit", "period_seconds", "keys", "keys_over",
//                         "keys_cut", "max_ratio", "bin_width", "keys_by_ratio": [..]}]}
//
// "credential_labels" says what credential digests are keyed with ("" where
// no policy keys on credentials); "keys_cut" counts keys whose busiest
// period passed the distribution's last bin and was cut there. A rule row whose "rule" is "" holds answers no rule gave (a 401 for an
// unknown credential); "unparsed" counts the heads the parser refused
// (answered 400/431/501/505 before any rule), which no row holds. "compare" is present only
// with --compare.
#pragma once

#include <string>

#include "replay/replay_result.h"

namespace sluice::replay {

// One line of JSON (no trailing newline).
[[nodiscard]] std::string render_json(const ReplayReport& report);

// "2026-12-02T13:55:36.123Z"
[[nodiscard]] std::string iso_time(time::Nanos t);

}  // namespace sluice::replay
