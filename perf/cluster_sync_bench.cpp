// What cluster budgets cost: the Redis side of a sync, against a
// redis-server this program starts itself (Debian's, on a Unix socket in a
// fresh directory, no persistence; killed by its PID at exit, and made to die
// with this process if it crashes: tests/support/redis_server.h, as the tests
// start theirs), and the worker's side, the spend log.
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
//   ns_per_key         BM_SpendLogTurnOver: flip + drain per key drained
// The Redis benchmarks use real time: the client mostly waits for Redis.
//
// From these figures to "Redis operations per box at a given key churn"
// (printed again, with the measured values, at the end of a run):
//   A box syncs every sync interval (20 ms by default). Per sync it sends one
//   key-spend per key it admitted on since the last sync (S keys), plus reads
//   of the keys it still watches without having spent on them (I keys: a key
//   stays watched for 2 s after the box's last admission on it), at most
//   ClusterService::kMaxIdleReads (2048) of those a sync, spread by hash; all
//   batched per hash-tag group: one EVALSHA per non-empty group, 16 at most.
//     key-ops/s per box    = 50 x (S + min(I, 2048))    (reads <= 102,400/s)
//     round trips per box <= 16 x 50 = 800 /s (fewer only when few keys)
//     Redis CPU per box    ~ 50 x (S x redis_cpu_us_per_key at BM_ClusterSync/S
//                                  + min(I, 2048) x redis_cpu_us_per_key at BM_GcraRead/1024)
//     sync time            = ms_per_sync at K = S + min(I, 2048): must stay well under 20 ms
//   and Redis's total is the sum over the boxes (one Redis core serves about
//   1 / (Redis CPU per box) boxes of that size; a Redis Cluster spreads the
//   16 groups over its primaries, but one box's sync still goes group after
//   group, one round trip at a time).
//
// Run (the machine otherwise idle; see scripts/bench.sh):
//   ./build/perf/cluster_sync_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Leave the cluster out with --benchmark_filter=-Cluster/ . The program exits
// non-zero when a Redis call failed or answered wrongly (its check in
// perf/meson.build runs it briefly).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "control/cluster/cluster_gcra.h"
#include "control/cluster/cluster_sync.h"
#include "control/cluster/redis_router.h"
#include "limiter/bucket_table.h"
#include "limiter/spend_log.h"
#include "median.h"
#include "redis_cluster.h"    // tests/support
#include "redis_processes.h"  // tests/support
#include "redis_server.h"     // tests/support

namespace {

using namespace sluice;
using control::ClusterGcra;
using control::ClusterSpend;
using control::ClusterSync;
using control::ClusterWindow;
using control::RedisCluster;
using control::RedisEndpoint;
using control::RedisError;
using control::RedisLink;
using control::RedisRouter;
using control::RedisServer;
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

std::unique_ptr<RedisServer> g_single;
std::unique_ptr<RedisCluster> g_cluster;
std::string g_single_error, g_cluster_error;

bool nodes_of(Target target, Nodes& out, std::string& error) {
  if (target == Target::kSingle) {
    if (!g_single && g_single_error.empty()) {
      g_single = std::make_unique<RedisServer>();
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
    g_cluster = std::make_unique<RedisCluster>(3, 0);
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
    const RedisLink::Result r = control::redis_processes::query(e, {"INFO", "commandstats"});
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

// Counters common to the Redis benchmarks: `keys` per iteration, `took` the
// wall-clock time of the whole loop (what Google Benchmark's real time
// measures too; read here so that the counters are plain microseconds).
void redis_counters(benchmark::State& state, size_t keys, Clock::duration took, const ServerStats& before,
                    const ServerStats& after) {
  const auto iters = static_cast<double>(state.iterations());
  const double all_keys = iters * static_cast<double>(keys);
  state.SetItemsProcessed(static_cast<int64_t>(all_keys));
  if (all_keys == 0) return;
  state.counters["us_per_key"] = std::chrono::duration<double, std::micro>(took).count() / all_keys;
  if (before.ok && after.ok) {
    state.counters["script_us_per_key"] = static_cast<double>(after.evalsha_usec - before.evalsha_usec) / all_keys;
    state.counters["redis_cpu_us_per_key"] = static_cast<double>(after.cpu_ns - before.cpu_ns) / 1e3 / all_keys;
  }
}

// --- Redis keys ---------------------------------------------------------------

// Keys shaped as ClusterSync names them: PREFIX:{gNN}:BUCKET:32 hex digits.
std::string bench_key(std::string_view tag, std::string_view bucket, uint64_t i) {
  char hash[40];
  const uint64_t k0 = i * uint64_t{0x9e3779b97f4a7c15} | (uint64_t{1} << 63);
  const uint64_t k1 = i * uint64_t{0xc2b2ae3d27d4eb4f};
  std::snprintf(hash, sizeof hash, ":%016" PRIx64 "%016" PRIx64, k0, k1);
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
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    r = gcra.apply(batch, ahead, Clock::now());
    if (r.error != RedisError::kNone || ahead.size() != n) {
      return fail(state, "apply: " + std::string(control::to_string(r.error)) + " " + r.detail);
    }
    benchmark::DoNotOptimize(ahead.data());
  }
  const Clock::duration took = Clock::now() - start;
  const ServerStats after = server_stats(nodes);
  if (ahead.empty() || ahead.front() <= 0) return fail(state, "the script answered no lead for a spent key");

  redis_counters(state, n, took, before, after);
  if (state.iterations() > 0) {
    state.counters["us_per_batch"] =
        std::chrono::duration<double, std::micro>(took).count() / static_cast<double>(state.iterations());
    Figures f;
    f.iterations = state.iterations();
    f.us_per_key = state.counters["us_per_key"].value;
    f.redis_cpu_us_per_key = state.counters["redis_cpu_us_per_key"].value;
    f.script_us_per_key = state.counters["script_us_per_key"].value;
    keep(std::string(what) + "/" + std::to_string(n), f);
  }
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
  ClusterWindow window(router);
  ClusterSync sync(table, gcra, window, "sluice-bench-" + std::string(what) + "-" + std::to_string(k));
  sync.set_buckets({"bench"});
  const limiter::KeyHasher hasher = fixed_hasher();
  std::vector<limiter::KeySpend> spends;
  for (uint32_t i = 0; i < k; ++i) spends.push_back({client_key(hasher, i), 1'000'000});

  ClusterSync::Report report = sync.sync(spends, wall_now(), Clock::now());
  if (report.error != RedisError::kNone) return fail(state, "first sync: " + report.detail);

  size_t published = 0;
  const ServerStats before = server_stats(nodes);
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    report = sync.sync(spends, wall_now(), Clock::now());
    if (report.error != RedisError::kNone || report.sent != k) {
      return fail(state, "sync: " + std::string(control::to_string(report.error)) + " " + report.detail);
    }
    published += report.published;
  }
  const Clock::duration took = Clock::now() - start;
  const ServerStats after = server_stats(nodes);

  redis_counters(state, k, took, before, after);
  const auto iters = static_cast<double>(state.iterations());
  const double us = std::chrono::duration<double, std::micro>(took).count();
  state.counters["ms_per_sync"] = us / 1e3 / iters;
  state.counters["published"] = static_cast<double>(published) / iters;
  if (before.ok && after.ok) {
    state.counters["round_trips"] = static_cast<double>(after.evalsha_calls - before.evalsha_calls) / iters;
  }
  // The summary's figures.
  Figures f;
  f.iterations = state.iterations();
  f.ms_per_sync = us / 1e3 / iters;
  f.us_per_key = us / iters / static_cast<double>(k);
  f.round_trips = state.counters["round_trips"].value;
  f.redis_cpu_us_per_key = state.counters["redis_cpu_us_per_key"].value;
  f.script_us_per_key = state.counters["script_us_per_key"].value;
  keep(std::string(what) + "/" + std::to_string(k), f);
}

void BM_ClusterSync(benchmark::State& state) { cluster_sync(state, Target::kSingle, "sync"); }
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
  Clock::duration took{};  // the timed part alone, for ns_per_key
  for (auto _ : state) {
    state.PauseTiming();
    for (const limiter::BucketKey& k : ks) log.record(k, 6'000'000'000);
    out.clear();
    state.ResumeTiming();
    const Clock::time_point start = Clock::now();
    log.drain(log.flip(), out);
    benchmark::DoNotOptimize(out.data());
    took += Clock::now() - start;
  }
  if (out.size() != keys) fail(state, "drained " + std::to_string(out.size()) + " keys, not " + std::to_string(keys));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(keys));
  if (state.iterations() > 0) {
    state.counters["ns_per_key"] = std::chrono::duration<double, std::nano>(took).count() /
                                   static_cast<double>(state.iterations()) / static_cast<double>(keys);
  }
}
BENCHMARK(BM_SpendLogTurnOver)->Arg(100)->Arg(1000)->Arg(6144);

}  // namespace

namespace {

// The header comment's arithmetic, with this run's figures.
void print_summary(FILE* out) {
  constexpr double kSyncsPerSecond = 50;  // the default sync interval, 20 ms
  constexpr double kMaxIdleReads = 2048;  // ClusterService::kMaxIdleReads
  std::fprintf(out,
               "\nRedis load per box: a box syncs every 20 ms (the default), sending one key-spend per key it\n"
               "admitted on since the last sync (S keys) and reading at most 2048 of the keys it still watches\n"
               "without having spent on them (I: watched for 2 s after its last admission), one EVALSHA per\n"
               "non-empty hash-tag group (16 at most):\n"
               "  key-ops/s = 50 x (S + min(I, 2048)); round trips <= 16 x 50 = 800/s;\n"
               "  Redis CPU ~ 50 x (S x spend cost + min(I, 2048) x read cost), per key as measured below.\n");
  bool header = false;
  for (const char* what : {"sync", "sync-cluster"}) {
    for (size_t a : {size_t{100}, size_t{1000}, size_t{10000}}) {
      Figures f;
      if (!measured(std::string(what) + "/" + std::to_string(a), f)) continue;
      if (!header) {
        std::fprintf(out,
                     "Spends (S keys, I = 0), medians of the measured runs of BM_ClusterSync*:\n"
                     "  %-13s %7s %11s %10s %9s %9s %8s %14s %17s\n",
                     "case", "S", "key-ops/s", "EVALSHA/s", "sync ms", "of 20 ms", "us/key", "Redis CPU/box",
                     "boxes/Redis core");
        header = true;
      }
      const double key_ops = kSyncsPerSecond * static_cast<double>(a);
      const double core_share = key_ops * f.redis_cpu_us_per_key / 1e6;
      std::fprintf(out, "  %-13s %7zu %11.0f %10.0f %9.3f %8.1f%% %8.2f %13.1f%% %17.1f\n", what, a, key_ops,
                   f.round_trips * kSyncsPerSecond, f.ms_per_sync, f.ms_per_sync / 20 * 100, f.us_per_key,
                   core_share * 100, core_share > 0 ? 1 / core_share : 0.0);
    }
  }
  if (!header) std::fprintf(out, "(no BM_ClusterSync case ran: no measured spend figures to put in)\n");
  Figures read, spend;
  if (measured("read/1024", read)) {
    const double core_share = kSyncsPerSecond * kMaxIdleReads * read.redis_cpu_us_per_key / 1e6;
    std::fprintf(out,
                 "Idle reads (BM_GcraRead/1024): %.2f us of Redis CPU per key (%.2f us wall); at the cap of 2048 a\n"
                 "sync, 102,400 reads/s cost %.1f%% of a Redis core per box.\n",
                 read.redis_cpu_us_per_key, read.us_per_key, core_share * 100);
  }
  if (measured("apply/1024", spend)) {
    std::fprintf(out, "Spends in one batch (BM_GcraApply/1024): %.2f us of Redis CPU per key (script %.2f us).\n",
                 spend.redis_cpu_us_per_key, spend.script_us_per_key);
  }
  if (g_failed) std::fprintf(out, "\nSome Redis calls failed or answered wrongly: see the errors above.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // A machine-readable format on stdout keeps stdout to itself.
  bool console = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--benchmark_format=") && a != "--benchmark_format=console") console = false;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary(console ? stdout : stderr);
  g_cluster.reset();
  g_single.reset();
  return g_failed ? 1 : 0;
}
