// The control plane's reclaimer, single-threaded with a clock the test sets:
// RF08's idle buckets dropped after 10 minutes and not before, memory
// bounded under a flood of fresh keys, TB07's credential records released
// once quiet, and the close / grace / retire / grace / open sequence of one
// step on every table.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <vector>

#include "control/reclaimer.h"
#include "limiter/bucket_table.h"
#include "limiter/charge.h"
#include "limiter/compiled_policy.h"
#include "limiter/credential_slots.h"
#include "time/clock.h"

namespace sluice::control {
namespace {

using limiter::BucketKey;
using limiter::BucketTable;
using limiter::GcraLimit;
using time::Nanos;

constexpr Nanos kSec = time::kNanosPerSecond;
constexpr Nanos kMin = time::kNanosPerMinute;
constexpr Nanos kT0 = 1'800'000'000 * kSec;

const limiter::KeyHasher& hasher() {
  static const limiter::KeyHasher h = [] {
    std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 13 + 5);
    return limiter::KeyHasher(secret);
  }();
  return h;
}

BucketKey key_of(uint16_t kind, uint64_t n) {
  return hasher().key(kind, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&n), sizeof n));
}

// The first key of `kind`, numbered from `from`, homed in region `r` of a
// table with `regions` regions.
BucketKey key_in_region(uint16_t kind, unsigned r, unsigned regions, uint64_t from = 0) {
  for (uint64_t n = from;; ++n) {
    const BucketKey k = key_of(kind, n);
    if ((static_cast<unsigned>(k.k0) & (regions - 1)) == r) return k;
  }
}

GcraLimit limit(uint64_t per_minute, uint32_t burst) {
  GcraLimit l;
  EXPECT_TRUE(GcraLimit::make(per_minute, kMin, burst, l));
  return l;
}

// A compiled policy with one continuous bucket (kind 0), as compile_policy
// makes it from `idle_drop_after: ...`.
limiter::CompiledPolicy policy_with_bucket(const GcraLimit& l, Nanos idle_drop_after) {
  limiter::CompiledPolicy p;
  limiter::CompiledBucket b;
  b.name = "per-client";
  b.index = 0;
  b.gcra = l;
  b.idle_drop_after = idle_drop_after;
  p.buckets.push_back(std::move(b));
  return p;
}

// The reclaimer's table entry for `t`, asking the policy's predicate at the
// time `now` holds when the step asks.
Reclaimer::Table buckets_entry(BucketTable& t, const limiter::CompiledPolicy& p, const time::ManualClock& clock) {
  return {"buckets", &t, [&p, &clock] {
            const Nanos now = clock.now();
            return BucketTable::IdlePredicate(
                [&p, now](uint16_t kind, const uint64_t* words) { return limiter::bucket_idle(p, kind, words, now, 0); });
          }};
}

void sweep(Reclaimer& r, unsigned regions) {
  for (unsigned i = 0; i < regions; ++i) (void)r.step();
}

TEST(ReclaimerTest, RF08_ABucketIdleForTenMinutesIsDroppedAndNotBefore) {
  BucketTable t({.capacity = 4096, .regions = 64, .bucket_kinds = 1});
  const GcraLimit l = limit(60, 5);  // one per second, burst 5
  const limiter::CompiledPolicy p = policy_with_bucket(l, 10 * kMin);
  time::ManualClock clock(kT0);
  int waits = 0;
  Reclaimer reclaimer({buckets_entry(t, p, clock)}, [&] { ++waits; });

  // 2000 clients send one request each; the first 100 send five, emptying
  // their bucket (TAT kT0 + 5 s).
  constexpr uint64_t kKeys = 2000, kEmptied = 100;
  for (uint64_t i = 0; i < kKeys; ++i) {
    const limiter::GcraCharge c = limiter::charge_gcra(t, key_of(0, i), clock.now(), l);
    ASSERT_TRUE(c.decision.admit);
    ASSERT_FALSE(c.overflow) << i;
  }
  for (uint64_t i = 0; i < kEmptied; ++i) {
    for (int r = 0; r < 4; ++r) ASSERT_TRUE(limiter::charge_gcra(t, key_of(0, i), clock.now(), l).decision.admit);
  }
  ASSERT_EQ(t.count_live(), kKeys);

  // A sweep half a second on: every bucket is still in use, and the emptied
  // ones are still empty (a dropped bucket would come back full).
  clock.advance(kSec / 2);
  sweep(reclaimer, t.regions());
  EXPECT_EQ(reclaimer.freed(0), 0u);
  EXPECT_EQ(t.count_live(), kKeys);
  EXPECT_EQ(waits, 2 * 64);
  EXPECT_EQ(reclaimer.sweeps(), 1u);
  for (uint64_t i = 0; i < kEmptied; ++i) {
    EXPECT_FALSE(limiter::peek_gcra(t, key_of(0, i), clock.now(), l).admit) << i;
  }
  EXPECT_FALSE(limiter::charge_gcra(t, key_of(0, 0), clock.now(), l).decision.admit);

  // Just under ten minutes after each bucket was full again: nothing goes.
  // (The single-request buckets were full at kT0 + 1 s, the emptied ones at
  // kT0 + 5 s.)
  clock.set(kT0 + 1 * kSec + 10 * kMin - 1);
  sweep(reclaimer, t.regions());
  EXPECT_EQ(reclaimer.freed(0), 0u);
  EXPECT_EQ(t.count_live(), kKeys);

  // Ten minutes after the single-request buckets were full: they go, the
  // emptied ones (full four seconds later) stay.
  clock.set(kT0 + 1 * kSec + 10 * kMin);
  sweep(reclaimer, t.regions());
  EXPECT_EQ(reclaimer.freed(0), kKeys - kEmptied);
  EXPECT_EQ(t.count_live(), kEmptied);
  EXPECT_NE(t.find(key_of(0, 0)), nullptr);
  EXPECT_EQ(t.find(key_of(0, kEmptied)), nullptr);

  // And one sweep once every bucket has been full for ten minutes empties the table.
  clock.set(kT0 + 5 * kSec + 10 * kMin);
  size_t freed_by_steps = 0;
  for (unsigned i = 0; i < t.regions(); ++i) freed_by_steps += reclaimer.step();
  EXPECT_EQ(freed_by_steps, kEmptied);
  EXPECT_EQ(t.count_live(), 0u);
  EXPECT_EQ(reclaimer.freed(0), kKeys);
  EXPECT_EQ(reclaimer.sweeps(), 4u);
  EXPECT_EQ(waits, 2 * 4 * 64);  // two grace periods per step

  // A dropped bucket answers as a full one, and its slot is claimed again.
  for (uint64_t i = 0; i < kKeys; i += 97) {
    const limiter::GcraCharge c = limiter::charge_gcra(t, key_of(0, i), clock.now(), l);
    EXPECT_TRUE(c.decision.admit);
    EXPECT_EQ(c.decision.remaining, 4u);
    EXPECT_FALSE(c.overflow);
  }
}

TEST(ReclaimerTest, MemoryStaysBoundedUnderAFloodOfFreshKeys) {
  // 2000 fresh keys a second for 30 minutes, each sending one request, into
  // a bucket with `idle_drop_after: 10s`. A key charged at second T is full
  // again at T + 1 and idle from T + 11; its region is visited at least once
  // in any 11 seconds (6 of 64 regions a second), so it is gone by T + 21
  // and at most 22 seconds' keys (44 000) are live at once: a third of the
  // table. The same flood into the same table without a reclaimer fills it
  // in about a minute, and from then on new keys share the overflow bucket.
  // (At RF08's 10 minutes the same flood keeps over 1.2 million buckets live:
  // the same arithmetic, too large a table to sweep in a unit test.)
  const BucketTable::Options options{.capacity = 1 << 17, .regions = 64, .max_probe = 32, .bucket_kinds = 1};
  BucketTable reclaimed(options), baseline(options);
  constexpr uint64_t kIdleS = 10;
  const GcraLimit l = limit(60, 5);
  const limiter::CompiledPolicy p = policy_with_bucket(l, kIdleS * kSec);
  time::ManualClock clock(kT0);
  int waits = 0;
  Reclaimer reclaimer({buckets_entry(reclaimed, p, clock)}, [&] { ++waits; });
  const unsigned steps_per_tick = reclaimed.regions() / 10;  // a sweep every ~11 s
  ASSERT_EQ(steps_per_tick, 6u);

  constexpr int kTicks = 30 * 60, kLastTen = 20 * 60;
  constexpr uint64_t kPerTick = 2000;
  constexpr size_t kMostLive = kPerTick * (kIdleS + 12), kLeastLive = kPerTick * (kIdleS + 1);
  uint64_t claimed = 0, admitted = 0;
  uint64_t late = 0, late_overflow = 0, late_overflow_baseline = 0;
  size_t peak = 0;
  uint64_t n = 0;  // fresh keys: key_of hashes a counter
  for (int tick = 0; tick < kTicks; ++tick) {
    for (uint64_t i = 0; i < kPerTick; ++i, ++n) {
      const BucketKey k = key_of(0, n);
      const limiter::GcraCharge c = limiter::charge_gcra(reclaimed, k, clock.now(), l);
      const limiter::GcraCharge b = limiter::charge_gcra(baseline, k, clock.now(), l);
      claimed += !c.overflow;
      admitted += c.decision.admit;
      if (tick >= kLastTen) {
        ++late;
        late_overflow += c.overflow;
        late_overflow_baseline += b.overflow;
      }
    }
    for (unsigned s = 0; s < steps_per_tick; ++s) (void)reclaimer.step();
    if (tick % 10 == 9) {  // count_live() reads the whole table: not every tick
      const size_t live = reclaimed.count_live();
      ASSERT_LE(live, kMostLive) << "tick " << tick;
      // Nothing went early: the last 11 seconds' keys are all there.
      ASSERT_GE(live, std::min<size_t>(n, kLeastLive) - (n - claimed)) << "tick " << tick;
      peak = std::max(peak, live);
    }
    clock.advance(kSec);
  }
  const double fraction = static_cast<double>(late_overflow) / static_cast<double>(late);
  const double fraction_baseline = static_cast<double>(late_overflow_baseline) / static_cast<double>(late);
  EXPECT_LT(fraction, 0.001) << late_overflow << " of " << late;
  EXPECT_GT(fraction_baseline, 0.99) << late_overflow_baseline << " of " << late;
  EXPECT_GT(baseline.count_live(), baseline.capacity() * 9 / 10);  // full, as far as probing reaches
  EXPECT_GT(claimed, n - n / 1000);
  EXPECT_GE(admitted, claimed);  // a key with a slot of its own starts full
  EXPECT_GT(peak, kLeastLive);
  EXPECT_GT(reclaimer.freed(0), claimed - kMostLive);
  EXPECT_EQ(waits, 2 * kTicks * static_cast<int>(steps_per_tick));

  // The flood stops; once its last keys have been full for the idle time,
  // one sweep empties the table and every slot claimed was freed.
  clock.advance(kSec + kIdleS * kSec);
  sweep(reclaimer, reclaimed.regions());
  EXPECT_EQ(reclaimed.count_live(), 0u);
  EXPECT_EQ(reclaimer.freed(0), claimed);
}

TEST(ReclaimerTest, TB07_ACredentialRecordIsReleasedOnceEverySlotIsQuiet) {
  // The appliance's two tables: buckets, and the TB07 records (8 slots each).
  BucketTable buckets({.capacity = 4096, .regions = 64, .bucket_kinds = 1});
  BucketTable records({.capacity = 4096, .regions = 64, .bucket_kinds = 1, .words = 8});
  const limiter::CompiledPolicy p = policy_with_bucket(limit(60, 5), 10 * kMin);
  constexpr unsigned kSlots = 8;
  constexpr Nanos kQuiet = 60 * kSec;
  time::ManualClock clock(kT0);
  Reclaimer reclaimer({buckets_entry(buckets, p, clock),
                       {"credential_slots", &records,
                        [&clock] {
                          const Nanos now = clock.now();
                          return BucketTable::IdlePredicate([now](uint16_t, const uint64_t* words) {
                            return limiter::credential_record_idle(words, kSlots, kQuiet, now);
                          });
                        }}},
                      [] {});
  auto take = [&](const BucketKey& address, uint32_t tag) {
    return limiter::take_credential_slot(records, address, tag, kSlots, kQuiet, clock.now());
  };
  const BucketKey a = key_of(0, 1), b = key_of(0, 2);

  // Address a uses eight credentials (its ceiling), b one.
  for (uint32_t tag = 1; tag <= kSlots; ++tag) ASSERT_TRUE(take(a, tag)) << tag;
  ASSERT_FALSE(take(a, 9));
  ASSERT_TRUE(take(b, 1));
  clock.advance(30 * kSec);
  ASSERT_TRUE(take(a, 3));  // one credential of a is used again at +30 s
  ASSERT_EQ(records.count_live(), 2u);

  // At +59 s every record has a slot used within the quiet time: both kept,
  // and a's slots are still all held.
  clock.set(kT0 + 59 * kSec);
  sweep(reclaimer, records.regions());
  EXPECT_EQ(reclaimer.freed(1), 0u);
  EXPECT_EQ(records.count_live(), 2u);
  EXPECT_FALSE(take(a, 9));

  // At +60 s b has been quiet for the quiet time: released. a is kept while
  // credential 3 (used at +30 s) is not quiet.
  clock.set(kT0 + 60 * kSec);
  sweep(reclaimer, records.regions());
  EXPECT_EQ(reclaimer.freed(1), 1u);
  EXPECT_EQ(records.find(b), nullptr);
  EXPECT_NE(records.find(a), nullptr);
  clock.set(kT0 + 89 * kSec);
  sweep(reclaimer, records.regions());
  EXPECT_EQ(reclaimer.freed(1), 1u);
  EXPECT_NE(records.find(a), nullptr);

  // At +90 s credential 3 has been quiet for 60 s too: a is released.
  clock.set(kT0 + 90 * kSec);
  sweep(reclaimer, records.regions());
  EXPECT_EQ(reclaimer.freed(1), 2u);
  EXPECT_EQ(records.count_live(), 0u);
  EXPECT_EQ(reclaimer.freed(0), 0u);  // per table: the bucket table had nothing

  // A released record comes back empty: a new credential takes a slot.
  EXPECT_TRUE(take(a, 9));
  EXPECT_TRUE(take(b, 2));
  EXPECT_EQ(records.count_live(), 2u);
}

TEST(ReclaimerTest, APredicateSayingNotIdleRetiresNothing) {
  BucketTable t({.capacity = 4096, .regions = 64, .bucket_kinds = 1});
  const GcraLimit l = limit(60, 5);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_FALSE(limiter::charge_gcra(t, key_of(0, i), kT0, l).overflow);
  size_t asked = 0, made = 0;
  Reclaimer reclaimer({{"buckets", &t,
                        [&] {
                          ++made;
                          return BucketTable::IdlePredicate([&](uint16_t, const uint64_t* words) {
                            ++asked;
                            EXPECT_TRUE(limiter::gcra_full(words[0], kT0 + 60 * kMin));  // idle by any clock...
                            return false;  // ...but not by this predicate
                          });
                        }}},
                      [] {});
  for (int s = 0; s < 2; ++s) sweep(reclaimer, t.regions());
  EXPECT_EQ(reclaimer.freed(0), 0u);
  EXPECT_EQ(t.count_live(), 1000u);
  EXPECT_EQ(asked, 2 * 1000u);  // every live bucket asked once per sweep
  EXPECT_EQ(made, 2 * 64u);     // the predicate made once per step
  for (uint64_t i = 0; i < 1000; ++i) {
    const BucketTable::Found f = t.find_or_claim(key_of(0, i));
    ASSERT_FALSE(f.overflow);
    EXPECT_EQ(f.slot->load(0), kT0 + kSec) << i;  // the state is untouched
  }
}

TEST(ReclaimerTest, AStepClosesAndReopensOneRegionOfEachTable) {
  BucketTable small({.capacity = 128, .regions = 2, .bucket_kinds = 1});
  BucketTable large({.capacity = 256, .regions = 4, .bucket_kinds = 1});
  // A key already in every region of each table.
  std::vector<BucketKey> old_small, old_large;
  for (unsigned r = 0; r < 2; ++r) {
    old_small.push_back(key_in_region(0, r, 2));
    ASSERT_FALSE(small.find_or_claim(old_small.back()).overflow);
  }
  for (unsigned r = 0; r < 4; ++r) {
    old_large.push_back(key_in_region(0, r, 4));
    ASSERT_FALSE(large.find_or_claim(old_large.back()).overflow);
  }
  // Keys no table has seen yet, one per step and region.
  auto new_small = [](unsigned step, unsigned r) { return key_in_region(0, r, 2, 1'000'000 + 1000 * (4 * step + r)); };
  auto new_large = [](unsigned step, unsigned r) { return key_in_region(0, r, 4, 2'000'000 + 1000 * (4 * step + r)); };
  unsigned step = 0, waits = 0;
  std::vector<std::string> order;
  auto never = [](uint16_t, const uint64_t*) { return false; };
  Reclaimer reclaimer({{"small", &small,
                        [&] {
                          order.push_back("small");
                          return BucketTable::IdlePredicate(never);
                        }},
                       {"large", &large,
                        [&] {
                          order.push_back("large");
                          return BucketTable::IdlePredicate(never);
                        }}},
                      [&] {
                        ++waits;
                        order.push_back("wait");
                        // Step s closes region s of each table, wrapping per table.
                        const unsigned rs = step % 2, rl = step % 4;
                        for (unsigned r = 0; r < 2; ++r) {
                          EXPECT_FALSE(small.find_or_claim(old_small[r]).overflow);  // known keys are still found
                          EXPECT_EQ(small.find_or_claim(new_small(step, r)).overflow, r == rs)
                              << "step " << step << " small region " << r;
                        }
                        for (unsigned r = 0; r < 4; ++r) {
                          EXPECT_FALSE(large.find_or_claim(old_large[r]).overflow);
                          EXPECT_EQ(large.find_or_claim(new_large(step, r)).overflow, r == rl)
                              << "step " << step << " large region " << r;
                        }
                      });
  for (; step < 8; ++step) {
    order.clear();
    const uint64_t overflows_small = small.overflows(), overflows_large = large.overflows();
    EXPECT_EQ(reclaimer.step(), 0u);
    // The predicates are asked for between the two grace periods.
    EXPECT_EQ(order, (std::vector<std::string>{"wait", "small", "large", "wait"})) << "step " << step;
    // One new key of each table was refused a slot, in both grace periods.
    EXPECT_EQ(small.overflows(), overflows_small + 2) << "step " << step;
    EXPECT_EQ(large.overflows(), overflows_large + 2) << "step " << step;
    // Reopened: the key refused a slot gets one now.
    EXPECT_FALSE(small.find_or_claim(new_small(step, step % 2)).overflow) << "step " << step;
    EXPECT_FALSE(large.find_or_claim(new_large(step, step % 4)).overflow) << "step " << step;
  }
  EXPECT_EQ(waits, 16u);
  // Every key of the test has a slot: 2 old and 8 x 2 new; 4 old and 8 x 4 new.
  EXPECT_EQ(small.count_live(), 2u + 16u);
  EXPECT_EQ(large.count_live(), 4u + 32u);
}

}  // namespace
}  // namespace sluice::control
