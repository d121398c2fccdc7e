// sluice-replay's streaming (replay/time_merge.h, series_counter.h,
// key_rates.h's WindowPeak, access_log.h's AccessLogReader): inputs merged
// record by record in time order within their look-back, opened only when
// the merge reaches them; late records counted; time bins and key peaks
// worked out as records come, equal to what the whole input gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "replay/access_log.h"
#include "replay/key_rates.h"
#include "replay/outcome_tally.h"
#include "replay/series_counter.h"
#include "replay/time_merge.h"

namespace sluice::replay {
namespace {

constexpr time::Nanos kT0 = 1'796'000'000ull * time::kNanosPerSecond;
constexpr time::Nanos kSecond = time::kNanosPerSecond;

RequestRecord at(uint32_t input, uint64_t n, time::Nanos when) {
  RequestRecord r;
  r.at = when;
  r.input = input;
  r.record_number = n;
  r.order = record_order(input, n);
  return r;
}

// A source that hands out its records a few at a time, and says when it
// was opened.
class Scripted final : public RecordSource {
 public:
  explicit Scripted(std::vector<RequestRecord> records, size_t step = 3) : records_(std::move(records)), step_(step) {}
  bool next(std::vector<RequestRecord>& out) override {
    if (at_ == records_.size()) return false;
    for (size_t k = 0; k < step_ && at_ < records_.size(); ++k) out.push_back(records_[at_++]);
    return true;
  }

 private:
  std::vector<RequestRecord> records_;
  size_t step_;
  size_t at_ = 0;
};

std::vector<RequestRecord> drain(TimeMerge& m) {
  std::vector<RequestRecord> out;
  RequestRecord r;
  while (m.next(r)) out.push_back(r);
  return out;
}

TEST(TimeMerge, InterleavedInputsComeOutInTimeOrder) {
  std::vector<RequestRecord> a, b;
  for (uint64_t i = 0; i < 50; ++i) a.push_back(at(0, i + 1, kT0 + i * 2 * kSecond));
  for (uint64_t i = 0; i < 50; ++i) b.push_back(at(1, i + 1, kT0 + (i * 2 + 1) * kSecond));
  std::vector<MergeInput> in;
  in.push_back({.opened = std::make_unique<Scripted>(a)});
  in.push_back({.opened = std::make_unique<Scripted>(b, 7)});
  TimeMerge m(std::move(in), {});
  const std::vector<RequestRecord> out = drain(m);
  ASSERT_EQ(out.size(), 100u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].at, kT0 + i * kSecond) << i;
  EXPECT_EQ(m.kept(0), 50u);
  EXPECT_EQ(m.kept(1), 50u);
  EXPECT_EQ(m.late().records, 0u);
}

TEST(TimeMerge, EqualTimesGoInInputThenRecordOrder) {
  std::vector<MergeInput> in;
  in.push_back({.opened = std::make_unique<Scripted>(std::vector{at(1, 1, kT0), at(1, 2, kT0)})});
  in.push_back({.opened = std::make_unique<Scripted>(std::vector{at(0, 1, kT0), at(0, 2, kT0)})});
  TimeMerge m(std::move(in), {});
  const std::vector<RequestRecord> out = drain(m);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].order, record_order(0, 1));
  EXPECT_EQ(out[1].order, record_order(0, 2));
  EXPECT_EQ(out[2].order, record_order(1, 1));
  EXPECT_EQ(out[3].order, record_order(1, 2));
}

// nginx writes a line when its request ends; timed at its start, a slow
// request's line comes after quicker later ones. Within the look-back the
// merge puts it back in its place.
TEST(TimeMerge, RecordsOutOfOrderWithinTheLookBackArePutInOrder) {
  std::vector<RequestRecord> log;
  std::mt19937 rng(7);
  for (uint64_t i = 0; i < 2000; ++i) {
    const time::Nanos end = kT0 + i * 100'000'000;                 // a line every 100 ms
    const time::Nanos took = (rng() % 50) * 100'000'000;           // requests of up to 5 s
    log.push_back(at(0, i + 1, end - took));
  }
  std::vector<MergeInput> in;
  in.push_back({.opened = std::make_unique<Scripted>(log, 64), .look_back = 6 * kSecond});
  TimeMerge m(std::move(in), {});
  const std::vector<RequestRecord> out = drain(m);
  ASSERT_EQ(out.size(), log.size());
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end(), [](const RequestRecord& x, const RequestRecord& y) {
    return x.at != y.at ? x.at < y.at : x.order < y.order;
  }));
  EXPECT_EQ(m.late().records, 0u);
  // It held about the look-back's worth of lines (60), not the input.
  EXPECT_LT(m.most_held(), 200u);
}

TEST(TimeMerge, ARecordLaterThanTheLookBackIsCountedAndStillDecided) {
  std::vector<RequestRecord> log;
  for (uint64_t i = 0; i < 100; ++i) log.push_back(at(0, i + 1, kT0 + i * kSecond));
  log.push_back(at(0, 101, kT0 + 10 * kSecond));  // 89 s behind the line before it
  for (uint64_t i = 100; i < 110; ++i) log.push_back(at(0, i + 2, kT0 + i * kSecond));
  std::vector<MergeInput> in;
  in.push_back({.opened = std::make_unique<Scripted>(log), .look_back = 5 * kSecond});
  TimeMerge m(std::move(in), {});
  const std::vector<RequestRecord> out = drain(m);
  EXPECT_EQ(out.size(), log.size());
  EXPECT_EQ(m.late().records, 1u);
  EXPECT_GE(m.late().most, 80 * kSecond);
}

// A week of daily files: each opens when the merge reaches its first time,
// and the one before has ended (and let go of its reader) by then.
TEST(TimeMerge, AnInputOpensOnlyWhenTheMergeReachesIt) {
  int opened = 0, open_at_once = 0, most_at_once = 0;
  struct Counted final : RecordSource {
    Counted(std::vector<RequestRecord> r, int& count) : inner(std::move(r)), open(count) { ++count; }
    ~Counted() override { --open; }
    bool next(std::vector<RequestRecord>& out) override { return inner.next(out); }
    Scripted inner;
    int& open;
  };
  std::vector<MergeInput> in;
  for (uint32_t day = 0; day < 7; ++day) {
    std::vector<RequestRecord> records;
    for (uint64_t i = 0; i < 20; ++i) records.push_back(at(day, i + 1, kT0 + day * 86400 * kSecond + i * kSecond));
    in.push_back({.open =
                      [records, &opened, &open_at_once, &most_at_once]() -> std::unique_ptr<RecordSource> {
                        ++opened;
                        auto s = std::make_unique<Counted>(records, open_at_once);
                        most_at_once = std::max(most_at_once, open_at_once);
                        return s;
                      },
                  .starts = kT0 + day * 86400 * kSecond});
  }
  std::reverse(in.begin(), in.end());  // named in any order
  TimeMerge m(std::move(in), {});
  RequestRecord r;
  ASSERT_TRUE(m.next(r));
  EXPECT_EQ(opened, 1);
  size_t n = 1;
  while (m.next(r)) ++n;
  EXPECT_EQ(n, 140u);
  EXPECT_EQ(opened, 7);
  EXPECT_EQ(most_at_once, 1);
}

TEST(TimeMerge, SinceAndUntilKeepTheirWindowAndCountPerInput) {
  std::vector<RequestRecord> log;
  for (uint64_t i = 0; i < 100; ++i) log.push_back(at(0, i + 1, kT0 + i * kSecond));
  std::vector<MergeInput> in;
  in.push_back({.opened = std::make_unique<Scripted>(log)});
  TimeMerge m(std::move(in), {.since = kT0 + 10 * kSecond, .until = kT0 + 20 * kSecond});
  const std::vector<RequestRecord> out = drain(m);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out.front().at, kT0 + 10 * kSecond);
  EXPECT_EQ(m.kept(0), 10u);
}

TEST(WindowPeak, EqualsTheBusiestWindowOfAllTheTimes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<time::Nanos> times;
    time::Nanos t = kT0;
    for (int i = 0; i < 500; ++i) times.push_back(t += (rng() % 2000) * 1'000'000);
    const time::Nanos period = (1 + rng() % 30) * kSecond;
    uint64_t best = 0;
    for (size_t i = 0; i < times.size(); ++i) {
      const auto end = std::lower_bound(times.begin(), times.end(), times[i] + period);
      best = std::max<uint64_t>(best, static_cast<uint64_t>(end - (times.begin() + static_cast<std::ptrdiff_t>(i))));
    }
    WindowPeak peak(period, 65536);
    for (time::Nanos x : times) peak.add(x);
    EXPECT_EQ(peak.peak(), best) << trial;
    EXPECT_FALSE(peak.cut());
  }
}

TEST(WindowPeak, APeakPastTheCapIsCutAndSaysSo) {
  WindowPeak peak(60 * kSecond, peak_cap(10));  // 64: past 3 times the limit
  for (int i = 0; i < 1000; ++i) peak.add(kT0 + static_cast<time::Nanos>(i) * 1'000'000);
  EXPECT_EQ(peak.peak(), 64u);
  EXPECT_TRUE(peak.cut());
  EXPECT_GT(static_cast<double>(peak.peak()), RateDistribution::kMaxRatio * 10);
}

// The bins worked out as the times come equal those of the whole span,
// for spans that keep seconds, minutes and hours.
TEST(SeriesCounter, BinsEqualThoseCountedWithTheSpanKnown) {
  for (time::Nanos span : {90 * kSecond, 5 * 3600 * kSecond, 12 * 86400 * kSecond}) {
    std::mt19937_64 rng(span);
    std::vector<time::Nanos> times;
    const time::Nanos first = kT0 + 1234 * kSecond + 567;
    for (int i = 0; i < 3000; ++i) times.push_back(first + rng() % span);
    times.push_back(first);
    std::sort(times.begin(), times.end());
    SeriesCounter c(1);
    for (size_t i = 0; i < times.size(); ++i) c.count(0, times[i], i % 3 == 0);
    const TimeSeries s = c.finish({"r"}, times.front(), times.back());
    const time::Nanos bin = bin_width_for(times.back() - times.front());
    ASSERT_EQ(s.bin, bin);
    EXPECT_EQ(s.start, times.front() - times.front() % bin);
    std::vector<uint64_t> requests((times.back() - s.start) / bin + 1), refused(requests.size());
    for (size_t i = 0; i < times.size(); ++i) {
      ++requests[(times[i] - s.start) / bin];
      if (i % 3 == 0) ++refused[(times[i] - s.start) / bin];
    }
    ASSERT_EQ(s.rules.size(), 1u);
    EXPECT_EQ(s.rules[0].requests, requests) << span;
    EXPECT_EQ(s.rules[0].refused, refused) << span;
  }
}

// A log read a step at a time gives what reading it whole gives, and its
// problems at their lines.
TEST(AccessLogReader, StepsGiveTheWholeLogInLineOrder) {
  const std::string path = ::testing::TempDir() + "/stream.log";
  {
    std::ofstream f(path);
    for (int i = 0; i < 30000; ++i) {
      if (i == 12345) f << "not a log line\n";
      f << "198.18.0." << (i % 200 + 1) << " - - [02/Dec/2026:13:20:" << (i / 1000 % 60 < 10 ? "0" : "")
        << i / 1000 % 60 << " +0000] \"GET /item/" << i << " HTTP/1.1\" 200 5 \"-\" \"t\"\n";
    }
  }
  const InputResult whole = read_access_log(path, 0, {});
  InputResult result;
  LogBuffers buffers;
  AccessLogReader reader(path, 0, {}, buffers, result);
  std::vector<RequestRecord> all, batch;
  size_t steps = 0;
  while (reader.next(batch)) {
    ++steps;
    all.insert(all.end(), batch.begin(), batch.end());
    batch.clear();
  }
  EXPECT_GT(steps, 0u);
  ASSERT_EQ(all.size(), 30000u);
  ASSERT_EQ(whole.records.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i].head, whole.records[i].head);
    ASSERT_EQ(all[i].record_number, whole.records[i].record_number);
  }
  EXPECT_EQ(result.units_read, 30001u);
  ASSERT_EQ(result.problem_count, 1u);
  EXPECT_EQ(result.problems[0].where, path + ":12346:1");
  EXPECT_FALSE(reader.logs_durations());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sluice::replay
