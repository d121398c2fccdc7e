// The busiest-keys table (dataplane/busy_keys.h): space-saving's promises on
// skewed and weighted streams, labels kept whole, and a reader that
// snapshots while the worker records.
#include "dataplane/busy_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sluice::test {
namespace {

using dataplane::BusyKeys;
using limiter::KeyLabel;

// Key `i`'s label: its text, and a hash with bit 63 set as BucketKey::k0's is.
KeyLabel label(uint32_t i) {
  KeyLabel l;
  l.kind = KeyLabel::Kind::kText;
  const std::string text = "key-" + std::to_string(i);
  std::memcpy(l.bytes.data(), text.data(), text.size());
  l.len = static_cast<uint8_t>(text.size());
  l.key_hash = (uint64_t{1} << 63) | (uint64_t{i} * 0x9e3779b97f4a7c15ull >> 1);
  return l;
}

std::string text_of(const KeyLabel& l) {
  return std::string(reinterpret_cast<const char*>(l.bytes.data()), l.len);
}

// A deterministic stream, skewed the way traffic is: key i about 1/(i+1)
// as often as key 0, over `keys` keys.
std::vector<uint32_t> skewed_stream(size_t n, uint32_t keys) {
  std::vector<double> cumulative(keys);
  double sum = 0;
  for (uint32_t i = 0; i < keys; ++i) cumulative[i] = sum += 1.0 / (i + 1);
  std::vector<uint32_t> out;
  out.reserve(n);
  uint64_t x = 0x2545f4914f6cdd1dull;
  while (out.size() < n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const double u = static_cast<double>(x >> 11) / static_cast<double>(uint64_t{1} << 53) * sum;
    const auto at = std::upper_bound(cumulative.begin(), cumulative.end(), u);
    out.push_back(static_cast<uint32_t>(std::min<ptrdiff_t>(at - cumulative.begin(), keys - 1)));
  }
  return out;
}

// Space-saving's promises, given each key's true weight and the total.
void expect_space_saving(const BusyKeys& t, const std::map<uint32_t, uint64_t>& truth, uint64_t total) {
  const std::vector<BusyKeys::Entry> snap = t.snapshot();
  ASSERT_LE(snap.size(), BusyKeys::kEntries);
  uint64_t sum = 0;
  std::map<std::string, const BusyKeys::Entry*> by_text;
  for (const BusyKeys::Entry& e : snap) {
    sum += e.count;
    by_text[text_of(e.label)] = &e;
  }
  // Every unit of weight recorded sits in exactly one count.
  EXPECT_EQ(sum, total);
  for (const auto& [key, weight] : truth) {
    const auto it = by_text.find(text_of(label(key)));
    if (weight * BusyKeys::kEntries > total) {
      ASSERT_NE(it, by_text.end()) << "key " << key << " (" << weight << " of " << total << ") is missing";
    }
    if (it == by_text.end()) continue;
    const BusyKeys::Entry& e = *it->second;
    EXPECT_GE(e.count, weight) << "key " << key << " under-estimated";
    EXPECT_LE(e.count - e.error, weight) << "key " << key << " over-estimated past its error";
    EXPECT_EQ(e.label.key_hash, label(key).key_hash);
  }
  EXPECT_TRUE(std::is_sorted(snap.begin(), snap.end(),
                             [](const BusyKeys::Entry& a, const BusyKeys::Entry& b) { return a.count > b.count; }));
}

TEST(BusyKeys, EmptyTableHasNoEntries) {
  const BusyKeys t;
  EXPECT_TRUE(t.snapshot().empty());
}

TEST(BusyKeys, FewKeysAreCountedExactly) {
  BusyKeys t;
  for (uint32_t i = 0; i < BusyKeys::kEntries; ++i) {
    for (uint32_t n = 0; n <= i; ++n) t.record(3, label(i), 1);
  }
  const std::vector<BusyKeys::Entry> snap = t.snapshot();
  ASSERT_EQ(snap.size(), BusyKeys::kEntries);
  for (size_t rank = 0; rank < snap.size(); ++rank) {
    const uint32_t key = static_cast<uint32_t>(BusyKeys::kEntries - 1 - rank);  // the largest count first
    EXPECT_EQ(text_of(snap[rank].label), "key-" + std::to_string(key));
    EXPECT_EQ(snap[rank].count, key + 1u);
    EXPECT_EQ(snap[rank].error, 0u);
    EXPECT_EQ(snap[rank].rule, 3);
  }
}

TEST(BusyKeys, LabelComesBackWhole) {
  BusyKeys t;
  KeyLabel l;
  l.kind = KeyLabel::Kind::kCredential;
  for (size_t i = 0; i < l.bytes.size(); ++i) l.bytes[i] = static_cast<uint8_t>(0xa0 + i);
  l.len = 32;
  l.key_hash = 0x8000'0000'dead'beefull;
  t.record(63, l, 5);
  const std::vector<BusyKeys::Entry> snap = t.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].rule, 63);
  EXPECT_EQ(snap[0].count, 5u);
  EXPECT_EQ(snap[0].label.kind, KeyLabel::Kind::kCredential);
  EXPECT_EQ(snap[0].label.len, 32);
  EXPECT_EQ(snap[0].label.bytes, l.bytes);
  EXPECT_EQ(snap[0].label.key_hash, l.key_hash);
}

TEST(BusyKeys, TheSameKeyUnderTwoRulesIsTwoEntries) {
  BusyKeys t;
  t.record(0, label(7), 1);
  t.record(1, label(7), 1);
  t.record(1, label(7), 1);
  const std::vector<BusyKeys::Entry> snap = t.snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].rule, 1);
  EXPECT_EQ(snap[0].count, 2u);
  EXPECT_EQ(snap[1].rule, 0);
  EXPECT_EQ(snap[1].count, 1u);
}

TEST(BusyKeys, ANewKeyTakesTheSmallestEntryAndItsCount) {
  BusyKeys t;
  for (uint32_t i = 0; i < BusyKeys::kEntries; ++i) t.record(0, label(i), i == 5 ? 1 : 10);
  t.record(0, label(100), 2);
  const std::vector<BusyKeys::Entry> snap = t.snapshot();
  ASSERT_EQ(snap.size(), BusyKeys::kEntries);
  const auto newcomer =
      std::find_if(snap.begin(), snap.end(), [](const BusyKeys::Entry& e) { return text_of(e.label) == "key-100"; });
  ASSERT_NE(newcomer, snap.end());
  EXPECT_EQ(newcomer->count, 3u);  // key-5's 1, plus its own 2
  EXPECT_EQ(newcomer->error, 1u);
  EXPECT_EQ(
      std::count_if(snap.begin(), snap.end(), [](const BusyKeys::Entry& e) { return text_of(e.label) == "key-5"; }), 0);
}

TEST(BusyKeys, HeavyKeysOfASkewedStreamAreAlwaysPresent) {
  BusyKeys t;
  std::map<uint32_t, uint64_t> truth;
  uint64_t total = 0;
  for (const uint32_t k : skewed_stream(200'000, 5000)) {
    t.record(0, label(k), 1);
    ++truth[k];
    ++total;
  }
  expect_space_saving(t, truth, total);
  // The stream has heavy keys to find: the test would be empty otherwise.
  size_t heavy = 0;
  for (const auto& [key, weight] : truth) heavy += weight * BusyKeys::kEntries > total;
  EXPECT_GE(heavy, 3u);
}

TEST(BusyKeys, WeightedRecordsKeepThePromises) {
  // As the flow engine records: refusals weighing 1, sampled admissions 16.
  BusyKeys t;
  std::map<uint32_t, uint64_t> truth;
  uint64_t total = 0;
  const std::vector<uint32_t> stream = skewed_stream(100'000, 2000);
  for (size_t i = 0; i < stream.size(); ++i) {
    const uint64_t w = i % 3 == 0 ? 16 : 1;
    t.record(0, label(stream[i]), w);
    truth[stream[i]] += w;
    total += w;
  }
  expect_space_saving(t, truth, total);
}

TEST(BusyKeys, AdversarialRoundRobinStillCountsTheHeavyKey) {
  // Many distinct keys, each once, evicting one another; one key is a third of the stream.
  BusyKeys t;
  std::map<uint32_t, uint64_t> truth;
  uint64_t total = 0;
  for (uint32_t i = 1; i <= 30'000; ++i) {
    const uint32_t k = i % 3 == 0 ? 0 : i;
    t.record(9, label(k), 1);
    ++truth[k];
    ++total;
  }
  expect_space_saving(t, truth, total);
  EXPECT_EQ(text_of(t.snapshot().front().label), "key-0");
}

TEST(BusyKeys, AReaderMaySnapshotWhileTheWorkerRecords) {
  // Race-free by construction (run under TSan to check): the reader sees
  // at most kEntries entries with counts, whatever mix of words it catches.
  BusyKeys t;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    size_t snapshots = 0;
    while (!done.load(std::memory_order_relaxed) || snapshots == 0) {
      const std::vector<BusyKeys::Entry> snap = t.snapshot();
      EXPECT_LE(snap.size(), BusyKeys::kEntries);
      for (const BusyKeys::Entry& e : snap) {
        EXPECT_GT(e.count, 0u);
        EXPECT_LE(e.error, e.count);
        EXPECT_LE(e.label.len, e.label.bytes.size());
      }
      ++snapshots;
    }
  });
  const std::vector<uint32_t> stream = skewed_stream(100'000, 1000);
  for (const uint32_t k : stream) t.record(static_cast<uint16_t>(k % 4), label(k), 1);
  done = true;
  reader.join();
  uint64_t sum = 0;
  for (const BusyKeys::Entry& e : t.snapshot()) sum += e.count;
  EXPECT_EQ(sum, stream.size());
}

}  // namespace
}  // namespace sluice::test
