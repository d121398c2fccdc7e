// sluiced's log (control/log.h): the level filter, each kind's
// rate (a burst, then suppressed, then one line saying how many), the
// stderr lines and journal entries records become, the settings' values,
// and the process-wide logger's installation. A fake sink keeps what the
// logger wrote; a manual clock drives the rates.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "control/log.h"

namespace sluice::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using TimePoint = std::chrono::steady_clock::time_point;

struct Written {
  LogLevel level;
  LogEvent event;
  std::string message;
  std::vector<std::pair<std::string, std::string>> fields;
};

class FakeSink final : public LogSink {
 public:
  explicit FakeSink(std::vector<Written>& out) : out_(out) {}
  void write(const LogRecord& r) noexcept override {
    Written w{r.level, r.event, std::string(r.message), {}};
    for (const LogField& f : r.fields) w.fields.emplace_back(f.name, f.value);
    out_.push_back(std::move(w));
  }

 private:
  std::vector<Written>& out_;
};

// A logger over a fake sink and a clock the test moves.
struct Fixture {
  explicit Fixture(LogLevel minimum = LogLevel::kDebug, LogRate rate = {1, 3})
      : logger(std::make_unique<FakeSink>(written), minimum, rate, [this] { return now; }) {}
  std::vector<Written> written;
  TimePoint now{seconds(1000)};
  Logger logger;
};

std::string field(const Written& w, const std::string& name) {
  for (const auto& [n, v] : w.fields) {
    if (n == name) return v;
  }
  return "(none)";
}

TEST(Log, TheLevelFilterKeepsTheMinimumAndWhatIsMoreSevere) {
  Fixture f(LogLevel::kWarning, {1, 100});
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarning, LogLevel::kNotice, LogLevel::kInfo, LogLevel::kDebug}) {
    f.logger.log(l, LogEvent::kGeneral, std::string(level_name(l)));
  }
  ASSERT_EQ(f.written.size(), 2u);
  EXPECT_EQ(f.written[0].message, "error");
  EXPECT_EQ(f.written[1].message, "warning");
  EXPECT_TRUE(f.logger.enabled(LogLevel::kWarning));
  EXPECT_FALSE(f.logger.enabled(LogLevel::kNotice));
  Fixture debug(LogLevel::kDebug);
  EXPECT_TRUE(debug.logger.enabled(LogLevel::kDebug));
}

TEST(Log, FilteredMessagesSpendNoneOfTheRate) {
  Fixture f(LogLevel::kNotice, {1, 2});
  for (int i = 0; i < 10; ++i) f.logger.log(LogLevel::kDebug, LogEvent::kCluster, "noise");
  f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "a");
  f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "b");
  ASSERT_EQ(f.written.size(), 2u);
  EXPECT_EQ(f.written[1].message, "b");
}

TEST(Log, ABurstThenSuppressedThenOneLineSaysHowMany) {
  Fixture f(LogLevel::kDebug, {1, 3});
  for (int i = 0; i < 10; ++i) f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "flap " + std::to_string(i));
  ASSERT_EQ(f.written.size(), 3u);  // the burst
  EXPECT_EQ(f.written[2].message, "flap 2");
  f.now += milliseconds(500);
  f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "still too soon");
  EXPECT_EQ(f.written.size(), 3u);
  f.now += milliseconds(500);  // a token a second
  f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "heard again");
  ASSERT_EQ(f.written.size(), 5u);
  EXPECT_EQ(f.written[3].message, "8 cluster messages suppressed (more than 3 at once, then 1 a second)");
  EXPECT_EQ(f.written[3].level, LogLevel::kWarning);
  EXPECT_EQ(f.written[3].event, LogEvent::kCluster);
  EXPECT_EQ(field(f.written[3], "SLUICE_SUPPRESSED"), "8");
  EXPECT_EQ(f.written[4].message, "heard again");
  // The count starts again: no second suppression line.
  f.now += seconds(1);
  f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "next");
  ASSERT_EQ(f.written.size(), 6u);
  EXPECT_EQ(f.written[5].message, "next");
}

TEST(Log, TheRateRefillsUpToTheBurstOnly) {
  Fixture f(LogLevel::kDebug, {2, 3});
  for (int i = 0; i < 3; ++i) f.logger.log(LogLevel::kInfo, LogEvent::kPolicy, "x");
  f.now += seconds(3600);
  for (int i = 0; i < 10; ++i) f.logger.log(LogLevel::kInfo, LogEvent::kPolicy, "y");
  // 3, then after an hour 3 again (the burst), not 7200.
  EXPECT_EQ(f.written.size(), 6u);
}

TEST(Log, KindsAreLimitedApart) {
  Fixture f(LogLevel::kDebug, {1, 2});
  for (int i = 0; i < 50; ++i) f.logger.log(LogLevel::kWarning, LogEvent::kCluster, "flood");
  f.logger.log(LogLevel::kNotice, LogEvent::kPolicy, "policy published");
  ASSERT_EQ(f.written.size(), 3u);
  EXPECT_EQ(f.written[2].message, "policy published");
  f.logger.set_rate(LogEvent::kRefusal, {100, 100});
  for (int i = 0; i < 100; ++i) f.logger.log(LogLevel::kInfo, LogEvent::kRefusal, "refusal");
  EXPECT_EQ(f.written.size(), 103u);
}

TEST(Log, SuppressedCountsAreReportedOnceTheKindMayWriteAgain) {
  Fixture f(LogLevel::kDebug, {1, 1});
  f.logger.log(LogLevel::kInfo, LogEvent::kSnapshot, "one");
  f.logger.log(LogLevel::kError, LogEvent::kSnapshot, "an error, suppressed");
  f.logger.log(LogLevel::kInfo, LogEvent::kSnapshot, "info, suppressed");
  f.logger.report_suppressed();  // no token yet: nothing
  ASSERT_EQ(f.written.size(), 1u);
  f.now += seconds(1);
  f.logger.report_suppressed();
  ASSERT_EQ(f.written.size(), 2u);
  EXPECT_EQ(f.written[1].message, "2 snapshot messages suppressed (more than 1 at once, then 1 a second)");
  EXPECT_EQ(f.written[1].level, LogLevel::kError);  // the most severe of those suppressed
  f.now += seconds(1);
  f.logger.report_suppressed();  // said once
  EXPECT_EQ(f.written.size(), 2u);
}

TEST(Log, AMessageIsOneLine) {
  Fixture f;
  f.logger.log(LogLevel::kNotice, LogEvent::kPolicy, "policy from odd\nsluiced: forged.yaml\r published");
  ASSERT_EQ(f.written.size(), 1u);
  EXPECT_EQ(f.written[0].message, "policy from odd?sluiced: forged.yaml? published");
}

TEST(Log, StderrLinesKeepSluicedsFormat) {
  const LogRecord warning{LogLevel::kWarning, LogEvent::kCluster, "cluster sync failed (x)", {}};
  EXPECT_EQ(stderr_line(warning), "sluiced: warning: cluster sync failed (x)\n");
  const LogRecord notice{LogLevel::kNotice, LogEvent::kSnapshot, "restored 3 buckets", {}};
  EXPECT_EQ(stderr_line(notice), "sluiced: restored 3 buckets\n");
  const LogField fields[] = {{"SLUICE_RULE", "per-ip"}};
  const LogRecord info{LogLevel::kInfo, LogEvent::kRefusal, "refusal: rule=per-ip status=429 key=198.18.0.7", fields};
  EXPECT_EQ(stderr_line(info), "sluiced: refusal: rule=per-ip status=429 key=198.18.0.7\n");
  const LogRecord error{LogLevel::kError, LogEvent::kGeneral, "e", {}};
  EXPECT_EQ(stderr_line(error), "sluiced: error: e\n");
  const LogRecord debug{LogLevel::kDebug, LogEvent::kGeneral, "d", {}};
  EXPECT_EQ(stderr_line(debug), "sluiced: debug: d\n");
}

TEST(Log, TheStderrSinkWritesWholeLines) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  Logger logger(std::make_unique<StderrSink>(out), LogLevel::kInfo);
  logger.log(LogLevel::kWarning, LogEvent::kState, "runs.journal: line 3: torn record skipped");
  logger.log(LogLevel::kDebug, LogEvent::kState, "not written");
  std::rewind(out);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, out);
  std::fclose(out);
  EXPECT_EQ(std::string(buf, n), "sluiced: warning: runs.journal: line 3: torn record skipped\n");
}

TEST(Log, JournalEntriesCarryTheFields) {
  const LogField fields[] = {{"SLUICE_RULE", "per-ip"},
                             {"SLUICE_STATUS", "429"},
                             {"SLUICE_KEY", "a\nb"},
                             {"lower_case", "dropped"},
                             {"_TRUSTED", "dropped"},
                             {"9LIVES", "dropped"},
                             {"", "dropped"}};
  const LogRecord r{LogLevel::kInfo, LogEvent::kRefusal, "refusal: rule=per-ip status=429 key=a?b", fields};
  const std::vector<std::string> want = {"MESSAGE=refusal: rule=per-ip status=429 key=a?b",
                                         "PRIORITY=6",
                                         "SYSLOG_IDENTIFIER=sluiced",
                                         "SLUICE_EVENT=refusal",
                                         "SLUICE_RULE=per-ip",
                                         "SLUICE_STATUS=429",
                                         "SLUICE_KEY=a?b"};
  EXPECT_EQ(journal_fields(r), want);
  const LogRecord warning{LogLevel::kWarning, LogEvent::kCluster, "w", {}};
  EXPECT_EQ(journal_fields(warning)[1], "PRIORITY=4");
  EXPECT_EQ(journal_fields(warning)[3], "SLUICE_EVENT=cluster");
  EXPECT_EQ(syslog_priority(LogLevel::kError), 3);
  EXPECT_EQ(syslog_priority(LogLevel::kDebug), 7);
}

// What the logger hands its sink is what journal_fields() turns into an
// entry: the fields the caller gave, in order.
TEST(Log, TheLoggerHandsTheCallersFieldsToItsSink) {
  Fixture f;
  f.logger.log(LogLevel::kInfo, LogEvent::kRefusal, "refusal: rule=r status=429 key=k",
               {{"SLUICE_RULE", "r"}, {"SLUICE_STATUS", "429"}, {"SLUICE_KEY", "k"}, {"SLUICE_WORKER", "1"}});
  ASSERT_EQ(f.written.size(), 1u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"SLUICE_RULE", "r"}, {"SLUICE_STATUS", "429"}, {"SLUICE_KEY", "k"}, {"SLUICE_WORKER", "1"}};
  EXPECT_EQ(f.written[0].fields, want);
  EXPECT_EQ(f.written[0].event, LogEvent::kRefusal);
}

TEST(Log, TheJournalIsStderrOnlyWhenJournalStreamNamesIt) {
  EXPECT_TRUE(journal_stream_matches("8:1234", 8, 1234));
  EXPECT_FALSE(journal_stream_matches("8:1234", 8, 1235));
  EXPECT_FALSE(journal_stream_matches("9:1234", 8, 1234));
  EXPECT_FALSE(journal_stream_matches(nullptr, 8, 1234));
  for (const char* bad : {"", ":", "8:", ":1234", "8:1234x", "x8:1234", "8;1234", "8:-1"}) {
    EXPECT_FALSE(journal_stream_matches(bad, 8, 1234)) << bad;
  }
}

TEST(Log, TheOptionsValues) {
  EXPECT_EQ(parse_log_level("error"), LogLevel::kError);
  EXPECT_EQ(parse_log_level("warning"), LogLevel::kWarning);
  EXPECT_EQ(parse_log_level("notice"), LogLevel::kNotice);
  EXPECT_EQ(parse_log_level("info"), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("WARNING"), std::nullopt);
  EXPECT_EQ(parse_log_level("warn"), std::nullopt);
  EXPECT_EQ(parse_log_target("auto"), LogTarget::kAuto);
  EXPECT_EQ(parse_log_target("stderr"), LogTarget::kStderr);
  EXPECT_EQ(parse_log_target("journal"), LogTarget::kJournal);
  EXPECT_EQ(parse_log_target("syslog"), std::nullopt);
  EXPECT_EQ(parse_refusal_rate("off"), 0u);
  EXPECT_EQ(parse_refusal_rate("0"), 0u);
  EXPECT_EQ(parse_refusal_rate("5"), 5u);
  EXPECT_EQ(parse_refusal_rate("10000"), 10000u);
  for (const char* bad : {"10001", "-1", "5x", "", " 5", "1e3", "99999999999999999999"}) {
    EXPECT_EQ(parse_refusal_rate(bad), std::nullopt) << bad;
  }
}

TEST(Log, TheProcessLogIsTheInstalledOneForItsLifetime) {
  Fixture outer, inner;
  {
    const ProcessLog a(outer.logger);
    log(LogLevel::kWarning, LogEvent::kCluster, "to outer");
    {
      const ProcessLog b(inner.logger);
      log(LogLevel::kNotice, LogEvent::kPolicy, "to inner", {{"SLUICE_POLICY", "p"}});
    }
    log(LogLevel::kWarning, LogEvent::kCluster, "outer again");
  }
  EXPECT_NE(&process_log(), &outer.logger);
  ASSERT_EQ(outer.written.size(), 2u);
  EXPECT_EQ(outer.written[1].message, "outer again");
  ASSERT_EQ(inner.written.size(), 1u);
  EXPECT_EQ(field(inner.written[0], "SLUICE_POLICY"), "p");
}

// Several control threads log at once: every message is written once, none
// torn (the sink sees one record at a time, under the logger's lock).
TEST(Log, ThreadsLogAtOnce) {
  Fixture f(LogLevel::kDebug, {1, 100000});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&f, t] {
      for (int i = 0; i < 2000; ++i) {
        f.logger.log(LogLevel::kInfo, static_cast<LogEvent>(t % 2), "thread " + std::to_string(t));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(f.written.size(), 8000u);
}

}  // namespace
}  // namespace sluice::control
