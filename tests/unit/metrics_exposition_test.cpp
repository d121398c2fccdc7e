// sluiced's Prometheus exposition (src/sluiced_metrics.*) rendered from a
// hand-made sample (no EAL, no port): promtool accepts it, each family comes
// once with its samples together, every worker counter is a sample of its
// own, the request verdicts add up to the heads parsed without counting one
// twice, label values are escaped; and every metric the Grafana dashboard
// (contrib/grafana/sluice.json) queries is one the exposition has.
#include <gtest/gtest.h>

#include <cstdio>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "scratch_dir.h"
#include "src/sluiced_metrics.h"

namespace sluice::sluiced {
namespace {

using dataplane::kCounterExposition;
using dataplane::kCounterMembers;

constexpr size_t kWorkers = 2;

struct Sample {
  std::string name, labels, value;
};

struct Parsed {
  std::vector<std::string> families;  // in the order of their TYPE lines
  std::map<std::string, std::string> types;
  std::vector<Sample> samples;
  std::vector<std::string> problems;  // what breaks the grouping
};

// A metric's family as the 0.0.4 text format names it: counters and
// gauges have no suffixes of their own, so the sample's name is the family's.
Parsed parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string line, help_of, current;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      help_of = line.substr(7, line.find(' ', 7) - 7);
      if (p.types.count(help_of) != 0) p.problems.push_back("family again: " + help_of);
      current.clear();
    } else if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      if (name != help_of) p.problems.push_back("TYPE without its HELP just before: " + name);
      p.families.push_back(name);
      p.types[name] = type;
      current = name;
      help_of.clear();
    } else {
      const size_t brace = line.find('{');
      const size_t space = line.rfind(' ');
      Sample s;
      s.name = line.substr(0, std::min(brace, space));
      if (brace != std::string::npos) s.labels = line.substr(brace + 1, line.rfind('}') - brace - 1);
      s.value = line.substr(space + 1);
      if (s.name != current) p.problems.push_back("sample outside its family: " + line);
      p.samples.push_back(s);
    }
  }
  return p;
}

uint64_t sum_of(const Parsed& p, const std::string& family) {
  uint64_t n = 0;
  for (const Sample& s : p.samples) {
    if (s.name == family) n += std::stoull(s.value);
  }
  return n;
}

class MetricsExposition : public ::testing::Test {
 protected:
  MetricsExposition() : workers_(kWorkers) {
    // Every counter a value of its own on each worker, so a counter shown
    // in another's place, or not at all, is seen.
    for (size_t w = 0; w < kWorkers; ++w) {
      for (size_t c = 0; c < std::size(kCounterMembers); ++c) (workers_[w].*kCounterMembers[c]).add(value(w, c));
      workers_[w].flows_active.store(10 + w);
    }
    s_.version = "0.1.0";
    s_.dpdk_version = "22.11.5";
    s_.start_time_seconds = 1'700'000'000;
    s_.workers = std::span<const dataplane::WorkerCounters>(workers_.data(), workers_.size());
    s_.rules = {{"bare", 0}, {"credential:main", 1}};
    s_.tables = {{"buckets", 12, 1024, 3, 7}, {"credential_slots", 1, 64, 0, 0}};
    s_.runs_live = 2;
    s_.credentials = 5;
    s_.ports[0] = PortCounts{100, 90, 64000, 60000, 1, 0, 0, 2};
    ClusterSample c;
    c.syncs_ok = 40, c.syncs_failed = 1, c.sync_us_total = 1'500'000, c.last_sync_us = 250;
    c.keys_learned = 17, c.keys_reseeded = 5, c.round_trips = 39;
    c.replication = ClusterSample::Replication{3, 4, 0, 0};
    s_.cluster = c;
    s_.policy_name = "three-budgets";
    s_.policy_generation = 2;
    s_.snapshots_held = 1;
  }
  static uint64_t value(size_t worker, size_t counter) { return 1000 * (worker + 1) + counter; }

  std::vector<dataplane::WorkerCounters> workers_;
  MetricsSample s_;
};

TEST_F(MetricsExposition, PromtoolAcceptsIt) {
  const char* promtool = "/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) GTEST_SKIP() << "no " << promtool << " (Debian's prometheus package)";
  test::ScratchDir dir("sluice-metrics");
  const std::string in = dir.path() + "/metrics.txt", out = dir.path() + "/promtool.txt";
  std::ofstream(in) << render_metrics(s_);
  const int status = std::system((std::string(promtool) + " check metrics <" + in + " >" + out + " 2>&1").c_str());
  std::stringstream said;
  said << std::ifstream(out).rdbuf();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << said.str();
  EXPECT_EQ(said.str(), "");
}

TEST_F(MetricsExposition, EachFamilyOnceItsSamplesTogether) {
  const Parsed p = parse(render_metrics(s_));
  EXPECT_EQ(p.problems, std::vector<std::string>{});
  EXPECT_EQ(std::set<std::string>(p.families.begin(), p.families.end()).size(), p.families.size());
  for (const auto& [name, type] : p.types) {
    const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(type, total ? "counter" : "gauge") << name;
  }
  // The families by Prometheus's conventions.
  for (const char* f : {"sluice_build_info", "sluice_start_time_seconds", "sluice_requests_total",
                        "sluice_frames_total", "sluice_frames_dropped_total", "sluice_evictions_total",
                        "sluice_port_packets_total", "sluice_port_bytes_total", "sluice_table_entries",
                        "sluice_cluster_sync_seconds_total"}) {
    EXPECT_EQ(p.types.count(f), 1u) << f;
  }
}

TEST_F(MetricsExposition, EveryWorkerCounterIsASampleOfItsOwn) {
  const Parsed p = parse(render_metrics(s_));
  std::map<std::string, std::string> series;  // name{labels} -> value
  for (const Sample& s : p.samples) {
    EXPECT_TRUE(series.emplace(s.name + "{" + s.labels + "}", s.value).second) << "twice: " << s.name << "{" << s.labels << "}";
  }
  for (size_t c = 0; c < std::size(kCounterExposition); ++c) {
    const dataplane::CounterExposition& row = kCounterExposition[c];
    if (row.per_rule != nullptr) continue;  // below
    for (size_t w = 0; w < kWorkers; ++w) {
      std::string labels = "worker=\"" + std::to_string(w) + "\"";
      if (!row.labels.empty()) labels += "," + std::string(row.labels);
      const auto it = series.find(std::string(row.family) + "{" + labels + "}");
      ASSERT_NE(it, series.end()) << row.counter << ": no " << row.family << "{" << labels << "}";
      const uint64_t v = value(w, c);
      char micros[32];
      std::snprintf(micros, sizeof micros, "%llu.%06llu", static_cast<unsigned long long>(v / 1'000'000),
                    static_cast<unsigned long long>(v % 1'000'000));
      EXPECT_EQ(it->second, row.micros ? std::string(micros) : std::to_string(v)) << row.counter;
    }
  }
}

// Each head is counted once under one verdict: admitted and refused under
// their rule (the per-rule counters), the rest under rule="". The verdicts'
// sum is then the heads parsed, and answers a rule gave are not counted again.
TEST_F(MetricsExposition, VerdictsAddUpToTheHeadsParsed) {
  std::vector<dataplane::WorkerCounters> workers(1);
  dataplane::WorkerCounters& w = workers[0];
  w.forwarded.add(4), w.exempt.add(3), w.answered.add(2);
  w.rules[0].admitted.add(20), w.rules[0].refused.add(5), w.rules[1].admitted.add(7), w.rules[1].answered.add(1);
  w.admitted.add(27), w.refused.add(5), w.requests.add(4 + 3 + 2 + 27 + 5);
  s_.workers = std::span<const dataplane::WorkerCounters>(workers.data(), workers.size());
  const Parsed p = parse(render_metrics(s_));
  EXPECT_EQ(sum_of(p, "sluice_requests_total"), 41u);
  EXPECT_EQ(sum_of(p, "sluice_request_heads_total"), 41u);
  std::map<std::string, std::string> requests;
  for (const Sample& s : p.samples) {
    if (s.name == "sluice_requests_total") requests[s.labels] = s.value;
  }
  EXPECT_EQ(requests[R"(worker="0",verdict="refused",rule="bare")"], "5");
  EXPECT_EQ(requests[R"(worker="0",verdict="admitted",rule="credential:main")"], "7");
  EXPECT_EQ(requests[R"(worker="0",verdict="answered",rule="")"], "2");
  EXPECT_EQ(sum_of(p, "sluice_rule_answers_total"), 1u);
}

TEST_F(MetricsExposition, LabelValuesEscapedUnitsInSeconds) {
  s_.policy_name = "a\"b\\c\nd";
  const std::string text = render_metrics(s_);
  EXPECT_NE(text.find("sluice_policy_generation{policy=\"a\\\"b\\\\c\\nd\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_build_info{version=\"0.1.0\",dpdk_version=\"22.11.5\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_cluster_sync_seconds_total 1.500000\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_cluster_last_sync_seconds 0.000250\n"), std::string::npos);
  // What the change logs brought, and what the sync cost Redis in calls.
  EXPECT_NE(text.find("sluice_cluster_keys_total{op=\"learned\"} 17\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_cluster_keys_total{op=\"reseeded\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_cluster_round_trips_total 39\n"), std::string::npos);
  EXPECT_NE(text.find("sluice_port_bytes_total{port=\"client\",direction=\"rx\"} 64000\n"), std::string::npos);
}

// A family with nothing to show (no cluster, no port counts) is left out,
// HELP and TYPE included.
TEST_F(MetricsExposition, NoEmptyFamilies) {
  s_.cluster.reset();
  s_.ports = {};
  const Parsed p = parse(render_metrics(s_));
  EXPECT_EQ(p.problems, std::vector<std::string>{});
  for (const std::string& f : p.families) {
    EXPECT_EQ(f.rfind("sluice_cluster_", 0), std::string::npos) << f;
    EXPECT_EQ(f.rfind("sluice_port_", 0), std::string::npos) << f;
  }
}

void collect_exprs(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [key, v] : j.items()) {
      if ((key == "expr" || key == "query") && v.is_string()) out.push_back(v.get<std::string>());
      else collect_exprs(v, out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collect_exprs(v, out);
  }
}

TEST_F(MetricsExposition, TheDashboardQueriesOnlyWhatIsExposed) {
  std::ifstream file(SLUICE_DASHBOARD);
  ASSERT_TRUE(file) << SLUICE_DASHBOARD;
  const nlohmann::json dash = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dash.is_discarded()) << SLUICE_DASHBOARD << " is not JSON";
  std::vector<std::string> exprs;
  collect_exprs(dash, exprs);
  ASSERT_GE(exprs.size(), 8u);
  const Parsed p = parse(render_metrics(s_));
  const std::regex metric("sluice_[a-z0-9_]+");
  for (const std::string& e : exprs) {
    for (auto m = std::sregex_iterator(e.begin(), e.end(), metric); m != std::sregex_iterator(); ++m) {
      EXPECT_EQ(p.types.count(m->str()), 1u) << m->str() << " in " << e;
    }
  }
  EXPECT_EQ(dash["__inputs"][0]["name"], "DS_PROMETHEUS");
}

}  // namespace
}  // namespace sluice::sluiced
