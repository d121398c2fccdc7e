// What a replay found: for each policy, the verdicts per rule, the refused
// keys, the requests and refusals over time and each key's busiest period
// against its limit; with --compare, who one policy refuses and the other
// does not. Plain data: the replay (replay_run.h) fills it, the reports
// (report_text.h, report_json.h, report_html.h) only read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replay/record.h"
#include "time/clock.h"

namespace sluice::replay {

// One rule's verdicts. A row with an empty `rule` holds the appliance's
// answers that no rule gave (a 401 for an unknown credential, RF05).
struct RuleCounts {
  std::string rule;
  uint64_t admitted = 0;
  uint64_t refused = 0;
  uint64_t answered = 0;        // the appliance's own 400/401/404/431/501/505
  uint64_t shadow_refused = 0;  // X01: would have been refused, forwarded (counted in admitted)
  // Admitted late (a rule's delay_max; counted in admitted), and how long
  // they waited together.
  uint64_t delayed = 0;
  time::Nanos delay_total = 0;
};

// A key a rule refused: its label as `sluicectl top` shows it (an address,
// "user NAME", "credential DIGEST", a header's or parameter's text).
struct RefusedKey {
  std::string rule;
  std::string key;
  uint64_t requests = 0;  // of this key under this rule, admitted or refused
  uint64_t refused = 0;
  time::Nanos first_refusal = 0;
  time::Nanos last_refusal = 0;
};

// Requests and refusals per rule in equal bins of time, from `start`.
struct TimeSeries {
  time::Nanos start = 0;
  time::Nanos bin = 0;  // width: chosen so the span has at most kMaxBins
  static constexpr size_t kMaxBins = 120;
  struct Rule {
    std::string rule;
    std::vector<uint64_t> requests;  // decided by the rule (admitted, refused, answered)
    std::vector<uint64_t> refused;
  };
  std::vector<Rule> rules;  // rules that decided anything, in policy order
};

// Each key's busiest stretch of its bucket's period (the most requests it
// sent in any window that long) against the limit for that period, per
// rule: how close to the limit the clients run.
struct RateDistribution {
  std::string rule;
  std::string bucket;
  uint64_t limit = 0;       // requests per period (GCRA: the rate's count; calendar: the RPM)
  time::Nanos period = 0;
  // Keys by peak/limit, in bins of kBinWidth (the last bin: kMaxRatio and above).
  static constexpr double kBinWidth = 0.1;
  static constexpr double kMaxRatio = 3.0;
  std::vector<uint64_t> keys_by_ratio;  // size kMaxRatio / kBinWidth + 1
  uint64_t keys = 0;
  uint64_t keys_over = 0;  // peak above the limit
  // Keys whose peak was cut at the ring's cap (key_rates.h: past kMaxRatio
  // times the limit): in the last bin, their peak and max_ratio at least that.
  uint64_t keys_cut = 0;
  double max_ratio = 0;
};

// What one policy did to the traffic.
struct PolicyOutcome {
  std::string policy;  // the file, as named on the command line
  std::string name;    // the policy's `name`
  uint64_t requests = 0;
  uint64_t forwarded = 0;  // no rule applies (RF02)
  uint64_t exempt = 0;     // TB08, TB18
  uint64_t admitted = 0;
  uint64_t refused = 0;
  uint64_t answered = 0;
  // Heads the parser refused: answered 400, 431, 501 or 505 and closed,
  // before any rule (sluiced counts them as parse_errors, not answered).
  uint64_t unparsed = 0;
  uint64_t usage_reports = 0;  // DQ05: responses whose tokens were charged
  std::vector<RuleCounts> rules;         // the policy's rules in order, then the "" row if it counted anything
  std::vector<RefusedKey> refused_keys;  // the busiest first (most refusals), at most Options::top_keys
  uint64_t refused_key_count = 0;        // all of them
  TimeSeries series;
  std::vector<RateDistribution> rates;   // rules with a bucket that decided anything
  // What the replay lacked that the box may have had (a credential map,
  // live runs, TB07's slots), each with the requests it touched.
  std::vector<std::string> warnings;
};

// --compare: requests one policy refused (or answered) and the other let
// through, by who was refused (the refusing policy's key and rule).
struct Difference {
  std::string key;
  std::string rule;  // the refusing policy's rule
  uint64_t requests = 0;
  time::Nanos first = 0;
};
// Requests one policy stopped and the other did not, counted apart by how
// they were stopped: refused (429), answered by a rule (401, 404), or a
// head the parser refused (400, 431, 501, 505). The lists name who was
// refused or answered by one and let through by the other.
struct Comparison {
  uint64_t refused_by_both = 0;
  uint64_t refused_only_by_first = 0;   // requests
  uint64_t refused_only_by_second = 0;
  uint64_t answered_by_both = 0;
  uint64_t answered_only_by_first = 0;
  uint64_t answered_only_by_second = 0;
  uint64_t unparsed_by_both = 0;
  uint64_t unparsed_only_by_first = 0;
  uint64_t unparsed_only_by_second = 0;
  std::vector<Difference> only_first;   // the largest first, at most Options::top_keys
  std::vector<Difference> only_second;
  uint64_t only_first_keys = 0;         // all of them
  uint64_t only_second_keys = 0;
};

struct InputSummary {
  std::string name;  // as given on the command line
  std::string format;  // "pcap", "pcapng", "nginx", "json"
  uint64_t units_read = 0;  // packets or lines
  uint64_t records = 0;     // requests found
  uint64_t problem_count = 0;
  std::vector<InputProblem> problems;  // the first few
};

struct ReplayReport {
  std::vector<InputSummary> inputs;
  // What credential digest labels are keyed with, where a policy keys on
  // credentials: the box's secret, the operator's label secret, or a secret
  // drawn for this run alone (labels then match no other report's). Empty:
  // no policy keys on credentials.
  std::string credential_labels;
  uint64_t records = 0;
  time::Nanos first = 0, last = 0;  // the records' span
  unsigned threads = 0;
  double load_seconds = 0;    // looking at the inputs, reading the captures (whole)
  double decide_seconds = 0;  // reading the logs (streamed) and deciding
  double records_per_second = 0;  // records / (load + decide)
  PolicyOutcome outcome;
  std::optional<PolicyOutcome> other;  // --compare
  std::optional<Comparison> comparison;
};

}  // namespace sluice::replay
