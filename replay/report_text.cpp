// See report_text.h.
#include "replay/report_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "replay/report_json.h"

namespace sluice::replay {

namespace {

[[gnu::format(printf, 2, 3)]] void put(std::string& out, const char* format, ...) {
  char buf[1024];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n > 0) out.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
}

constexpr size_t kProblemsShown = 5;

void inputs_text(std::string& out, const ReplayReport& r) {
  for (const InputSummary& in : r.inputs) {
    const char* units = in.format == "pcap" || in.format == "pcapng" ? "packets" : "lines";
    put(out, "input %s (%s): %" PRIu64 " %s, %" PRIu64 " requests, %" PRIu64 " problems\n", in.name.c_str(),
        in.format.c_str(), in.units_read, units, in.records, in.problem_count);
    for (size_t i = 0; i < in.problems.size() && i < kProblemsShown; ++i) {
      put(out, "  %s\n", in.problems[i].to_string().c_str());
    }
    if (in.problem_count > kProblemsShown) put(out, "  ... and %" PRIu64 " more\n", in.problem_count - kProblemsShown);
  }
  if (!r.credential_labels.empty()) put(out, "credential digests keyed with %s\n", r.credential_labels.c_str());
  if (r.records > 0) {
    put(out, "span %s .. %s (%.3f s)\n", iso_time(r.first).c_str(), iso_time(r.last).c_str(),
        static_cast<double>(r.last - r.first) / 1e9);
  }
}

void outcome_text(std::string& out, const PolicyOutcome& o) {
  put(out, "\npolicy %s (%s)\n", o.policy.c_str(), o.name.c_str());
  put(out,
      "%" PRIu64 " requests: %" PRIu64 " forwarded, %" PRIu64 " exempt, %" PRIu64 " admitted, %" PRIu64
      " refused, %" PRIu64 " answered, %" PRIu64 " unparsed (400, 431, 501, 505); %" PRIu64 " usage reports\n",
      o.requests, o.forwarded, o.exempt, o.admitted, o.refused, o.answered, o.unparsed, o.usage_reports);
  for (const std::string& w : o.warnings) put(out, "warning: %s\n", w.c_str());
  put(out, "  %-24s %10s %10s %10s %10s\n", "rule", "admitted", "refused", "answered", "shadow");
  for (const RuleCounts& c : o.rules) {
    put(out, "  %-24s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n",
        c.rule.empty() ? "(no rule)" : c.rule.c_str(), c.admitted, c.refused, c.answered, c.shadow_refused);
  }
  for (const RuleCounts& c : o.rules) {
    if (c.delayed == 0) continue;
    put(out, "  rule %s admitted %" PRIu64 " late (delay_max), held %.1f ms on average\n", c.rule.c_str(), c.delayed,
        static_cast<double>(c.delay_total) / 1e6 / static_cast<double>(c.delayed));
  }
  if (o.refused_keys.empty()) return;
  put(out, "busiest refused keys (%zu of %" PRIu64 "):\n", o.refused_keys.size(), o.refused_key_count);
  put(out, "  %-16s %-40s %9s %9s  %-24s\n", "rule", "key", "requests", "refused", "first refusal");
  for (const RefusedKey& k : o.refused_keys) {
    put(out, "  %-16s %-40s %9" PRIu64 " %9" PRIu64 "  %s\n", k.rule.c_str(), k.key.c_str(), k.requests, k.refused,
        iso_time(k.first_refusal).c_str());
  }
}

void differences_text(std::string& out, const char* title, const std::vector<Difference>& list, uint64_t keys) {
  if (list.empty()) return;
  put(out, "%s (%zu of %" PRIu64 " keys):\n", title, list.size(), keys);
  for (const Difference& d : list) {
    put(out, "  %-16s %-40s %9" PRIu64 "  first %s\n", d.rule.c_str(), d.key.c_str(), d.requests,
        iso_time(d.first).c_str());
  }
}

void comparison_text(std::string& out, const ReplayReport& r) {
  if (!r.other || !r.comparison) return;
  outcome_text(out, *r.other);
  const Comparison& c = *r.comparison;
  const char* first = r.outcome.policy.c_str();
  const char* second = r.other->policy.c_str();
  put(out, "\ncompared:\n");
  put(out, "  refused (429):                   by both %" PRIu64 ", only by %s %" PRIu64 ", only by %s %" PRIu64 "\n",
      c.refused_by_both, first, c.refused_only_by_first, second, c.refused_only_by_second);
  put(out, "  answered by a rule (401, 404):   by both %" PRIu64 ", only by %s %" PRIu64 ", only by %s %" PRIu64 "\n",
      c.answered_by_both, first, c.answered_only_by_first, second, c.answered_only_by_second);
  put(out, "  unparsed (400, 431, 501, 505):   by both %" PRIu64 ", only by %s %" PRIu64 ", only by %s %" PRIu64 "\n",
      c.unparsed_by_both, first, c.unparsed_only_by_first, second, c.unparsed_only_by_second);
  differences_text(out, ("refused or answered only by " + r.outcome.policy).c_str(), c.only_first, c.only_first_keys);
  differences_text(out, ("refused or answered only by " + r.other->policy).c_str(), c.only_second, c.only_second_keys);
}

}  // namespace

std::string render_text(const ReplayReport& r) {
  std::string out;
  inputs_text(out, r);
  outcome_text(out, r.outcome);
  comparison_text(out, r);
  put(out, "\n%" PRIu64 " records in %.3f s: %.0f records/s on %u threads (opening the inputs and reading captures %.3f s, streaming logs and deciding %.3f s)\n",
      r.records, r.load_seconds + r.decide_seconds, r.records_per_second, r.threads, r.load_seconds,
      r.decide_seconds);
  return out;
}

}  // namespace sluice::replay
