// sluice-replay's HTML page (report_html.h): the sections in order, each a
// function that appends its markup; the plots, the escaping and the colours
// come from report_svg.h. Values carry `data-metric` as report_html.h says.
#include "replay/report_html.h"

#include <algorithm>

#include "replay/report_json.h"
#include "replay/report_svg.h"

namespace sluice::replay {
namespace {

using html::append_escaped;
using html::escaped;
using html::rule_display;

constexpr std::string_view kStyle = R"css(
:root{--refused:#c8553d;--neutral:#6b7785;--ink:#1f2933;--muted:#5b6670;--line:#d9dee3;--soft:#f5f7f9}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);-webkit-print-color-adjust:exact;print-color-adjust:exact;
  font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:1.5rem 1rem 3rem}
h1{font-size:1.6rem;margin:0 0 .4rem}
h2{font-size:1.2rem;margin:2rem 0 .6rem;padding-bottom:.25rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:1.4rem 0 .5rem}
code,.key{font-family:ui-monospace,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:.88em;overflow-wrap:anywhere}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(14rem,1fr));gap:.4rem 1rem;margin:1rem 0}
dt{color:var(--muted);font-size:.8rem}
dd{margin:0;font-variant-numeric:tabular-nums}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(9.5rem,1fr));gap:.6rem}
.card{border:1px solid var(--line);border-left:4px solid var(--neutral);border-radius:4px;padding:.45rem .7rem;
  background:var(--soft)}
.card.refused{border-left-color:var(--refused)}
.card .label{display:block;font-size:.8rem;color:var(--muted)}
.card .value{font-size:1.35rem;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{padding:.3rem .5rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted);background:var(--soft)}
tbody th{background:none}
.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.warm{color:var(--refused);font-weight:600}
.swatch{display:inline-block;width:.75rem;height:.75rem;border-radius:2px;margin-right:.4rem;vertical-align:-1px}
figure{margin:1rem 0;break-inside:avoid;overflow-x:auto}
figcaption{font-size:.9rem;margin-bottom:.3rem}
svg{display:block;width:100%;min-width:600px;height:auto}
.rule{white-space:nowrap}
svg .axis{stroke:#8a949e}
svg .grid{stroke:#e6e9ec}
svg .limit{stroke:var(--refused);stroke-width:2;stroke-dasharray:5 3}
svg text{font-family:inherit}
svg .tick{font-size:11px;fill:var(--muted)}
svg .label{font-size:12px;fill:var(--ink)}
.notice{border:1px solid #e5c07b;background:#fdf6e3;padding:.6rem .8rem;border-radius:4px}
.none{color:var(--muted);font-style:italic}
summary{cursor:pointer;color:var(--muted);font-size:.9rem}
footer{margin-top:2.5rem;color:var(--muted);font-size:.8rem}
@media (max-width:600px){body{font-size:14px}th,td{padding:.25rem .3rem}
  .facts{grid-template-columns:repeat(auto-fill,minmax(9rem,1fr))}}
@media print{main{max-width:none;padding:0}h2{break-after:avoid}details:not([open]){display:none}}
)css";

std::string rule_path(std::string_view rule) {
  return rule.empty() ? "-" : std::string(rule);
}

// <TAG data-metric="PATH" ATTRS>TEXT</TAG>; `attrs` is markup of ours.
std::string metric(std::string_view path, std::string_view text, std::string_view tag = "span",
                   std::string_view attrs = {}) {
  std::string out = "<" + std::string(tag) + " data-metric=\"" + escaped(path) + "\"" + std::string(attrs) + ">";
  append_escaped(out, text);
  return out + "</" + std::string(tag) + ">";
}
std::string count(std::string_view path, uint64_t v, std::string_view tag = "span", std::string_view attrs = {}) {
  return metric(path, std::to_string(v), tag, attrs);
}
std::string count_cell(std::string_view path, uint64_t v) {
  return count(path, v, "td", " class=\"n\"");
}
std::string when(std::string_view path, time::Nanos t) {
  const std::string iso = iso_time(t);
  return metric(path, iso, "time", " datetime=\"" + iso + "\"");
}
std::string swatch(const char* colour) {
  return "<span class=\"swatch\" style=\"background:" + std::string(colour) + "\"></span>";
}

std::string duration_text(time::Nanos ns) {
  constexpr time::Nanos kS = time::kNanosPerSecond;
  if (ns < 60 * kS) return html::decimal(static_cast<double>(ns) / kS, 3) + " s";
  const time::Nanos s = ns / kS;
  const std::string minutes = std::to_string(s / 60 % 60) + " min " + std::to_string(s % 60) + " s";
  return s < 3600 ? minutes : std::to_string(s / 3600) + " h " + minutes;
}

std::string keys_after(uint64_t n) {
  return n == 1 ? " key" : " keys";
}

std::string fact(std::string_view label, const std::string& value) {
  return "<div><dt>" + std::string(label) + "</dt><dd>" + value + "</dd></div>";
}

void head(std::string& out, const ReplayReport& r) {
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>sluice-replay: ";
  append_escaped(out, r.outcome.name.empty() ? r.outcome.policy : r.outcome.name);
  out += "</title><style>" + std::string(kStyle) + "</style></head><body><main>\n";
}

void inputs_table(std::string& out, const std::vector<InputSummary>& inputs) {
  out +=
      "<div class=\"scroll\"><table><thead><tr><th>Input</th><th>Format</th><th class=\"n\">Units read</th>"
      "<th class=\"n\">Records</th><th class=\"n\">Problems</th></tr></thead><tbody>";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSummary& in = inputs[i];
    const std::string p = "inputs." + std::to_string(i) + ".";
    out += "<tr>" + metric(p + "name", in.name, "td", " class=\"key\"") + metric(p + "format", in.format, "td") +
           count_cell(p + "units_read", in.units_read) + count_cell(p + "records", in.records) +
           count(p + "problems", in.problem_count, "td", in.problem_count ? " class=\"n warm\"" : " class=\"n\"") +
           "</tr>";
    if (in.problems.empty()) continue;
    out += "<tr><td colspan=\"5\"><details><summary>The first problems</summary><ol>";
    for (size_t j = 0; j < in.problems.size(); ++j) {
      out += metric(p + "first_problems." + std::to_string(j), in.problems[j].to_string(), "li", " class=\"key\"");
    }
    out += "</ol></details></td></tr>";
  }
  if (inputs.empty()) out += "<tr><td colspan=\"5\" class=\"none\">No input.</td></tr>";
  out += "</tbody></table></div>\n";
}

void header(std::string& out, const ReplayReport& r) {
  out += "<header><h1>sluice-replay report</h1><p>Policy " + metric("policy.file", r.outcome.policy, "code") +
         " (name " + metric("policy.name", r.outcome.name, "strong") + ") over " + std::to_string(r.inputs.size()) +
         " input(s).</p><dl class=\"facts\">" + fact("Records", count("records", r.records)) +
         fact("First record", when("first", r.first)) + fact("Last record", when("last", r.last)) +
         fact("Span", duration_text(r.last >= r.first ? r.last - r.first : 0)) +
         fact("Threads", count("threads", r.threads)) +
         fact("Credential digests keyed with",
              metric("credential_labels", r.credential_labels.empty() ? "" : r.credential_labels)) +
         fact("Records per second", metric("records_per_second", html::decimal(r.records_per_second, 0))) +
         fact("Opening inputs, reading captures", metric("load_seconds", html::decimal(r.load_seconds, 3)) + " s") +
         fact("Streaming logs and deciding", metric("decide_seconds", html::decimal(r.decide_seconds, 3)) + " s") + "</dl>\n";
  inputs_table(out, r.inputs);
  out += "</header>\n";
  if (r.records == 0) {
    out += "<p class=\"notice\">No records were found in the inputs: the policy decided nothing.</p>\n";
  }
}

std::string card(std::string_view label, const std::string& path, uint64_t v, bool refused = false) {
  return std::string("<div class=\"card") + (refused ? " refused" : "") + "\"><span class=\"label\">" +
         std::string(label) + "</span>" + count(path, v, "span", " class=\"value\"") + "</div>";
}

// What the replay lacked that the box may have had, one line each.
void warnings(std::string& out, const PolicyOutcome& o, std::string_view prefix) {
  if (o.warnings.empty()) return;
  out += "<ul class=\"notice\">";
  for (size_t i = 0; i < o.warnings.size(); ++i) {
    out += metric(std::string(prefix) + ".warnings." + std::to_string(i), o.warnings[i], "li");
  }
  out += "</ul>\n";
}

void totals(std::string& out, const PolicyOutcome& o) {
  out +=
      "<section id=\"totals\"><h2>Totals</h2><div class=\"cards\">" + card("Requests", "policy.requests", o.requests) +
      card("Forwarded (no rule applies)", "policy.forwarded", o.forwarded) + card("Exempt", "policy.exempt", o.exempt) +
      card("Admitted", "policy.admitted", o.admitted) + card("Refused", "policy.refused", o.refused, true) +
      card("Answered by a rule (401, 404)", "policy.answered", o.answered) +
      card("Unparsed heads (400, 431, 501, 505)", "policy.unparsed", o.unparsed) +
      card("Usage reports", "policy.usage_reports", o.usage_reports) + "</div>\n";
  warnings(out, o, "policy");
  out += "</section>\n";
}

void rules_table(std::string& out, const PolicyOutcome& o, std::string_view prefix, const html::RulePalette& pal) {
  out +=
      "<div class=\"scroll\"><table><thead><tr><th>Rule</th><th class=\"n\">Admitted</th>"
      "<th class=\"n\">Refused</th><th class=\"n\">Answered</th><th class=\"n\">Shadow refusals</th>"
      "<th class=\"n\">Admitted late (delay)</th><th class=\"n\">Held, s</th></tr></thead><tbody>";
  for (const RuleCounts& rc : o.rules) {
    const std::string p = std::string(prefix) + ".rules." + rule_path(rc.rule) + ".";
    out += "<tr><td class=\"rule\">" + swatch(pal.colour(rc.rule)) + escaped(rule_display(rc.rule)) + "</td>" +
           count_cell(p + "admitted", rc.admitted) +
           count(p + "refused", rc.refused, "td", rc.refused ? " class=\"n warm\"" : " class=\"n\"") +
           count_cell(p + "answered", rc.answered) + count_cell(p + "shadow_refused", rc.shadow_refused) +
           count_cell(p + "delayed", rc.delayed) +
           metric(p + "delay_seconds", html::decimal(static_cast<double>(rc.delay_total) / 1e9, 3), "td",
                  " class=\"n\"") +
           "</tr>";
  }
  if (o.rules.empty()) out += "<tr><td colspan=\"7\" class=\"none\">No rule counted anything.</td></tr>";
  out += "</tbody></table></div>\n";
}

void series_table(std::string& out, const TimeSeries& s) {
  out += "<details><summary>The plot's numbers</summary><div class=\"scroll\"><table><thead><tr><th>Bin (UTC)</th>";
  for (size_t i = 0; i < s.rules.size(); ++i) {
    out += metric("policy.series.rules." + std::to_string(i) + ".rule", s.rules[i].rule, "th", " colspan=\"2\"");
  }
  out += "</tr></thead><tbody>";
  size_t bins = 0;
  for (const TimeSeries::Rule& rule : s.rules) bins = std::max({bins, rule.requests.size(), rule.refused.size()});
  for (size_t j = 0; j < bins; ++j) {
    out += "<tr><td>" + html::utc_text(s.start + j * s.bin, "%Y-%m-%d %H:%M:%S.%L") + "</td>";
    for (size_t i = 0; i < s.rules.size(); ++i) {
      const std::string p = "policy.series.rules." + std::to_string(i) + ".";
      const auto& rule = s.rules[i];
      out +=
          (j < rule.requests.size() ? count_cell(p + "requests." + std::to_string(j), rule.requests[j]) : "<td></td>") +
          (j < rule.refused.size() ? count_cell(p + "refused." + std::to_string(j), rule.refused[j]) : "<td></td>");
    }
    out += "</tr>";
  }
  out += "</tbody></table></div></details>\n";
}

void series_section(std::string& out, const TimeSeries& s, const html::RulePalette& pal) {
  const std::string bins = "bins of " + metric("policy.series.bin_seconds", html::seconds_text(s.bin)) + " s from " +
                           when("policy.series.start", s.start);
  out += "<section id=\"over-time\"><h2>Requests and refusals over time</h2>";
  if (s.rules.empty()) {
    out += "<p class=\"none\">No rule decided any request (" + bins + ").</p></section>\n";
    return;
  }
  out += "<p>Per rule, in " + bins + "; the refused part of each bar is in the warm colour.</p>\n";
  for (const TimeSeries::Rule& rule : s.rules) {
    out += "<figure>" + html::series_plot(s, rule, pal.colour(rule.rule)) + "</figure>\n";
  }
  series_table(out, s);
  out += "</section>\n";
}

void rate_figure(std::string& out, const RateDistribution& rate, size_t i, const html::RulePalette& pal) {
  const std::string p = "policy.rates." + std::to_string(i) + ".";
  out += "<figure><figcaption>" + swatch(pal.colour(rate.rule)) + metric(p + "rule", rate.rule, "strong") +
         ", bucket " + metric(p + "bucket", rate.bucket, "code") + ": limit " + count(p + "limit", rate.limit) +
         " per " + metric(p + "period_seconds", html::seconds_text(rate.period)) + " s. " +
         count(p + "keys", rate.keys) + keys_after(rate.keys) + ", " +
         count(p + "keys_over", rate.keys_over, "span", " class=\"warm\"") + " over the limit (" +
         count(p + "keys_cut", rate.keys_cut) + " past " + html::decimal(RateDistribution::kMaxRatio, 1) +
         " times it, their peaks counted no further); the busiest at " +
         metric(p + "max_ratio", html::decimal(rate.max_ratio, 2)) + " times the limit (bins of " +
         metric(p + "bin_width", html::decimal(RateDistribution::kBinWidth, 1)) + ").</figcaption>" +
         html::rate_plot(rate, pal.colour(rate.rule)) +
         "<details><summary>The plot's numbers</summary><table><thead><tr><th>Busiest period / limit</th>"
         "<th class=\"n\">Keys</th></tr></thead><tbody>";
  for (size_t j = 0; j < rate.keys_by_ratio.size(); ++j) {
    const double low = static_cast<double>(j) * RateDistribution::kBinWidth;
    const bool last = j + 1 == rate.keys_by_ratio.size();
    out += "<tr><td>" + html::decimal(low, 1) +
           (last ? " and above" : " to " + html::decimal(low + RateDistribution::kBinWidth, 1)) + "</td>" +
           count_cell(p + "keys_by_ratio." + std::to_string(j), rate.keys_by_ratio[j]) + "</tr>";
  }
  out += "</tbody></table></details></figure>\n";
}

void rates_section(std::string& out, const std::vector<RateDistribution>& rates, const html::RulePalette& pal) {
  out +=
      "<section id=\"rates\"><h2>Keys' busiest periods against the limit</h2><p>For each rule, its keys by "
      "the most requests they sent in any stretch of the bucket's period, divided by the limit for that "
      "period; the dashed line is the limit.</p>\n";
  if (rates.empty()) out += "<p class=\"none\">No rule with a bucket decided any request.</p>\n";
  for (size_t i = 0; i < rates.size(); ++i) rate_figure(out, rates[i], i, pal);
  out += "</section>\n";
}

void refused_keys_table(std::string& out, const std::vector<RefusedKey>& keys) {
  out +=
      "<div class=\"scroll\"><table><thead><tr><th class=\"n\">#</th><th>Rule</th><th>Key</th>"
      "<th class=\"n\">Requests</th><th class=\"n\">Refused</th><th>First refusal</th><th>Last refusal</th>"
      "</tr></thead><tbody>";
  for (size_t i = 0; i < keys.size(); ++i) {
    const RefusedKey& k = keys[i];
    const std::string p = "policy.refused_keys." + std::to_string(i) + ".";
    out += "<tr><td class=\"n\">" + std::to_string(i + 1) + "</td>" + metric(p + "rule", k.rule, "td") +
           metric(p + "key", k.key, "td", " class=\"key\"") + count_cell(p + "requests", k.requests) +
           count(p + "refused", k.refused, "td", " class=\"n warm\" data-key=\"" + escaped(k.key) + "\"") + "<td>" +
           when(p + "first_refusal", k.first_refusal) + "</td><td>" + when(p + "last_refusal", k.last_refusal) +
           "</td></tr>";
  }
  out += "</tbody></table></div>\n";
}

void refused_keys_section(std::string& out, const PolicyOutcome& o, const html::RulePalette& pal) {
  out += "<section id=\"refused-keys\"><h2>Refused keys</h2><p>" +
         count("policy.refused_key_count", o.refused_key_count) + keys_after(o.refused_key_count) + " refused";
  if (o.refused_keys.empty()) {
    out += ".</p><p class=\"none\">No key was refused.</p></section>\n";
    return;
  }
  out += "; the " + std::to_string(o.refused_keys.size()) + " refused most often:</p><figure>" +
         html::top_keys_plot(o.refused_keys, pal) + "</figure>\n";
  refused_keys_table(out, o.refused_keys);
  out += "</section>\n";
}

void compare_totals(std::string& out, const PolicyOutcome& first, const PolicyOutcome& second) {
  out += "<div class=\"scroll\"><table><thead><tr><th></th><th class=\"n\">" + escaped(first.policy) +
         "</th><th class=\"n\">" + escaped(second.policy) + "</th></tr></thead><tbody>";
  const auto row = [&](std::string_view label, std::string_view name, uint64_t a, uint64_t b) {
    out += "<tr><th>" + std::string(label) + "</th><td class=\"n\">" + std::to_string(a) + "</td>" +
           count_cell("compare.policy." + std::string(name), b) + "</tr>";
  };
  row("Requests", "requests", first.requests, second.requests);
  row("Forwarded", "forwarded", first.forwarded, second.forwarded);
  row("Exempt", "exempt", first.exempt, second.exempt);
  row("Admitted", "admitted", first.admitted, second.admitted);
  row("Refused", "refused", first.refused, second.refused);
  row("Answered", "answered", first.answered, second.answered);
  row("Unparsed", "unparsed", first.unparsed, second.unparsed);
  row("Usage reports", "usage_reports", first.usage_reports, second.usage_reports);
  row("Refused keys", "refused_key_count", first.refused_key_count, second.refused_key_count);
  out += "</tbody></table></div>\n";
}

void differences(std::string& out, std::string_view which, const std::vector<Difference>& list, uint64_t keys,
                 const std::string& policy) {
  const std::string p = "compare." + std::string(which);
  out += "<h3>Refused only by " + escaped(policy) + "</h3><p>" + count(p + "_keys", keys) + keys_after(keys);
  if (list.empty()) {
    out += ".</p>\n";
    return;
  }
  out += "; the largest " + std::to_string(list.size()) +
         ":</p><div class=\"scroll\"><table><thead><tr><th>Key</th>"
         "<th>Rule</th><th class=\"n\">Requests</th><th>First</th></tr></thead><tbody>";
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string q = p + "." + std::to_string(i) + ".";
    out += "<tr>" + metric(q + "key", list[i].key, "td", " class=\"key\"") + metric(q + "rule", list[i].rule, "td") +
           count_cell(q + "requests", list[i].requests) + "<td>" + when(q + "first", list[i].first) + "</td></tr>";
  }
  out += "</tbody></table></div>\n";
}

void compare_section(std::string& out, const ReplayReport& r, const html::RulePalette& pal) {
  if (!r.comparison || !r.other) return;  // as the JSON: both or neither
  const Comparison& c = *r.comparison;
  const PolicyOutcome& other = *r.other;
  out += "<section id=\"compare\"><h2>Compared with " + metric("compare.policy.file", other.policy, "code") +
         " (name " + metric("compare.policy.name", other.name, "strong") +
         ")</h2><p>Requests refused or "
         "answered by one policy and let through by the other, on the same traffic.</p><div class=\"cards\">" +
         card("Refused by both", "compare.refused_by_both", c.refused_by_both) +
         card("Refused only by " + escaped(r.outcome.policy), "compare.refused_only_by_first", c.refused_only_by_first,
              true) +
         card("Refused only by " + escaped(other.policy), "compare.refused_only_by_second", c.refused_only_by_second,
              true) +
         card("Answered by both (401, 404)", "compare.answered_by_both", c.answered_by_both) +
         card("Answered only by " + escaped(r.outcome.policy), "compare.answered_only_by_first",
              c.answered_only_by_first) +
         card("Answered only by " + escaped(other.policy), "compare.answered_only_by_second",
              c.answered_only_by_second) +
         card("Unparsed by both (400, 431, 501, 505)", "compare.unparsed_by_both", c.unparsed_by_both) +
         card("Unparsed only by " + escaped(r.outcome.policy), "compare.unparsed_only_by_first",
              c.unparsed_only_by_first) +
         card("Unparsed only by " + escaped(other.policy), "compare.unparsed_only_by_second",
              c.unparsed_only_by_second) +
         "</div>\n<h3>Totals</h3>\n";
  compare_totals(out, r.outcome, other);
  warnings(out, other, "compare.policy");
  out += "<h3>Rules of " + escaped(other.policy) + "</h3>\n";
  rules_table(out, other, "compare.policy", pal);
  differences(out, "only_first", c.only_first, c.only_first_keys, r.outcome.policy);
  differences(out, "only_second", c.only_second, c.only_second_keys, other.policy);
  out += "</section>\n";
}

}  // namespace

std::string render_html(const ReplayReport& report) {
  const html::RulePalette palette(report.outcome.rules);
  std::string out;
  head(out, report);
  header(out, report);
  totals(out, report.outcome);
  out += "<section id=\"rules\"><h2>Per rule</h2>\n";
  rules_table(out, report.outcome, "policy", palette);
  out += "</section>\n";
  series_section(out, report.outcome.series, palette);
  rates_section(out, report.outcome.rates, palette);
  refused_keys_section(out, report.outcome, palette);
  compare_section(out, report, palette);
  out +=
      "<footer>Made by sluice-replay from recorded traffic, with the limiter's own decisions. Times are UTC."
      "</footer>\n</main></body></html>\n";
  return out;
}

}  // namespace sluice::replay
