// Decision time after parsing, per shipped profile, on a warm key; with 1
// thousand, 1 million and 10 million live keys (single decisions, and bursts
// of 32 planned, prefetched, then finished, as the data plane does); two
// threads on one hot key against distinct keys; and memory per live key.
#include <benchmark/benchmark.h>

#include <array>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "http/head_parser.h"
#include "http/http1_policy.h"
#include "http/limiter_request.h"
#include "limiter/decide.h"
#include "policy/policy_loader.h"

namespace {

using namespace sluice;
using namespace sluice::limiter;

constexpr time::Nanos kSec = time::kNanosPerSecond;
constexpr time::Nanos kT0 = 1'768'464'000ull * kSec;

KeyHasher fixed_hasher(uint8_t salt) {
  std::array<uint8_t, KeyHasher::kSecretSize> s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(i * 13 + salt);
  return KeyHasher(s);
}

// One profile, its tables, and parsed heads to decide on.
struct Setup {
  std::unique_ptr<http::Http1Policy> policy;
  std::unique_ptr<BucketTable> buckets, records;
  DigestMap runs{1024}, users{1024};
  KeyHasher bucket_hasher = fixed_hasher(1), credential_hasher = fixed_hasher(2);
  std::unique_ptr<LimiterState> state;
  std::unique_ptr<DecisionScratch> scratch = std::make_unique<DecisionScratch>();

  Setup(const std::string& profile, size_t capacity)
      : Setup(policy::load_policy_file(std::string(SLUICE_CONFIG_DIR) + "/" + profile), capacity) {}
  Setup(const policy::LoadResult& loaded, size_t capacity) {
    if (!loaded.policy) std::abort();
    std::vector<policy::PolicyError> errors;
    policy = std::make_unique<http::Http1Policy>(*http::compile_http1_policy(*loaded.policy, credential_hasher, errors));
    buckets = std::make_unique<BucketTable>(BucketTable::Options{
        .capacity = capacity, .regions = 64, .max_probe = 128,
        .bucket_kinds = static_cast<uint16_t>(policy->buckets.size())});
    records = std::make_unique<BucketTable>(BucketTable::Options{
        .capacity = 1 << 16, .regions = 16, .max_probe = 64, .bucket_kinds = 1,
        .words = std::max(2u, policy->max_slots)});
    state = std::make_unique<LimiterState>(LimiterState{*buckets, *records, runs, users, bucket_hasher, credential_hasher});
  }
};

// A parsed head that stays valid (it owns its bytes).
struct ParsedHead {
  std::string text;
  std::vector<http::FieldLine> store;
  std::vector<char> spill;
  std::unique_ptr<http::HeadParser> parser;

  ParsedHead(const http::FieldSet& fields, std::string t) : text(std::move(t)), spill(16384) {
    parser = std::make_unique<http::HeadParser>(fields, http::HeadLimits{}, store, spill);
    if (parser->feed(text).status != http::HeadStatus::kComplete) std::abort();
  }
  const http::RequestHead& head() const { return parser->head(); }
};

ConnectionFacts conn_from(uint32_t client) {
  ConnectionFacts c;
  c.peer = net::IpAddress::v4(0xc6120000u | (client & 0x1ffff));  // 198.18.0.0/15
  c.peer.bytes[12] ^= static_cast<uint8_t>(client >> 17);         // spread past /15 for large counts
  c.destination = net::IpAddress::v4(0xc6130001u);
  c.destination_port = 80;
  return c;
}

// One decision on a warm key: the credentialed class of three budgets (key
// from the credential digest, TB07 slot check), the bare class (client
// address), a live run; a route family's user; a deployment's minute window.
void BM_DecideWarmKey(benchmark::State& state) {
  static const std::array<std::pair<const char*, const char*>, 5> kCases = {{
      {"three-budgets.yaml", "POST /v1/chat HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer sk-proj-4f2a9c1e7b3d8e6f\r\nContent-Length: 0\r\n\r\n"},
      {"three-budgets.yaml", "GET /v1/things HTTP/1.1\r\nHost: api\r\n\r\n"},
      {"three-budgets.yaml", "POST /vrx/run-7f3a/v1/tap HTTP/1.1\r\nHost: api\r\n\r\n"},
      {"route-families.yaml", "GET /api/claims/7 HTTP/1.1\r\nHost: cloud\r\nAuthorization: Bearer alice-1\r\n\r\n"},
      {"deployment-quotas.yaml", "POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nX-Pi-Deployment: gpt-4o-mini-eu-1\r\n\r\n"},
  }};
  static const std::array<const char*, 5> kLabels = {"three-budgets credential", "three-budgets bare",
                                                     "three-budgets run", "route-families user",
                                                     "deployment-quotas window"};
  const auto& [profile, text] = kCases[static_cast<size_t>(state.range(0))];
  Setup s(profile, 1 << 16);
  s.runs.put(s.credential_hasher.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("run-7f3a"), 8)), 0);
  const char* alice = "bearer alice-1";
  s.users.put(s.credential_hasher.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(alice), 14)), 1);
  ParsedHead h(s.policy->fields, text);
  const ConnectionFacts conn = conn_from(7);
  time::Nanos now = kT0;
  for (auto _ : state) {
    const Decision d =
        decide(*s.policy, *s.state, http::limiter_request(h.head(), conn), now += 1'000'000'000, *s.scratch);
    benchmark::DoNotOptimize(d.verdict);
  }
  state.SetLabel(kLabels[static_cast<size_t>(state.range(0))]);
}
BENCHMARK(BM_DecideWarmKey)->DenseRange(0, 4)->ArgName("case");

// A policy of 64 routes (/svc0/* ... /svc63/*, each its own bucket) and a
// catch-all; a request for the last route, on a warm key: with the rules
// dispatched on the path's first segment, and with every rule tried in
// order (dispatch:0).
void BM_DecideManyRoutes(benchmark::State& state) {
  std::string text = "sluice: 1\nname: routes\nheader_style: seed\nservice_ports: [80]\nbuckets:\n";
  for (int i = 0; i < 64; ++i) text += "  b" + std::to_string(i) + ": { rate: 6000/min, burst: 6000 }\n";
  text += "  rest: { rate: 6000/min, burst: 6000 }\nrules:\n";
  for (int i = 0; i < 64; ++i) {
    text += "  - name: r" + std::to_string(i) + "\n    path: \"/svc" + std::to_string(i) +
            "/*\"\n    key: client_ip\n    bucket: b" + std::to_string(i) + "\n";
  }
  text += "  - name: rest\n    key: client_ip\n    bucket: rest\n";
  Setup s(policy::load_policy_text(text, "routes.yaml"), 1 << 16);
  if (state.range(0) == 0) {
    std::vector<const std::vector<policy::PathPattern>*> patterns;
    for (const CompiledRule& r : s.policy->rules) patterns.push_back(&r.paths);
    s.policy->dispatch.build(patterns, SIZE_MAX);
  }
  ParsedHead h(s.policy->fields, "GET /svc63/items/7 HTTP/1.1\r\nHost: api\r\n\r\n");
  const ConnectionFacts conn = conn_from(7);
  time::Nanos now = kT0;
  for (auto _ : state) {
    const Decision d =
        decide(*s.policy, *s.state, http::limiter_request(h.head(), conn), now += 1'000'000, *s.scratch);
    benchmark::DoNotOptimize(d.verdict);
  }
  state.SetLabel(state.range(0) ? "65 rules, dispatched" : "65 rules, each tried");
}
BENCHMARK(BM_DecideManyRoutes)->Arg(1)->Arg(0)->ArgName("dispatch");

// The bare class across `live` client addresses, all in the table: single
// decisions on random clients, and bursts of 32.
Setup& bare_setup(size_t live) {
  static std::array<std::unique_ptr<Setup>, 3> setups;
  const size_t i = live <= 1000 ? 0 : live <= 1'000'000 ? 1 : 2;
  if (!setups[i]) {
    setups[i] = std::make_unique<Setup>("three-budgets.yaml", live * 8 / 5);
    ParsedHead h(setups[i]->policy->fields, "GET /v1/things HTTP/1.1\r\nHost: api\r\n\r\n");
    for (uint32_t c = 0; c < live; ++c) {
      (void)decide(*setups[i]->policy, *setups[i]->state, http::limiter_request(h.head(), conn_from(c)), kT0,
                   *setups[i]->scratch);
    }
  }
  return *setups[i];
}

void BM_DecideLiveKeys(benchmark::State& state) {
  const size_t live = static_cast<size_t>(state.range(0));
  const bool burst = state.range(1) != 0;
  Setup& s = bare_setup(live);
  ParsedHead h(s.policy->fields, "GET /v1/things HTTP/1.1\r\nHost: api\r\n\r\n");
  std::mt19937 rng(9);
  std::vector<ConnectionFacts> conns(1 << 16);
  for (auto& c : conns) c = conn_from(static_cast<uint32_t>(rng() % live));
  size_t i = 0;
  time::Nanos now = kT0 + 120 * kSec;
  std::array<Plan, 32> plans;
  std::array<Request, 32> requests;  // a plan refers to its request until finished
  for (auto _ : state) {
    if (!burst) {
      benchmark::DoNotOptimize(
          decide(*s.policy, *s.state, http::limiter_request(h.head(), conns[i++ & 0xffff]), now += 1000, *s.scratch)
              .verdict);
      continue;
    }
    for (size_t k = 0; k < plans.size(); ++k) {
      requests[k] = http::limiter_request(h.head(), conns[i++ & 0xffff]);
      plans[k] = plan(*s.policy, *s.state, requests[k], now, *s.scratch);
    }
    for (const Plan& p : plans) prefetch(*s.state, p);
    for (Plan& p : plans) benchmark::DoNotOptimize(finish(*s.policy, *s.state, p, now += 1000, *s.scratch).verdict);
  }
  const int64_t decisions = static_cast<int64_t>(state.iterations()) * (burst ? 32 : 1);
  state.SetItemsProcessed(decisions);
  state.counters["ns_per_decision"] = benchmark::Counter(static_cast<double>(decisions),
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["bytes_per_key"] = static_cast<double>(s.buckets->memory_bytes()) / static_cast<double>(live);
  state.SetLabel(burst ? "bursts of 32" : "one at a time");
}
BENCHMARK(BM_DecideLiveKeys)
    ->Args({1000, 0})->Args({1000, 1})->Args({1'000'000, 0})->Args({1'000'000, 1})
    ->Args({10'000'000, 0})->Args({10'000'000, 1})
    ->ArgNames({"live", "burst"})->UseRealTime();

// Two workers deciding at once: on one client (one bucket, its cache line
// moving between the cores) and on a client each.
void BM_DecideTwoThreads(benchmark::State& state) {
  static Setup s("three-budgets.yaml", 1 << 16);
  static const http::FieldSet& fields = s.policy->fields;
  ParsedHead h(fields, "GET /v1/things HTTP/1.1\r\nHost: api\r\n\r\n");
  DecisionScratch* scratch = new DecisionScratch;
  const bool same = state.range(0) != 0;
  const ConnectionFacts conn = conn_from(same ? 5 : 5 + static_cast<uint32_t>(state.thread_index()));
  time::Nanos now = kT0;
  const Request request = http::limiter_request(h.head(), conn);
  for (auto _ : state) {
    benchmark::DoNotOptimize(decide(*s.policy, *s.state, request, now += 1'000'000'000, *scratch).verdict);
  }
  delete scratch;
  state.SetLabel(same ? "one hot key" : "a key each");
}
BENCHMARK(BM_DecideTwoThreads)->Arg(1)->Arg(0)->ArgName("same_key")->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
