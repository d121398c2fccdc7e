// One policy's verdicts added up as the replay decides, in time order: the
// totals, each rule's row, every (rule, key) pair's requests, refusals and
// busiest period so far (key_rates.h's WindowPeak: the times of one period,
// not of every request), and the requests and refusals over time
// (series_counter.h). finish() turns it into a PolicyOutcome: the busiest
// refused keys named, each key's busiest period set against its limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "limiter/decide.h"
#include "replay/key_rates.h"
#include "replay/record.h"
#include "replay/replay_result.h"
#include "replay/replay_state.h"
#include "replay/series_counter.h"

namespace sluice::replay {

// What a tally needs of one decision, kept past it: a Decision is some 200
// bytes, and its answer's views live no longer than the request's bytes.
struct DecidedNote {
  bool judged = false;    // false: on a connection an earlier answer of the policy closed
  bool unparsed = false;  // the answer to a head the parser refused
  bool shadow_refusal = false;
  limiter::Verdict verdict = limiter::Verdict::kForward;
  int16_t rule = -1;
  limiter::KeyLabel label;
  time::Nanos delay = 0;  // admitted late by this much (a rule's delay_max)
  uint32_t run_budget = 0;  // a live run's own budget charged (per minute), 0: the bucket's
  uint16_t status = 0;      // of an answer

  [[nodiscard]] static DecidedNote of(const limiter::Decision& d, bool unparsed) noexcept {
    return {true, unparsed, d.shadow_refusal, d.verdict, d.rule, d.label, d.delay, d.run_budget, d.status};
  }
  // Refused, or answered by the appliance: the request never reached the origin.
  [[nodiscard]] bool refused() const noexcept {
    return judged && (verdict == limiter::Verdict::kRefuse || verdict == limiter::Verdict::kAnswer);
  }
};

class OutcomeTally {
 public:
  OutcomeTally(const PolicyLimiter& limiter, std::string file);

  // Nothing for a request that was not judged.
  void count(const RequestRecord& r, const DecidedNote& d);
  void set_usage_reports(uint64_t n) noexcept { outcome_.usage_reports = n; }

  // The outcome, its refused keys cut to the `top_keys` with the most
  // refusals (ties: the earliest first refusal), its time bins covering
  // [first, last] (the span of every record replayed).
  [[nodiscard]] PolicyOutcome finish(size_t top_keys, time::Nanos first, time::Nanos last);

 private:
  struct KeyStats {
    limiter::KeyLabel label;
    int16_t rule = -1;
    uint64_t refused = 0;
    uint32_t run_budget = 0;  // a live run's own, where one applied: its limit, per minute
    uint64_t requests = 0;
    time::Nanos first_refusal = 0;
    time::Nanos last_refusal = 0;
    WindowPeak peak;  // over its bucket's period, or a minute for a run's own budget
  };
  struct PairHash {
    size_t operator()(const std::pair<int16_t, uint64_t>& p) const noexcept {
      return p.second ^ (static_cast<size_t>(p.first) * 0x9e3779b97f4a7c15ull);
    }
  };

  void count_key(const RequestRecord& r, const DecidedNote& d);
  // What the replay lacked that the box may have had, with the requests it
  // touched (PolicyOutcome::warnings).
  [[nodiscard]] std::vector<std::string> missing_state() const;
  [[nodiscard]] std::vector<RefusedKey> busiest_refused(size_t top_keys) const;
  [[nodiscard]] std::vector<RateDistribution> rate_distributions() const;

  const PolicyLimiter& limiter_;
  std::vector<PeriodLimit> limits_;  // per rule: its bucket's (none: period 0)
  std::vector<std::string> bucket_names_;  // per rule
  SeriesCounter series_;
  PolicyOutcome outcome_;
  RuleCounts unruled_;  // the "" row
  uint64_t answered_401_ = 0, answered_404_ = 0;
  uint64_t slot_requests_ = 0;  // decided by a rule with credential_slots (TB07)
  std::unordered_map<std::pair<int16_t, uint64_t>, KeyStats, PairHash> keys_;
};

// A bin width for `span`: the smallest of 1 s, 2 s, 5 s, 10 s, 15 s, 30 s,
// 1 min, ... 1 day (then whole days) giving at most TimeSeries::kMaxBins.
[[nodiscard]] time::Nanos bin_width_for(time::Nanos span) noexcept;

}  // namespace sluice::replay
