// See report_json.h.
#include "replay/report_json.h"

#include <cstdio>
#include <ctime>

#include "control/json.h"

namespace sluice::replay {

using control::Json;

std::string iso_time(time::Nanos t) {
  const time_t secs = static_cast<time_t>(t / time::kNanosPerSecond);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<unsigned>(t % time::kNanosPerSecond / 1'000'000));
  return buf;
}

namespace {

double seconds(time::Nanos n) { return static_cast<double>(n) / 1e9; }

Json rules_json(const std::vector<RuleCounts>& rules) {
  Json out = Json::array();
  for (const RuleCounts& r : rules) {
    out.push_back({{"rule", r.rule},
                   {"admitted", r.admitted},
                   {"refused", r.refused},
                   {"answered", r.answered},
                   {"shadow_refused", r.shadow_refused},
                   {"delayed", r.delayed},
                   {"delay_seconds", seconds(r.delay_total)}});
  }
  return out;
}

Json keys_json(const std::vector<RefusedKey>& keys) {
  Json out = Json::array();
  for (const RefusedKey& k : keys) {
    out.push_back({{"rule", k.rule},
                   {"key", k.key},
                   {"requests", k.requests},
                   {"refused", k.refused},
                   {"first_refusal", iso_time(k.first_refusal)},
                   {"last_refusal", iso_time(k.last_refusal)}});
  }
  return out;
}

Json series_json(const TimeSeries& s) {
  Json rules = Json::array();
  for (const TimeSeries::Rule& r : s.rules) {
    rules.push_back({{"rule", r.rule}, {"requests", r.requests}, {"refused", r.refused}});
  }
  return {{"start", iso_time(s.start)}, {"bin_seconds", seconds(s.bin)}, {"rules", std::move(rules)}};
}

Json rates_json(const std::vector<RateDistribution>& rates) {
  Json out = Json::array();
  for (const RateDistribution& d : rates) {
    out.push_back({{"rule", d.rule},
                   {"bucket", d.bucket},
                   {"limit", d.limit},
                   {"period_seconds", seconds(d.period)},
                   {"keys", d.keys},
                   {"keys_over", d.keys_over},
                   {"keys_cut", d.keys_cut},
                   {"max_ratio", d.max_ratio},
                   {"bin_width", RateDistribution::kBinWidth},
                   {"keys_by_ratio", d.keys_by_ratio}});
  }
  return out;
}

Json outcome_json(const PolicyOutcome& o) {
  return {{"file", o.policy},
          {"name", o.name},
          {"requests", o.requests},
          {"forwarded", o.forwarded},
          {"exempt", o.exempt},
          {"admitted", o.admitted},
          {"refused", o.refused},
          {"answered", o.answered},
          {"unparsed", o.unparsed},
          {"usage_reports", o.usage_reports},
          {"rules", rules_json(o.rules)},
          {"warnings", o.warnings},
          {"refused_key_count", o.refused_key_count},
          {"refused_keys", keys_json(o.refused_keys)},
          {"series", series_json(o.series)},
          {"rates", rates_json(o.rates)}};
}

Json differences_json(const std::vector<Difference>& list) {
  Json out = Json::array();
  for (const Difference& d : list) {
    out.push_back({{"key", d.key}, {"rule", d.rule}, {"requests", d.requests}, {"first", iso_time(d.first)}});
  }
  return out;
}

Json inputs_json(const std::vector<InputSummary>& inputs) {
  Json out = Json::array();
  for (const InputSummary& in : inputs) {
    Json problems = Json::array();
    for (const InputProblem& p : in.problems) problems.push_back(p.to_string());
    out.push_back({{"name", in.name},
                   {"format", in.format},
                   {"units_read", in.units_read},
                   {"records", in.records},
                   {"problems", in.problem_count},
                   {"first_problems", std::move(problems)}});
  }
  return out;
}

}  // namespace

std::string render_json(const ReplayReport& r) {
  Json out = {{"inputs", inputs_json(r.inputs)},
              {"credential_labels", r.credential_labels},
              {"records", r.records},
              {"first", iso_time(r.first)},
              {"last", iso_time(r.last)},
              {"threads", r.threads},
              {"load_seconds", r.load_seconds},
              {"decide_seconds", r.decide_seconds},
              {"records_per_second", r.records_per_second},
              {"policy", outcome_json(r.outcome)}};
  if (r.other && r.comparison) {
    const Comparison& c = *r.comparison;
    out["compare"] = {{"policy", outcome_json(*r.other)},
                      {"refused_by_both", c.refused_by_both},
                      {"refused_only_by_first", c.refused_only_by_first},
                      {"refused_only_by_second", c.refused_only_by_second},
                      {"answered_by_both", c.answered_by_both},
                      {"answered_only_by_first", c.answered_only_by_first},
                      {"answered_only_by_second", c.answered_only_by_second},
                      {"unparsed_by_both", c.unparsed_by_both},
                      {"unparsed_only_by_first", c.unparsed_only_by_first},
                      {"unparsed_only_by_second", c.unparsed_only_by_second},
                      {"only_first_keys", c.only_first_keys},
                      {"only_second_keys", c.only_second_keys},
                      {"only_first", differences_json(c.only_first)},
                      {"only_second", differences_json(c.only_second)}};
  }
  return control::dump_json(out);
}

}  // namespace sluice::replay
