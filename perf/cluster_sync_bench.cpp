// What cluster budgets (issue 17) cost: the Redis side of a sync, against a
// redis-server this program starts itself (Debian's, on a Unix socket in a
// fresh directory, no persistence; killed by its PID at exit, and made to die
// with this process if it crashes: perf/redis_for_bench.h), and the worker's
// side, the spend log.
//
//   BM_GcraApply/N          one ClusterGcra::apply (one EVALSHA) of N keys in
//                           one hash tag, each spending: round trip + script
//   BM_GcraRead/N           the same with spend 0: watched keys' reads
//   BM_ClusterSync/K        one ClusterSync::sync of K keys over the 16 hash-tag
//                           groups, published into a real BucketTable
//   BM_GcraApplyCluster/N   BM_GcraApply against a 3-primary Redis Cluster on
//   BM_ClusterSyncCluster/K 127.0.0.1 (TCP, slot routing), started on first use
//   BM_SpendLogRecord/KEYS  SpendLog::record: what a worker adds per admitted
//                           request on a cluster bucket (1: one hot key)
//   BM_SpendLogTurnOver/KEYS  flip + drain of a half holding KEYS keys (single
//                           thread: the RCU wait between them is not measured)
//
// Counters (all survive --benchmark_repetitions, aggregated like the times):
//   items_per_second   keys (key-spends or reads) per second, wall clock
//   us_per_key         wall-clock microseconds per key
//   us_per_batch       wall-clock microseconds per apply (one round trip)
//   ms_per_sync        wall-clock milliseconds per ClusterSync::sync
//   round_trips        EVALSHA calls per sync, as Redis counted them (16 at most)
//   script_us_per_key  EVALSHA's own time per key on the server (INFO commandstats):
//                      the script alone, without reading and parsing the request
//   redis_cpu_us_per_key  the redis-server main thread's CPU time per key
//                      (/proc/PID/schedstat): everything Redis spent, I/O included
//   published          local TATs moved forward per sync (sanity: about K)
// The Redis benchmarks use real time: the client mostly waits for Redis.
//
// From these figures to "Redis operations per box at a given key churn"
// (printed again, with the measured values, at the end of a run):
//   A box syncs every sync interval (20 ms by default). Per sync it sends one
//   key-spend per key it admitted on since the last sync or still watches (a
//   key is re-read at every sync for 2 s after the box's last admission on
//   it), batched per hash-tag group: one EVALSHA per non-empty group, at most
//   16. So, with A the box's active keys (admitted on within the last 2 s):
//     key-ops/s per box     = A / 0.02 = 50 x A
//     round trips per box  <= 16 x 50 = 800 /s (fewer only when A is small)
//     Redis CPU per box     ~ 50 x A x redis_cpu_us_per_key (at BM_ClusterSync/A)
//     sync time             = ms_per_sync at K = A: must stay well under 20 ms
//   and Redis's total is the sum over the boxes (one Redis core serves about
//   1 / (Redis CPU per box) boxes of that size; a Redis Cluster spreads the
//   16 groups over its primaries).
//
// Run (the machine otherwise idle; see scripts/bench.sh):
//   ./build/perf/cluster_sync_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Leave the cluster out with --benchmark_filter=-Cluster. The program exits
// non-zero when a Redis call failed or answered wrongly (its check in
// perf/meson.build runs it briefly).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "control/cluster_gcra.h"
#include "control/cluster_sync.h"
#include "control/redis_router.h"
#include "limiter/bucket_table.h"
#include "limiter/spend_log.h"
#include "median.h"
#include "redis_for_bench.h"

namespace {

using namespace sluice;
using control::ClusterGcra;
using control::ClusterSpend;
using control::ClusterSync;
using control::RedisEndpoint;
using control::RedisError;
using control::RedisLink;
using control::RedisRouter;
using Clock = RedisLink::Clock;

// A Redis call that failed or answered wrongly: the run goes on, the
// program exits non-zero.
bool g_failed = false;

void fail(benchmark::State& state, const std::string& why) {
  g_failed = true;
  state.SkipWithError(why.c_str());
}

// --- The servers, started on first use -------------------------------------

enum class Target : uint8_t { kSingle, kCluster };

struct Nodes {
  std::vector<RedisEndpoint> endpoints;
  std::vector<pid_t> pids;
};

std::unique_ptr<perf::BenchRedis> g_single;
std::unique_ptr<perf::BenchRedisCluster> g_cluster;
std::string g_single_error, g_cluster_error;

bool nodes_of(Target target, Nodes& out, std::string& error) {
  if (target == Target::kSingle) {
    if (!g_single && g_single_error.empty()) {
      g_single = std::make_unique<perf::BenchRedis>();
      if (!g_single->start()) {
        g_single_error = "redis-server: " + g_single->error();
        g_single.reset();
      }
    }
    if (!g_single) {
      error = g_single_error;
      return false;
    }
    out.endpoints = {g_single->endpoint()};
    out.pids = {g_single->pid()};
    return true;
  }
  if (!g_cluster && g_cluster_error.empty()) {
    g_cluster = std::make_unique<perf::BenchRedisCluster>(3);
    if (!g_cluster->start()) {
      g_cluster_error = "Redis Cluster: " + g_cluster->error();
      g_cluster.reset();
    }
  }
  if (!g_cluster) {
    error = g_cluster_error;
    return false;
  }
  out.endpoints = g_cluster->endpoints();
  out.pids = g_cluster->pids();
  return true;
}

// As sluiced's link, with a longer command timeout: a noisy machine's stall
// should not read as a failure (the timeout costs nothing when not reached).
RedisLink::Options link_options() {
  RedisLink::Options o;
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.command_timeout = std::chrono::milliseconds(5000);
  return o;
}

// --- What Redis counted ------------------------------------------------------

// EVALSHA's calls and microseconds (INFO commandstats) and the main thread's
// CPU time, summed over the nodes.
struct ServerStats {
  uint64_t evalsha_calls = 0;
  uint64_t evalsha_usec = 0;
  uint64_t cpu_ns = 0;
  bool ok = true;
};

uint64_t field_after(std::string_view text, std::string_view name) {
  const size_t at = text.find(name);
  if (at == std::string_view::npos) return 0;
  return std::strtoull(text.data() + at + name.size(), nullptr, 10);
}

// The main thread's time on a CPU: /proc/PID/schedstat (nanoseconds), or
// utime + stime from /proc/PID/stat (clock ticks) where there is none.
uint64_t cpu_ns_of(pid_t pid) {
  {
    std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
    uint64_t ns = 0;
    if (in >> ns) return ns;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) {
      stime = std::strtoull(field.c_str(), nullptr, 10);
      break;
    }
  }
  return (utime + stime) * (1'000'000'000 / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK)));
}

ServerStats server_stats(const Nodes& nodes) {
  ServerStats s;
  for (const RedisEndpoint& e : nodes.endpoints) {
    const RedisLink::Result r = perf::redis_query(e, {"INFO", "commandstats"});
    if (r.error != RedisError::kNone) {
      s.ok = false;
      continue;
    }
    const std::string_view text = r.reply.text();
    const size_t at = text.find("cmdstat_evalsha:");
    if (at == std::string_view::npos) continue;
    const std::string_view line = text.substr(at, text.find('\n', at) - at);
    s.evalsha_calls += field_after(line, "calls=");
    s.evalsha_usec += field_after(line, ",usec=");
  }
  for (pid_t pid : nodes.pids) s.cpu_ns += cpu_ns_of(pid);
  return s;
}

// --- Figures kept for the summary --------------------------------------------

// A run's figures, by case; the summary takes the runs of the largest
// iteration count (the measured ones, not Google Benchmark's estimating runs)
// and their medians.
struct Figures {
  benchmark::IterationCount iterations = 0;
  double ms_per_sync = 0, round_trips = 0, redis_cpu_us_per_key = 0, script_us_per_key = 0, us_per_key = 0;
};
std::map<std::string, std::vector<Figures>> g_figures;

void keep(const std::string& name, const Figures& f) { g_figures[name].push_back(f); }

bool measured(const std::string& name, Figures& out) {
  const auto it = g_figures.find(name);
  if (it == g_figures.end() || it->second.empty()) return false;
  benchmark::IterationCount most = 0;
  for (const Figures& f : it->second) most = std::max(most, f.iterations);
  std::vector<double> ms, rt, cpu, script, per_key;
  for (const Figures& f : it->second) {
    if (f.iterations != most) continue;
    ms.push_back(f.ms_per_sync);
    rt.push_back(f.round_trips);
    cpu.push_back(f.redis_cpu_us_per_key);
    script.push_back(f.script_us_per_key);
    per_key.push_back(f.us_per_key);
  }
  out = {most, perf::median(ms), perf::median(rt), perf::median(cpu), perf::median(script), perf::median(per_key)};
  return true;
}

// Counters common to the Redis benchmarks; `keys` per iteration.
void redis_counters(benchmark::State& state, size_t keys, const ServerStats& before, const ServerStats& after) {
  const auto iters = static_cast<double>(state.iterations());
  const double all_keys = iters * static_cast<double>(keys);
  state.SetItemsProcessed(static_cast<int64_t>(all_keys));
  state.counters["us_per_key"] = benchmark::Counter(all_keys * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (before.ok && after.ok && all_keys > 0) {
    state.counters["script_us_per_key"] = static_cast<double>(after.evalsha_usec - before.evalsha_usec) / all_keys;
    state.counters["redis_cpu_us_per_key"] = static_cast<double>(after.cpu_ns - before.cpu_ns) / 1e3 / all_keys;
  }
}

// --- Redis keys ---------------------------------------------------------------

// Keys shaped as ClusterSync names them: PREFIX:{gNN}:BUCKET:32 hex digits.
std::string bench_key(std::string_view tag, std::string_view bucket, uint64_t i) {
  char hash[40];
  std::snprintf(hash, sizeof hash, ":%016" PRIx64 "%016" PRIx64, i * 0x9e3779b97f4a7c15ull | (uint64_t{1} << 63),
                i * 0xc2b2ae3d27d4eb4full);
  return "sluice:{" + std::string(tag) + "}:" + std::string(bucket) + hash;
}

limiter::KeyHasher fixed_hasher() {
  std::array<uint8_t, limiter::KeyHasher::kSecretSize> s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(i * 29 + 5);
  return limiter::KeyHasher(s);
}

limiter::BucketKey client_key(const limiter::KeyHasher& h, uint32_t n) {
  return h.key(0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&n), sizeof n));
}

limiter::Nanos wall_now() {
  return static_cast<limiter::Nanos>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// --- ClusterGcra::apply -------------------------------------------------------

// One apply of N keys of one hash tag per iteration. `spend_us` 0 reads
// (the keys were given an hour's lead first, so there is a value to read).
void gcra_batches(benchmark::State& state, Target target, uint64_t spend_us, const char* what) {
  Nodes nodes;
  std::string error;
  if (!nodes_of(target, nodes, error)) return fail(state, error);
  const auto n = static_cast<size_t>(state.range(0));
  RedisRouter router(nodes.endpoints, link_options());
  ClusterGcra gcra(router);
  const std::string bucket = std::string(what) + "-" + std::to_string(n);
  std::vector<ClusterSpend> batch;
  for (size_t i = 0; i < n; ++i) batch.push_back({bench_key("g00", bucket, i), spend_us});
  std::vector<int64_t> ahead;

  // Connects, maps the cluster, loads the script; gives a read's keys a lead.
  std::vector<ClusterSpend> prime = batch;
  if (spend_us == 0) {
    for (ClusterSpend& s : prime) s.spent_us = 3'600'000'000ull;
  }
  RedisLink::Result r = gcra.apply(prime, ahead, Clock::now());
  if (r.error != RedisError::kNone) return fail(state, "first apply: " + r.detail);

  const ServerStats before = server_stats(nodes);
  for (auto _ : state) {
    r = gcra.apply(batch, ahead, Clock::now());
    if (r.error != RedisError::kNone || ahead.size() != n) {
      return fail(state, "apply: " + std::string(control::to_string(r.error)) + " " + r.detail);
    }
    benchmark::DoNotOptimize(ahead.data());
  }
  const ServerStats after = server_stats(nodes);
  if (ahead.empty() || ahead.front() <= 0) return fail(state, "the script answered no lead for a spent key");

  redis_counters(state, n, before, after);
  state.counters["us_per_batch"] =
      benchmark::Counter(1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_GcraApply(benchmark::State& state) { gcra_batches(state, Target::kSingle, 1000, "apply"); }
void BM_GcraRead(benchmark::State& state) { gcra_batches(state, Target::kSingle, 0, "read"); }
void BM_GcraApplyCluster(benchmark::State& state) { gcra_batches(state, Target::kCluster, 1000, "apply-cluster"); }

BENCHMARK(BM_GcraApply)->Arg(1)->Arg(16)->Arg(128)->Arg(1024)->UseRealTime();
BENCHMARK(BM_GcraRead)->Arg(1)->Arg(16)->Arg(128)->Arg(1024)->UseRealTime();
BENCHMARK(BM_GcraApplyCluster)->Arg(1)->Arg(16)->Arg(128)->Arg(1024)->UseRealTime();

// --- ClusterSync::sync ----------------------------------------------------------

// One sync of K keys (each spent 1 ms since the last sync) per iteration:
// grouped by hash tag, one apply per group, the leads published into a
// bucket table by compare-and-swap.
void cluster_sync(benchmark::State& state, Target target, const char* what) {
  Nodes nodes;
  std::string error;
  if (!nodes_of(target, nodes, error)) return fail(state, error);
  const auto k = static_cast<size_t>(state.range(0));
  limiter::BucketTable table(limiter::BucketTable::Options{
      .capacity = std::max<size_t>(4096, std::bit_ceil(k * 2)), .regions = 64, .max_probe = 128, .bucket_kinds = 1});
  RedisRouter router(nodes.endpoints, link_options());
  ClusterGcra gcra(router);
  ClusterSync sync(table, gcra, "sluice-bench-" + std::string(what) + "-" + std::to_string(k));
  sync.set_buckets({"bench"});
  const limiter::KeyHasher hasher = fixed_hasher();
  std::vector<limiter::KeySpend> spends;
  for (uint32_t i = 0; i < k; ++i) spends.push_back({client_key(hasher, i), 1'000'000});

  ClusterSync::Report report = sync.sync(spends, wall_now(), Clock::now());
  if (report.error != RedisError::kNone) return fail(state, "first sync: " + report.detail);

  size_t published = 0;
  const ServerStats before = server_stats(nodes);
  for (auto _ : state) {
    report = sync.sync(spends, wall_now(), Clock::now());
    if (report.error != RedisError::kNone || report.sent != k) {
      return fail(state, "sync: " + std::string(control::to_string(report.error)) + " " + report.detail);
    }
    published += report.published;
  }
  const ServerStats after = server_stats(nodes);

  redis_counters(state, k, before, after);
  const auto iters = static_cast<double>(state.iterations());
  state.counters["ms_per_sync"] =
      benchmark::Counter(1e-3, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["published"] = static_cast<double>(published) / iters;
  if (before.ok && after.ok) {
    state.counters["round_trips"] = static_cast<double>(after.evalsha_calls - before.evalsha_calls) / iters;
  }
  // The summary's figures, from the counters as Google Benchmark will
  // report them (its timer is read back through the rate counters).
  Figures f;
  f.iterations = state.iterations();
  f.round_trips = before.ok && after.ok ? static_cast<double>(after.evalsha_calls - before.evalsha_calls) / iters : 0;
  f.redis_cpu_us_per_key = state.counters["redis_cpu_us_per_key"].value;
  f.script_us_per_key = state.counters["script_us_per_key"].value;
  f.us_per_key = 0;  // filled from the wall clock below
  keep(std::string(what) + "/" + std::to_string(k), f);
}

// Wall-clock time per sync is what Google Benchmark measures; the summary
// needs it too, so the sync cases also time themselves (the same loop, no
// extra work inside it).
struct SyncTimer {
  Clock::time_point start = Clock::now();
};

void BM_ClusterSync(benchmark::State& state) {
  const SyncTimer t;
  cluster_sync(state, Target::kSingle, "sync");
  (void)t;
}
void BM_ClusterSyncCluster(benchmark::State& state) { cluster_sync(state, Target::kCluster, "sync-cluster"); }

BENCHMARK(BM_ClusterSync)->Arg(100)->Arg(1000)->Arg(10000)->UseRealTime();
BENCHMARK(BM_ClusterSyncCluster)->Arg(1000)->UseRealTime();

// --- The worker's side: SpendLog ------------------------------------------------

// SpendLog::record over KEYS keys in turn (1: one hot key), the log's
// default size; after the first round every key is in the half, as in a
// sync interval where the worker admits on the same keys again and again.
void BM_SpendLogRecord(benchmark::State& state) {
  const auto keys = static_cast<size_t>(state.range(0));
  const limiter::KeyHasher hasher = fixed_hasher();
  std::vector<limiter::BucketKey> ks;
  for (uint32_t i = 0; i < keys; ++i) ks.push_back(client_key(hasher, i));
  std::shuffle(ks.begin(), ks.end(), std::mt19937(7));
  limiter::SpendLog log;
  size_t i = 0;
  for (auto _ : state) {
    log.record(ks[i], 6'000'000'000);
    if (++i == keys) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  if (log.lost_records() != 0) fail(state, "the log refused keys: it is sized for fewer");
}
// 6144: a full half of the default log (8192 slots, 3/4 used at most).
BENCHMARK(BM_SpendLogRecord)->Arg(1)->Arg(1024)->Arg(6144);

// The control plane's turn-over of one worker's log: flip, then drain the
// retired half (KEYS keys in it) and clear it. Filling the half is not timed.
void BM_SpendLogTurnOver(benchmark::State& state) {
  const auto keys = static_cast<size_t>(state.range(0));
  const limiter::KeyHasher hasher = fixed_hasher();
  std::vector<limiter::BucketKey> ks;
  for (uint32_t i = 0; i < keys; ++i) ks.push_back(client_key(hasher, i));
  limiter::SpendLog log;
  std::vector<limiter::KeySpend> out;
  out.reserve(keys);
  for (auto _ : state) {
    state.PauseTiming();
    for (const limiter::BucketKey& k : ks) log.record(k, 6'000'000'000);
    out.clear();
    state.ResumeTiming();
    log.drain(log.flip(), out);
    benchmark::DoNotOptimize(out.data());
  }
  if (out.size() != keys) fail(state, "drained " + std::to_string(out.size()) + " keys, not " + std::to_string(keys));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(keys));
  state.counters["ns_per_key"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(keys) * 1e-9,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SpendLogTurnOver)->Arg(100)->Arg(1000)->Arg(6144);

}  // namespace
