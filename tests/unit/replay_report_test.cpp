// sluice-replay's HTML page (replay/report_html.h): every value of the JSON
// report is on the page under its data-metric path and equal to it, nothing
// on the page refers to anything outside it, text that came from traffic is
// escaped, an empty report is still a page that says so, and the plots'
// coordinates stay finite however thin the data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "control/json.h"
#include "replay/report_html.h"
#include "replay/report_json.h"

namespace sluice::replay {
namespace {

constexpr time::Nanos kS = time::kNanosPerSecond;
constexpr time::Nanos kStart = 1'796'219'700 * kS;  // 2026-12-02T13:55:00Z
const std::string kScriptKey = "\"><script>alert(1)</script>";

PolicyOutcome sample_outcome(std::string file, std::string name, uint64_t scale) {
  PolicyOutcome o{.policy = std::move(file), .name = std::move(name)};
  o.rules = {{"per-ip", 700 * scale, 90 * scale, 3, 0}, {"per-user", 400, 40 * scale, 0, 5}, {"", 60, 0, 5, 0}};
  for (const RuleCounts& r : o.rules) o.admitted += r.admitted, o.refused += r.refused, o.answered += r.answered;
  o.forwarded = 50, o.exempt = 10, o.usage_reports = 7;
  o.requests = o.admitted + o.refused + o.answered + o.forwarded + o.exempt;
  o.refused_keys = {{"per-ip", "198.18.0.40", 300, 60, kStart + 2 * kS, kStart + 59 * kS},
                    {"per-user", kScriptKey, 90, 25, kStart + 5 * kS + 123'456'789, kStart + 40 * kS},
                    {"per-ip", "2001:db8::1:7", 80, 20, kStart + 7 * kS, kStart + 30 * kS},
                    {"per-user", "user caf\xC3\xA9 \xE2\x82", 40, 15, kStart + 9 * kS, kStart + 20 * kS},
                    {"per-ip", "198.18.0.41", 30, 10, kStart + 11 * kS, kStart + 12 * kS}};
  o.refused_key_count = 12;
  o.series = {.start = kStart, .bin = kS, .rules = {{"per-ip", {}, {}}, {"per-user", {}, {}}}};
  for (uint64_t i = 0; i < 60; ++i) {
    o.series.rules[0].requests.push_back(10 + i % 7), o.series.rules[0].refused.push_back(i % 5 == 0 ? 3 : 0);
    o.series.rules[1].requests.push_back(i % 3), o.series.rules[1].refused.push_back(i == 30 ? 2 : 0);
  }
  RateDistribution rate{.rule = "per-ip", .bucket = "bare", .limit = 60, .period = 60 * kS};
  rate.keys_by_ratio.assign(31, 0);
  rate.keys_by_ratio[2] = 40, rate.keys_by_ratio[9] = 7, rate.keys_by_ratio[10] = 2, rate.keys_by_ratio[30] = 1;
  rate.keys = 50, rate.keys_over = 3, rate.max_ratio = 4.25;
  o.rates = {rate};
  rate.rule = "per-user", rate.bucket = "credential", rate.limit = 4, rate.period = kS / 4, rate.max_ratio = 1.5;
  o.rates.push_back(rate);
  return o;
}

ReplayReport sample_report() {
  ReplayReport r;
  r.inputs = {{"day1.pcap", "pcap", 1200, 900, 2, {{"day1.pcap: packet 17", "truncated"}, {"x.log:3:9", "<bad>"}}},
              {"access.log", "nginx", 400, 398, 0, {}}};
  r.records = 1298, r.first = kStart, r.last = kStart + 59 * kS + 500'000'000, r.threads = 2;
  r.load_seconds = 0.125, r.decide_seconds = 0.25, r.records_per_second = 3461.33;
  r.outcome = sample_outcome("three-budgets.yaml", "three-budgets", 1);
  r.other = sample_outcome("looser.yaml", "looser", 2);
  r.comparison = Comparison{
      .refused_by_both = 120,
      .refused_only_by_first = 10,
      .refused_only_by_second = 140,
      .only_first = {{"bad \xC0\xAF \xED\xA0\x80 \xF4\x90\x80\x80 \xE2\x82Z \xFF", "per-ip", 10, kStart + 3 * kS}},
      .only_second = {{kScriptKey, "per-user", 100, kStart + 4 * kS}, {"a&b", "per-ip", 40, kStart}},
      .only_first_keys = 1,
      .only_second_keys = 9};
  return r;
}

std::string unescaped(std::string s) {
  for (const auto& [ref, c] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
    for (size_t at = s.find(ref); at != std::string::npos; at = s.find(ref, at + c.size()))
      s.replace(at, ref.size(), c);
  }
  return s;
}

// The page's data-metric elements, PATH -> text; a path twice is a failure.
std::map<std::string, std::string> page_metrics(const std::string& page) {
  static const std::regex kMetric(R"re(data-metric="([^"]*)"[^>]*>([^<]*)<)re");
  std::map<std::string, std::string> out;
  for (std::sregex_iterator it(page.begin(), page.end(), kMetric), end; it != end; ++it) {
    const bool fresh = out.emplace(unescaped((*it)[1]), unescaped((*it)[2])).second;
    EXPECT_TRUE(fresh) << "data-metric twice: " << (*it)[1];
  }
  return out;
}

// The JSON report's values by the page's paths: arrays by index, a policy's
// rules by rule ("" as "-"); without what the page leaves out (the
// --compare policy's keys, series and rates).
void flatten(const control::Json& j, const std::string& path, std::map<std::string, control::Json>& out) {
  for (const char* left_out : {"compare.policy.refused_keys", "compare.policy.series", "compare.policy.rates"}) {
    if (path == left_out) return;
  }
  const std::string prefix = path.empty() ? "" : path + ".";
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix + k, out);
  } else if (j.is_array() && (path == "policy.rules" || path == "compare.policy.rules")) {
    for (control::Json rule : j) {
      const std::string name = rule["rule"].get<std::string>();
      rule.erase("rule");
      flatten(rule, prefix + (name.empty() ? "-" : name), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) flatten(j[i], prefix + std::to_string(i), out);
  } else {
    out[path] = j;
  }
}

// Every JSON value on the page and equal; nothing on the page the JSON lacks.
void expect_page_equals_json(const ReplayReport& report) {
  const std::map<std::string, std::string> page = page_metrics(render_html(report));
  std::string error;
  const auto json = control::parse_json(render_json(report), error);
  ASSERT_TRUE(json) << error;
  std::map<std::string, control::Json> want;
  flatten(*json, "", want);
  for (const auto& [path, value] : want) {
    const auto it = page.find(path);
    if (it == page.end()) {
      ADD_FAILURE() << "not on the page: " << path;
    } else if (value.is_string()) {
      EXPECT_EQ(it->second, value.get<std::string>()) << path;
    } else if (value.is_number_float()) {
      const size_t point = it->second.find('.');
      const int decimals = point == std::string::npos ? 0 : static_cast<int>(it->second.size() - point - 1);
      EXPECT_NEAR(std::stod(it->second), value.get<double>(), 0.5 * std::pow(10.0, -decimals) + 1e-9) << path;
    } else {
      EXPECT_EQ(it->second, value.dump()) << path;
    }
  }
  for (const auto& [path, text] : page) EXPECT_TRUE(want.contains(path)) << "not in the JSON: " << path;
  EXPECT_GT(want.size(), 10u);
}

// Start and end tags nest; `>` or `<` in text or attributes would break it.
void expect_balanced(const std::string& page) {
  static const std::regex kTag(R"re(<(/?)([a-zA-Z][a-zA-Z0-9]*)((?:\s[^<>]*?)?)(/?)>)re");
  std::vector<std::string> open;
  for (std::sregex_iterator it(page.begin(), page.end(), kTag), end; it != end; ++it) {
    const std::string name = (*it)[2];
    if ((*it)[4] == "/" || name == "meta") continue;
    if ((*it)[1] == "/") {
      ASSERT_FALSE(open.empty()) << "</" << name << "> closes nothing";
      ASSERT_EQ(open.back(), name);
      open.pop_back();
    } else {
      open.push_back(name);
    }
  }
  EXPECT_TRUE(open.empty()) << open.size() << " elements left open, the last <" << open.back() << ">";
}

TEST(ReplayHtml, MetricsEqualTheJsonReport) {
  expect_page_equals_json(sample_report());
  ReplayReport without_compare = sample_report();
  without_compare.comparison.reset(), without_compare.other.reset();
  expect_page_equals_json(without_compare);
  expect_page_equals_json(ReplayReport{});
}

TEST(ReplayHtml, CarriesTheSummaryNumbers) {
  const std::string page = render_html(sample_report());
  const auto m = page_metrics(page);
  EXPECT_EQ(m.at("records"), "1298");
  EXPECT_EQ(m.at("first"), "2026-12-02T13:55:00.000Z");
  EXPECT_EQ(m.at("inputs.0.records"), "900");
  EXPECT_EQ(m.at("inputs.0.problems"), "2");
  EXPECT_EQ(m.at("inputs.0.first_problems.1"), "x.log:3:9: <bad>");
  EXPECT_EQ(m.at("policy.requests"), "1358");
  EXPECT_EQ(m.at("policy.refused"), "130");
  EXPECT_EQ(m.at("policy.rules.per-ip.refused"), "90");
  EXPECT_EQ(m.at("policy.rules.-.answered"), "5");
  EXPECT_EQ(m.at("policy.refused_keys.1.key"), kScriptKey);
  EXPECT_EQ(m.at("policy.refused_keys.1.refused"), "25");
  EXPECT_EQ(m.at("policy.refused_keys.1.first_refusal"), "2026-12-02T13:55:05.123Z");
  EXPECT_EQ(m.at("policy.series.rules.0.refused.55"), "3");
  EXPECT_EQ(m.at("policy.rates.1.period_seconds"), "0.25");
  EXPECT_EQ(m.at("compare.refused_only_by_first"), "10");
  EXPECT_EQ(m.at("compare.policy.refused"), "260");
  EXPECT_EQ(m.at("compare.policy.rules.per-ip.refused"), "180");
  EXPECT_EQ(m.at("compare.only_second.1.key"), "a&b");
  EXPECT_NE(page.find("data-key=\"&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;\">25<"), std::string::npos);
  // A minute in bins of a second: ticks every 10 s; the limit marked.
  EXPECT_NE(page.find(">13:55:10</text>"), std::string::npos);
  EXPECT_NE(page.find("class=\"limit\""), std::string::npos);
  expect_balanced(page);
}

TEST(ReplayHtml, RefersToNothingOutsideThePage) {
  const std::string page = render_html(sample_report());
  for (const char* outside : {"http:", "https:", "//", "src=", "href=", "url(", "@import", "@font-face", "<script",
                              "<link", "<img", "<iframe"}) {
    EXPECT_EQ(page.find(outside), std::string::npos) << outside;
  }
}

TEST(ReplayHtml, EscapesTextThatCameFromTraffic) {
  ReplayReport r = sample_report();
  r.outcome.policy = "<b>p'\".yaml";
  r.outcome.rules[0].rule = "<svg onload=x>";
  r.outcome.series.rules[0].rule = r.outcome.rules[0].rule;
  r.outcome.rates[0].rule = r.outcome.rules[0].rule;
  r.outcome.refused_keys[0].rule = r.outcome.rules[0].rule;
  r.outcome.refused_keys[2].key = std::string("ctl\x01\x7F\x00z", 7) + "\xFF";
  r.inputs[0].name = "</td><script>";
  const std::string page = render_html(r);
  std::string lower = page;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("<svg onload"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_NE(page.find("&lt;svg onload=x&gt;: requests</text>"), std::string::npos) << "escaped in SVG text too";
  EXPECT_NE(page.find("&lt;b&gt;p&#39;&quot;.yaml"), std::string::npos);
  const auto m = page_metrics(page);
  EXPECT_EQ(m.at("policy.refused_keys.2.key"), "ctl\uFFFD\uFFFD\uFFFDz\uFFFD");
  EXPECT_EQ(m.at("policy.rules.<svg onload=x>.refused"), "90");
  expect_balanced(page);
}

TEST(ReplayHtml, EmptyReportIsAPageThatSaysSo) {
  const std::string page = render_html(ReplayReport{});
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("No records were found"), std::string::npos);
  EXPECT_NE(page.find("No rule decided any request"), std::string::npos);
  EXPECT_NE(page.find("No key was refused"), std::string::npos);
  EXPECT_EQ(page.find("<svg"), std::string::npos);
  const auto m = page_metrics(page);
  EXPECT_EQ(m.at("records"), "0");
  EXPECT_EQ(m.at("policy.refused"), "0");
  expect_balanced(page);
}

// Every number in an SVG geometry attribute, finite and not negative.
void expect_finite_geometry(const std::string& page) {
  static const std::regex kGeometry(R"re(\s(x|y|x1|x2|y1|y2|width|height|viewBox)="([^"]*)")re");
  size_t seen = 0;
  for (std::sregex_iterator it(page.begin(), page.end(), kGeometry), end; it != end; ++it, ++seen) {
    const std::string value = (*it)[2];
    EXPECT_TRUE(std::regex_match(value, std::regex(R"(\d+(\.\d+)?( \d+(\.\d+)?)*)"))) << (*it)[0];
  }
  EXPECT_GT(seen, 20u);
}

TEST(ReplayHtml, PlotsStayFiniteOnThinData) {
  ReplayReport r = sample_report();
  r.outcome.series.rules[0].requests = {0}, r.outcome.series.rules[0].refused = {0};  // one bin, zero
  r.outcome.series.rules[1].requests.clear(), r.outcome.series.rules[1].refused.clear();
  r.outcome.series.bin = 0;
  r.outcome.rates[0].keys_by_ratio.assign(31, 0);
  r.outcome.rates[1].keys_by_ratio.clear();
  r.outcome.rates[1].max_ratio = std::nan("");
  for (RefusedKey& k : r.outcome.refused_keys) k.refused = 0;
  const std::string page = render_html(r);
  expect_finite_geometry(page);
  expect_balanced(page);
  expect_finite_geometry(render_html(sample_report()));
}

// Not a check: with SLUICE_REPLAY_HTML_OUT=DIR, writes the sample's and an
// empty report's page and JSON (DIR/sample.html, sample.json, empty.html,
// empty.json) for tests/integration/replay_html_check.py.
TEST(ReplayHtml, WritesPagesForTheBrowserCheck) {
  const char* dir = std::getenv("SLUICE_REPLAY_HTML_OUT");
  if (dir == nullptr) GTEST_SKIP() << "SLUICE_REPLAY_HTML_OUT not set";
  for (const auto& [name, report] : {std::pair{"sample", sample_report()}, std::pair{"empty", ReplayReport{}}}) {
    const std::string base = std::string(dir) + "/" + name;
    std::ofstream(base + ".html") << render_html(report);
    std::ofstream(base + ".json") << render_json(report) << "\n";
    EXPECT_TRUE(std::ifstream(base + ".json").good()) << base;
  }
}

}  // namespace
}  // namespace sluice::replay
