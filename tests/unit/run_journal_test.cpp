// The runs journal: what a restart of sluiced replays, including after a
// crash mid-append (a torn last record) and after damage in the middle.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "control/crc32c.h"
#include "control/run_journal.h"
#include "scratch_dir.h"

namespace sluice::control {

// Found by GoogleTest through LiveRun's namespace.
void PrintTo(const LiveRun& r, std::ostream* os) {
  *os << "{" << r.token << " " << r.budget << " " << r.started_unix << "}";
}

namespace {

constexpr const char* kHeaderLine = "# sluice runs journal v1\n";

// A fresh directory under /tmp per test, removed afterwards.
class RunJournalTest : public ::testing::Test {
 protected:
  test::ScratchDir scratch_{"sluice-run-journal-test"};
  std::string dir_ = scratch_.path();
  std::string path_ = dir_ + "/runs.journal";

  std::string slurp() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void spit(const std::string& bytes) const { std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes; }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::ifstream in(path_);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  static std::string with_crc(const std::string& body) {
    char buf[16];
    std::snprintf(buf, sizeof buf, " %08x\n", crc32c(body));
    return body + buf;
  }

  // Opens, expecting a usable journal with no warnings.
  std::vector<LiveRun> open_clean(RunJournal& j) const {
    const RunJournal::Replay r = j.open(dir_);
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.warnings, std::vector<std::string>{});
    return r.live;
  }

};

TEST(RunToken, Validation) {
  EXPECT_TRUE(valid_run_token("a"));
  EXPECT_TRUE(valid_run_token("AZaz09._~-"));
  EXPECT_TRUE(valid_run_token(std::string(128, 'x')));
  EXPECT_FALSE(valid_run_token(""));
  EXPECT_FALSE(valid_run_token(std::string(129, 'x')));
  for (const char* bad : {"a b", "a/b", "a\nb", "é", "a+b", "a%20"}) EXPECT_FALSE(valid_run_token(bad)) << bad;
}

TEST(RunJournalCrc, IsCrc32c) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(crc32c(""), 0u);
}

TEST_F(RunJournalTest, StartsEmptyWithAHeader) {
  RunJournal j;
  EXPECT_EQ(open_clean(j), std::vector<LiveRun>{});
  EXPECT_EQ(slurp(), kHeaderLine);
  EXPECT_EQ(j.records(), 0u);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(RunJournalTest, RoundTripAcrossReopen) {
  {
    RunJournal j;
    open_clean(j);
    ASSERT_EQ(j.append_start({"alpha", 60, 1700000000}), "");
    ASSERT_EQ(j.append_start({"beta", 0, 1700000001}), "");
    ASSERT_EQ(j.append_start({"gamma", 5, -3}), "");
    ASSERT_EQ(j.append_end("beta"), "");
    EXPECT_EQ(j.records(), 4u);
    EXPECT_EQ(j.live(), (std::vector<LiveRun>{{"alpha", 60, 1700000000}, {"gamma", 5, -3}}));
  }
  EXPECT_EQ(slurp(), std::string(kHeaderLine) + with_crc("S alpha 60 1700000000") + with_crc("S beta 0 1700000001") +
                         with_crc("S gamma 5 -3") + with_crc("E beta"));
  RunJournal j;
  EXPECT_EQ(open_clean(j), (std::vector<LiveRun>{{"alpha", 60, 1700000000}, {"gamma", 5, -3}}));
  EXPECT_EQ(j.records(), 4u);
}

TEST_F(RunJournalTest, RestartOfALiveRunChangesOnlyItsBudget) {
  {
    RunJournal j;
    open_clean(j);
    ASSERT_EQ(j.append_start({"a", 100, 10}), "");
    ASSERT_EQ(j.append_start({"b", 7, 11}), "");
    ASSERT_EQ(j.append_start({"a", 200, 12}), "");
    ASSERT_EQ(j.append_end("never-started"), "");
  }
  RunJournal j;
  EXPECT_EQ(open_clean(j), (std::vector<LiveRun>{{"a", 200, 10}, {"b", 7, 11}}));
  // Ended and started again: a new run, at the back.
  ASSERT_EQ(j.append_end("a"), "");
  ASSERT_EQ(j.append_start({"a", 1, 20}), "");
  RunJournal again;
  EXPECT_EQ(open_clean(again), (std::vector<LiveRun>{{"b", 7, 11}, {"a", 1, 20}}));
}

TEST_F(RunJournalTest, RefusesAnInvalidTokenWithoutWriting) {
  RunJournal j;
  open_clean(j);
  EXPECT_NE(j.append_start({"a b", 1, 1}), "");
  EXPECT_NE(j.append_start({"", 1, 1}), "");
  EXPECT_NE(j.append_end("a\nS x 1 1"), "");
  EXPECT_EQ(slurp(), kHeaderLine);
  EXPECT_EQ(j.records(), 0u);
}

TEST_F(RunJournalTest, TornTailWithoutNewlineIsSkippedAndCutOff) {
  {
    RunJournal j;
    open_clean(j);
    ASSERT_EQ(j.append_start({"a", 1, 1}), "");
    ASSERT_EQ(j.append_start({"b", 2, 2}), "");
  }
  const std::string good = slurp();
  spit(good + "S half 6");  // the daemon stopped mid-write
  {
    RunJournal j;
    const RunJournal::Replay r = j.open(dir_);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.warnings,
              std::vector<std::string>{path_ + ": line 4: torn record skipped (written while the daemon stopped?)"});
    EXPECT_EQ(r.live, (std::vector<LiveRun>{{"a", 1, 1}, {"b", 2, 2}}));
    EXPECT_EQ(slurp(), good);
    ASSERT_EQ(j.append_start({"c", 3, 3}), "");
  }
  RunJournal j;
  EXPECT_EQ(open_clean(j), (std::vector<LiveRun>{{"a", 1, 1}, {"b", 2, 2}, {"c", 3, 3}}));
  EXPECT_EQ(slurp(), good + with_crc("S c 3 3"));
}

TEST_F(RunJournalTest, TornTailWithBadChecksumIsSkippedAndCutOff) {
  {
    RunJournal j;
    open_clean(j);
    ASSERT_EQ(j.append_start({"a", 1, 1}), "");
    ASSERT_EQ(j.append_start({"b", 2, 2}), "");
    ASSERT_EQ(j.append_end("a"), "");
  }
  std::string text = slurp();
  const std::string before_last = text.substr(0, text.size() - with_crc("E a").size());
  text[text.size() - 4] ^= 0x01;  // one bit of the last record's checksum
  spit(text);
  {
    RunJournal j;
    const RunJournal::Replay r = j.open(dir_);
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.warnings,
              std::vector<std::string>{path_ + ": line 4: torn record skipped (written while the daemon stopped?)"});
    EXPECT_EQ(r.live, (std::vector<LiveRun>{{"a", 1, 1}, {"b", 2, 2}}));  // the end of a never took
    EXPECT_EQ(slurp(), before_last);
    ASSERT_EQ(j.append_end("b"), "");
  }
  RunJournal j;
  EXPECT_EQ(open_clean(j), (std::vector<LiveRun>{{"a", 1, 1}}));
  EXPECT_EQ(slurp(), before_last + with_crc("E b"));
}

TEST_F(RunJournalTest, CorruptMiddleLineIsSkippedAndTheRestKept) {
  {
    RunJournal j;
    open_clean(j);
    for (const char* t : {"a", "b", "c", "d"}) ASSERT_EQ(j.append_start({t, 9, 9}), "");
    ASSERT_EQ(j.append_end("d"), "");
  }
  std::string text = slurp();
  const size_t b_at = text.find("S b 9 9");
  ASSERT_NE(b_at, std::string::npos);
  text[b_at + 4] = '8';  // budget 9 -> 8: the checksum no longer holds
  spit(text);
  RunJournal j;
  const RunJournal::Replay r = j.open(dir_);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.warnings, std::vector<std::string>{path_ + ": line 3: corrupt record skipped (bad checksum)"});
  EXPECT_EQ(r.live, (std::vector<LiveRun>{{"a", 9, 9}, {"c", 9, 9}}));
  EXPECT_EQ(slurp(), text);  // only a torn tail is cut off
  EXPECT_EQ(j.records(), 5u);
  ASSERT_EQ(j.append_start({"e", 1, 1}), "");
  RunJournal again;
  const RunJournal::Replay r2 = again.open(dir_);
  EXPECT_EQ(r2.warnings.size(), 1u);
  EXPECT_EQ(r2.live, (std::vector<LiveRun>{{"a", 9, 9}, {"c", 9, 9}, {"e", 1, 1}}));
}

TEST_F(RunJournalTest, WellSummedButMalformedRecordsAreSkipped) {
  spit(std::string(kHeaderLine) + with_crc("S ok 1 1") + with_crc("S bad/token 1 1") + with_crc("S toolong 1 1 1") +
       with_crc("S neg -1 1") + with_crc("X ok") + with_crc("S  1 1") + "\n" + with_crc("E ok") +
       with_crc("S kept 2 2"));
  RunJournal j;
  const RunJournal::Replay r = j.open(dir_);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.warnings, (std::vector<std::string>{
                            path_ + ": line 3: corrupt record skipped (bad token)",
                            path_ + ": line 4: corrupt record skipped (a start record has 4 fields)",
                            path_ + ": line 5: corrupt record skipped (bad budget)",
                            path_ + ": line 6: corrupt record skipped (unknown record type)",
                            path_ + ": line 7: corrupt record skipped (empty field)",
                            path_ + ": line 8: corrupt record skipped (bad checksum)",
                        }));
  EXPECT_EQ(r.live, (std::vector<LiveRun>{{"kept", 2, 2}}));
}

TEST_F(RunJournalTest, CompactionKeepsExactlyTheLiveRuns) {
  std::vector<LiveRun> expected;
  {
    RunJournal j;
    open_clean(j);
    for (int i = 0; i < 3; ++i) {
      expected.push_back({"keep-" + std::to_string(i), static_cast<uint32_t>(i), 100 + i});
      ASSERT_EQ(j.append_start(expected.back()), "");
    }
    size_t most = 0;
    uintmax_t biggest_file = 0;
    int compactions = 0;
    for (int i = 0; i < 1200; ++i) {
      const std::string t = "churn-" + std::to_string(i);
      for (int half = 0; half < 2; ++half) {
        const size_t before = j.records();
        ASSERT_EQ(half == 0 ? j.append_start({t, 1, i}) : j.append_end(t), "");
        if (j.records() < before) ++compactions;
        most = std::max(most, j.records());
        biggest_file = std::max(biggest_file, std::filesystem::file_size(path_));
      }
    }
    // Compacted each time the 1025th record went in, never later.
    EXPECT_EQ(compactions, 2);
    EXPECT_EQ(most, RunJournal::kCompactRecords);
    EXPECT_LT(std::filesystem::file_size(path_), biggest_file);
    EXPECT_EQ(j.compaction_error(), "");
    ASSERT_EQ(j.append_start({"keep-1", 77, 999}), "");  // a budget change survives compaction
    expected[1].budget = 77;
    EXPECT_LE(j.records(), RunJournal::kCompactRecords);
    EXPECT_EQ(j.live(), expected);

    ASSERT_EQ(j.compact(), "");
    EXPECT_EQ(j.records(), 3u);
    EXPECT_EQ(lines().size(), 4u);
    ASSERT_EQ(j.append_start({"after", 5, 5}), "");  // appends go to the new file
    expected.push_back({"after", 5, 5});
  }
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
  EXPECT_EQ(lines().size(), 5u);
  RunJournal j;
  EXPECT_EQ(open_clean(j), expected);
  EXPECT_EQ(j.records(), 4u);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(RunJournalTest, CompactionWaitsForFourTimesTheLiveRuns) {
  RunJournal j;
  open_clean(j);
  for (int i = 0; i < 300; ++i) ASSERT_EQ(j.append_start({"live-" + std::to_string(i), 1, i}), "");
  for (int i = 0; i < 450; ++i) {
    ASSERT_EQ(j.append_start({"churn", 1, i}), "");
    ASSERT_EQ(j.append_end("churn"), "");
  }
  EXPECT_EQ(j.records(), 1200u);  // past 1024, but only 4x the 300 live runs
  ASSERT_EQ(j.append_end("churn"), "");
  EXPECT_EQ(j.records(), 300u);
  EXPECT_EQ(j.live().size(), 300u);
}

TEST_F(RunJournalTest, CompactionDropsCorruptRecords) {
  {
    RunJournal j;
    open_clean(j);
    ASSERT_EQ(j.append_start({"a", 1, 1}), "");
    ASSERT_EQ(j.append_start({"b", 2, 2}), "");
  }
  std::string text = slurp();
  text[text.find("S a 1 1") + 4] = '3';
  spit(text);
  RunJournal j;
  EXPECT_EQ(j.open(dir_).warnings.size(), 1u);
  ASSERT_EQ(j.compact(), "");
  RunJournal again;
  EXPECT_EQ(open_clean(again), (std::vector<LiveRun>{{"b", 2, 2}}));
}

TEST_F(RunJournalTest, WrongHeaderIsRefused) {
  const std::string v2 = "# sluice runs journal v2\nS a 1 1 00000000\n";
  spit(v2);
  RunJournal j;
  RunJournal::Replay r = j.open(dir_);
  EXPECT_NE(r.error.find("v2"), std::string::npos) << r.error;
  EXPECT_EQ(slurp(), v2);
  EXPECT_NE(j.append_start({"a", 1, 1}), "");

  spit("hello\n");
  r = j.open(dir_);
  EXPECT_NE(r.error.find("not a sluice runs journal"), std::string::npos) << r.error;
  EXPECT_EQ(slurp(), "hello\n");
}

TEST_F(RunJournalTest, HeaderCutShortIsStartedAfresh) {
  spit("# sluice ru");
  RunJournal j;
  open_clean(j);
  EXPECT_EQ(slurp(), kHeaderLine);
}

TEST_F(RunJournalTest, NotARegularFileIsRefused) {
  ASSERT_EQ(::mkdir(path_.c_str(), 0700), 0);
  RunJournal j;
  const RunJournal::Replay r = j.open(dir_);
  EXPECT_NE(r.error.find("not a regular file"), std::string::npos) << r.error;
  EXPECT_NE(RunJournal().open(dir_ + "/missing").error, "");
}

TEST_F(RunJournalTest, SymlinkIsRefusedAndItsTargetLeftAlone) {
  const std::string target = dir_ + "/elsewhere";
  std::ofstream(target, std::ios::binary) << "not a journal\n";
  ASSERT_EQ(::symlink(target.c_str(), path_.c_str()), 0);
  RunJournal j;
  const RunJournal::Replay r = j.open(dir_);
  EXPECT_EQ(r.error, path_ + " is not a regular file");
  EXPECT_NE(j.append_start({"a", 1, 1}), "");
  std::ifstream in(target, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), "not a journal\n");
}

TEST_F(RunJournalTest, WrongHeaderMessagesNameTheVersionOrTheExpectedLine) {
  spit("# sluice runs journal v7\n");
  EXPECT_EQ(RunJournal().open(dir_).error, path_ + " is a runs journal of version v7; this sluiced reads v1");
  spit("hello\n");
  EXPECT_EQ(RunJournal().open(dir_).error,
            path_ + " is not a sluice runs journal (its first line is not '# sluice runs journal v1')");
}

}  // namespace
}  // namespace sluice::control
