// See outcome_tally.h.
#include "replay/outcome_tally.h"

#include <algorithm>

#include "control/key_label_text.h"
#include "replay/key_rates.h"

namespace sluice::replay {

using limiter::Verdict;

time::Nanos bin_width_for(time::Nanos span) noexcept {
  static constexpr uint64_t kSeconds[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
                                          21600, 43200, 86400};
  for (uint64_t s : kSeconds) {
    if (span / (s * time::kNanosPerSecond) < TimeSeries::kMaxBins) return s * time::kNanosPerSecond;
  }
  const uint64_t day = 86400 * time::kNanosPerSecond;
  return (span / day / TimeSeries::kMaxBins + 1) * day;
}

OutcomeTally::OutcomeTally(const PolicyLimiter& limiter, std::string file)
    : limiter_(limiter), series_(limiter.policy().rules.size()) {
  const limiter::CompiledPolicy& p = limiter.policy();
  outcome_.policy = std::move(file);
  outcome_.name = p.source.name;
  for (const limiter::CompiledRule& rule : p.rules) {
    outcome_.rules.push_back({.rule = rule.name});
    limits_.emplace_back();
    bucket_names_.emplace_back();
    if (rule.bucket >= p.buckets.size()) continue;  // a rule that only answers charges no bucket
    const std::string& name = p.buckets[rule.bucket].name;
    const auto spec = std::find_if(p.source.buckets.begin(), p.source.buckets.end(),
                                   [&](const policy::BucketSpec& b) { return b.name == name; });
    if (spec == p.source.buckets.end()) continue;
    limits_.back() = period_limit(*spec);
    bucket_names_.back() = name;
  }
}

void OutcomeTally::count(const RequestRecord& r, const DecidedNote& d) {
  if (!d.judged) return;
  ++outcome_.requests;
  if (d.unparsed) {
    ++outcome_.unparsed;
    return;
  }
  RuleCounts& row = d.rule >= 0 ? outcome_.rules[static_cast<size_t>(d.rule)] : unruled_;
  switch (d.verdict) {
    case Verdict::kForward: ++outcome_.forwarded; return;
    case Verdict::kExempt: ++outcome_.exempt; return;
    case Verdict::kAdmit:
      ++outcome_.admitted;
      ++row.admitted;
      if (d.shadow_refusal) ++row.shadow_refused;
      if (d.delay != 0) {
        ++row.delayed;
        row.delay_total += d.delay;
      }
      break;
    case Verdict::kRefuse:
      ++outcome_.refused;
      ++row.refused;
      break;
    case Verdict::kAnswer:
      ++outcome_.answered;
      ++row.answered;
      if (d.status == 401) ++answered_401_;
      if (d.status == 404) ++answered_404_;
      break;
  }
  if (d.rule >= 0 && limiter_.policy().rules[static_cast<size_t>(d.rule)].slots_per_ip != 0) ++slot_requests_;
  if (d.rule >= 0) series_.count(static_cast<size_t>(d.rule), r.at, d.verdict == Verdict::kRefuse);
  if (d.label.kind != limiter::KeyLabel::Kind::kNone && d.rule >= 0) count_key(r, d);
}

void OutcomeTally::count_key(const RequestRecord& r, const DecidedNote& d) {
  KeyStats& k = keys_[{d.rule, d.label.key_hash}];
  if (k.requests++ == 0) {
    k.label = d.label;
    k.rule = d.rule;
  }
  // A run with a budget of its own is set against that budget, per minute;
  // a key whose run gained one later starts its peak again.
  const PeriodLimit& bucket = limits_[static_cast<size_t>(d.rule)];
  const bool run_budget = d.run_budget != 0;
  if (k.requests == 1 || (run_budget && k.run_budget == 0)) {
    k.peak = run_budget ? WindowPeak(time::kNanosPerMinute, peak_cap(d.run_budget))
                        : WindowPeak(bucket.period, peak_cap(bucket.limit));
  }
  k.peak.add(r.at);
  if (run_budget) k.run_budget = d.run_budget;
  if (d.verdict != Verdict::kRefuse) return;
  if (k.refused++ == 0) k.first_refusal = r.at;
  k.last_refusal = r.at;
}

std::vector<RefusedKey> OutcomeTally::busiest_refused(size_t top_keys) const {
  std::vector<const KeyStats*> refused;
  for (const auto& [id, k] : keys_) {
    if (k.refused > 0) refused.push_back(&k);
  }
  const auto busier = [](const KeyStats* a, const KeyStats* b) {
    if (a->refused != b->refused) return a->refused > b->refused;
    if (a->first_refusal != b->first_refusal) return a->first_refusal < b->first_refusal;
    return a->label.key_hash < b->label.key_hash;
  };
  const size_t n = std::min(top_keys, refused.size());
  std::partial_sort(refused.begin(), refused.begin() + static_cast<std::ptrdiff_t>(n), refused.end(), busier);
  std::vector<RefusedKey> out;
  const control::UserNamer names = [this](uint64_t id) { return limiter_.user_name(id); };
  for (size_t i = 0; i < n; ++i) {
    const KeyStats& k = *refused[i];
    out.push_back({.rule = limiter_.policy().rules[static_cast<size_t>(k.rule)].name,
                   .key = control::key_label_text(k.label, names),
                   .requests = k.requests,
                   .refused = k.refused,
                   .first_refusal = k.first_refusal,
                   .last_refusal = k.last_refusal});
  }
  return out;
}

std::vector<RateDistribution> OutcomeTally::rate_distributions() const {
  const limiter::CompiledPolicy& p = limiter_.policy();
  std::vector<RateDistribution> by_rule(p.rules.size());
  for (size_t i = 0; i < p.rules.size(); ++i) {
    if (bucket_names_[i].empty()) continue;
    by_rule[i] = {.rule = p.rules[i].name, .bucket = bucket_names_[i], .limit = limits_[i].limit,
                  .period = limits_[i].period};
  }
  for (const auto& [id, k] : keys_) {
    RateDistribution& d = by_rule[static_cast<size_t>(k.rule)];
    if (k.run_budget == 0 && d.period == 0) continue;
    add_key_peak(d, k.peak.peak(), k.run_budget != 0 ? k.run_budget : d.limit);
    if (k.peak.cut()) ++d.keys_cut;
  }
  std::vector<RateDistribution> out;
  for (RateDistribution& d : by_rule) {
    if (d.keys > 0) out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> OutcomeTally::missing_state() const {
  const limiter::CompiledPolicy& p = limiter_.policy();
  const auto any_rule = [&](auto pred) { return std::any_of(p.rules.begin(), p.rules.end(), pred); };
  std::vector<std::string> out;
  const auto n = [](uint64_t v) { return std::to_string(v) + (v == 1 ? " request" : " requests"); };
  if (answered_401_ != 0 && limiter_.users_known() == 0 &&
      any_rule([](const limiter::CompiledRule& r) { return r.key_kind == policy::KeySpec::Kind::kUser; })) {
    out.push_back(n(answered_401_) + " answered 401 because no credential map was given (--state-dir, or " +
                  "--credentials with it): the box may have known their users");
  }
  if (answered_404_ != 0 && limiter_.runs_known() == 0 &&
      any_rule([](const limiter::CompiledRule& r) {
        return std::any_of(r.live_run_param.begin(), r.live_run_param.end(), [](int i) { return i >= 0; });
      })) {
    out.push_back(n(answered_404_) + " answered 404 because no live runs were given (--state-dir or --runs): " +
                  "the box may have had their runs live");
  }
  if (slot_requests_ != 0) {
    out.push_back(n(slot_requests_) + " decided under credential_slots (TB07) from no slots held: the slots " +
                  "the box held before the records began are not replayed");
  }
  return out;
}

PolicyOutcome OutcomeTally::finish(size_t top_keys, time::Nanos first, time::Nanos last) {
  std::vector<std::string> names;
  for (const RuleCounts& row : outcome_.rules) names.push_back(row.rule);
  outcome_.series = series_.finish(names, first, last);
  outcome_.warnings = missing_state();
  if (unruled_.admitted + unruled_.refused + unruled_.answered > 0) outcome_.rules.push_back(unruled_);
  for (const auto& [id, k] : keys_) outcome_.refused_key_count += k.refused > 0 ? 1 : 0;
  outcome_.refused_keys = busiest_refused(top_keys);
  outcome_.rates = rate_distributions();
  std::erase_if(outcome_.series.rules, [](const TimeSeries::Rule& r) {
    return std::all_of(r.requests.begin(), r.requests.end(), [](uint64_t n) { return n == 0; });
  });
  return std::move(outcome_);
}

}  // namespace sluice::replay
