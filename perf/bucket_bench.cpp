// The shared bucket table under load: charging a warm key (GCRA and calendar
// window), with 1 thousand, 1 million and 10 million live keys; two threads
// on one hot key against two threads on distinct keys; and the memory each
// live key costs. Key hashing is included: it is part of every decision.
#include <benchmark/benchmark.h>

#include <array>
#include <memory>
#include <random>
#include <vector>

#include "limiter/charge.h"

namespace {

using namespace sluice::limiter;
using sluice::time::Nanos;

constexpr Nanos kSec = sluice::time::kNanosPerSecond;
constexpr Nanos kT0 = 1'800'000'000 * kSec;

const KeyHasher& hasher() {
  static const KeyHasher h = KeyHasher::random();
  return h;
}

// Client addresses as the limiter keys them: 4 bytes of IPv4.
BucketKey client_key(uint32_t n) {
  return hasher().key(0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&n), sizeof n));
}

GcraLimit per_minute(uint64_t n) {
  GcraLimit l;
  if (!GcraLimit::make(n, 60 * kSec, static_cast<uint32_t>(n), l)) std::abort();
  return l;
}

// A table holding `live` keys, sized for 62.5% load (capacity a power of two
// at least 1.6 x live), filled once and shared by the benchmarks.
BucketTable& table_with(size_t live) {
  static std::array<std::unique_ptr<BucketTable>, 3> tables;
  const size_t index = live <= 1000 ? 0 : live <= 1'000'000 ? 1 : 2;
  if (!tables[index]) {
    tables[index] = std::make_unique<BucketTable>(BucketTable::Options{
        .capacity = live * 8 / 5, .regions = 64, .max_probe = 128, .bucket_kinds = 2});
    const GcraLimit l = per_minute(1'000'000);
    for (uint32_t i = 0; i < live; ++i) (void)charge_gcra(*tables[index], client_key(i), kT0, l);
  }
  return *tables[index];
}

// One decision on a key picked at random among `live` warm keys: the key
// hash, the lookup and the compare-and-swap, as for a request.
void BM_ChargeGcra(benchmark::State& state) {
  const size_t live = static_cast<size_t>(state.range(0));
  BucketTable& t = table_with(live);
  const GcraLimit l = per_minute(1'000'000'000);
  std::mt19937 rng(1);
  std::vector<uint32_t> picks(1 << 16);
  for (uint32_t& p : picks) p = static_cast<uint32_t>(rng() % live);
  size_t i = 0;
  Nanos now = kT0;
  for (auto _ : state) {
    const GcraCharge c = charge_gcra(t, client_key(picks[i++ & 0xffff]), now += 1000, l);
    benchmark::DoNotOptimize(c);
  }
  state.counters["live_keys"] = static_cast<double>(t.count_live());
  state.counters["bytes_per_live_key"] = static_cast<double>(t.memory_bytes()) / static_cast<double>(live);
  state.counters["overflows"] = static_cast<double>(t.overflows());
}
BENCHMARK(BM_ChargeGcra)->Arg(1000)->Arg(1'000'000)->Arg(10'000'000)->ArgName("live")->UseRealTime();

// The same as a burst of 32 requests, the way the data plane handles them:
// all keys hashed, then all their slots prefetched, then all charged, so the
// cache misses of a large table overlap. Time per request. (Prefetching each
// slot right after hashing its key measured slower on this machine.)
void BM_ChargeGcraBurst(benchmark::State& state) {
  const size_t live = static_cast<size_t>(state.range(0));
  BucketTable& t = table_with(live);
  const GcraLimit l = per_minute(1'000'000'000);
  std::mt19937 rng(2);
  std::vector<uint32_t> picks(1 << 20);
  for (uint32_t& p : picks) p = static_cast<uint32_t>(rng() % live);
  size_t i = 0;
  Nanos now = kT0;
  std::array<BucketKey, 32> keys;
  for (auto _ : state) {
    for (BucketKey& k : keys) k = client_key(picks[i++ & 0xfffff]);
    for (const BucketKey& k : keys) t.prefetch(k);
    for (const BucketKey& k : keys) benchmark::DoNotOptimize(charge_gcra(t, k, now += 1000, l));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * keys.size()));
  state.counters["ns_per_request"] = benchmark::Counter(static_cast<double>(state.iterations() * keys.size()),
                                                        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ChargeGcraBurst)->Arg(1000)->Arg(1'000'000)->Arg(10'000'000)->ArgName("live")->UseRealTime();

// The same warm key over and over: the best case, and the 40 ns target's.
void BM_ChargeGcraWarmKey(benchmark::State& state) {
  BucketTable& t = table_with(1000);
  const GcraLimit l = per_minute(1'000'000'000);
  const BucketKey k = client_key(7);
  Nanos now = kT0;
  for (auto _ : state) benchmark::DoNotOptimize(charge_gcra(t, k, now += 1000, l));
}
BENCHMARK(BM_ChargeGcraWarmKey);

// Hashing the key material alone (4 bytes of IPv4, a 51-byte bearer token).
void BM_KeyHash(benchmark::State& state) {
  const std::string token = "Bearer sk-proj-4f2a9c1e7b3d8e6f0a1b2c3d4e5f6a7b8c9d0e1f";
  const auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(token.data()),
                                              state.range(0) == 0 ? 4 : token.size());
  for (auto _ : state) benchmark::DoNotOptimize(hasher().key(1, bytes));
  state.SetLabel(state.range(0) == 0 ? "4 B" : "51 B");
}
BENCHMARK(BM_KeyHash)->Arg(0)->Arg(1);

// A calendar window (RPM counted on every request) on a warm key.
void BM_ChargeWindowWarmKey(benchmark::State& state) {
  BucketTable& t = table_with(1000);
  const WindowLimit l{4'000'000'000u, 0};
  const BucketKey k = hasher().key(1, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("gpt-eu-1"), 8));
  Nanos now = kT0;
  for (auto _ : state) benchmark::DoNotOptimize(charge_window(t, k, now += 1, l));
}
BENCHMARK(BM_ChargeWindowWarmKey);

// Two threads: both on one hot key (every charge moves one cache line between
// the cores), against each on its own key.
void BM_TwoThreads(benchmark::State& state) {
  BucketTable& t = table_with(1000);
  const GcraLimit l = per_minute(1'000'000'000);
  const bool same_key = state.range(0) != 0;
  const BucketKey k = client_key(same_key ? 11u : 11u + static_cast<uint32_t>(state.thread_index()) * 100);
  Nanos now = kT0;
  for (auto _ : state) benchmark::DoNotOptimize(charge_gcra(t, k, now += 1000, l));
  state.SetLabel(same_key ? "one hot key" : "a key each");
}
BENCHMARK(BM_TwoThreads)->Arg(1)->Arg(0)->ArgName("same_key")->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
