// The record of judged heads (issue 13): a repeat of forwarded bytes carries
// the judged ones, whatever the copy says; what the record let go of before
// the origin acknowledged it is not forwarded again.
#include "dataplane/judged_heads.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::dataplane {
namespace {

constexpr std::string_view kLoose = "GET /loose HTTP/1.1\r\nHost: api\r\n\r\n";
constexpr std::string_view kTight = "GET /tight HTTP/1.1\r\nHost: api\r\n\r\n";

TEST(JudgedHeads, ARepeatWithOtherBytesGetsTheJudgedOnes) {
  JudgedHeads j(1024);
  j.reset(100);
  j.record(100, kLoose);
  std::string copy(kTight);
  EXPECT_EQ(j.check(100, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, kLoose);
  EXPECT_EQ(j.check(100, copy), RepeatCheck::kUnchanged);
}

TEST(JudgedHeads, OnlyTheBytesOfRecordedHeadsAreWritten) {
  JudgedHeads j(1024);
  j.reset(0);
  j.record(10, kLoose);  // bytes 0-9: a body before it, not recorded
  std::string copy = std::string(10, 'b') + std::string(kTight) + "tail";
  std::string want = std::string(10, 'b') + std::string(kLoose) + "tail";
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, want);
  // A repeat that covers part of the head only.
  std::string part(kTight.substr(4, 6));
  EXPECT_EQ(j.check(14, part), RepeatCheck::kRewritten);
  EXPECT_EQ(part, kLoose.substr(4, 6));
}

TEST(JudgedHeads, AHeldHeadIsRecordedFromBothParts) {
  JudgedHeads j(1024);
  j.reset(0);
  j.record(0, kLoose.substr(0, 18), kLoose.substr(18));
  std::string copy(kTight);
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, kLoose);
}

TEST(JudgedHeads, AcknowledgedHeadsAreForgotten) {
  JudgedHeads j(1024);
  j.reset(0);
  j.record(0, kLoose);
  j.record(static_cast<uint32_t>(kLoose.size()), kLoose);
  EXPECT_EQ(j.heads(), 2u);
  j.acknowledged(static_cast<uint32_t>(kLoose.size()));
  EXPECT_EQ(j.heads(), 1u);
  std::string copy(kTight);  // the origin has the first head: its repeat is harmless
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kUnchanged);
  j.acknowledged(static_cast<uint32_t>(2 * kLoose.size()));
  EXPECT_EQ(j.heads(), 0u);
}

// More heads in flight than the record holds: the oldest unacknowledged one
// is let go of, and a repeat that reaches into it is refused, while a repeat
// of a head still recorded is written back.
TEST(JudgedHeads, ARepeatOfAHeadLetGoOfUnacknowledgedIsUnverifiable) {
  const uint32_t n = static_cast<uint32_t>(kLoose.size());
  JudgedHeads j(3 * n);
  j.reset(0);
  for (uint32_t i = 0; i < 4; ++i) j.record(i * n, kLoose);
  EXPECT_EQ(j.heads(), 3u);
  std::string first(kTight);
  EXPECT_EQ(j.check(0, first), RepeatCheck::kUnverifiable);
  std::string last(kTight);
  EXPECT_EQ(j.check(3 * n, last), RepeatCheck::kRewritten);
  EXPECT_EQ(last, kLoose);
  // Once the origin acknowledges past it, it no longer matters.
  j.acknowledged(n);
  std::string again(kTight);
  EXPECT_EQ(j.check(0, again), RepeatCheck::kUnchanged);
}

TEST(JudgedHeads, AHeadLargerThanTheRecordIsLetGoOf) {
  JudgedHeads j(16);
  j.reset(0);
  j.record(0, kLoose);
  std::string copy(kTight);
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kUnverifiable);
}

TEST(JudgedHeads, SequenceNumbersWrap) {
  JudgedHeads j(1024);
  const uint32_t seq = 0xfffffff0u;
  j.reset(seq);
  j.record(seq, kLoose);
  std::string copy(kTight);
  EXPECT_EQ(j.check(seq, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, kLoose);
  j.acknowledged(seq + static_cast<uint32_t>(kLoose.size()));
  EXPECT_EQ(j.heads(), 0u);
}

TEST(JudgedHeads, CompactsWhenTheFrontIsAcknowledged) {
  const uint32_t n = static_cast<uint32_t>(kLoose.size());
  JudgedHeads j(2 * n);
  j.reset(0);
  j.record(0, kLoose);
  j.record(n, kTight);
  j.acknowledged(n);
  j.record(2 * n, kLoose);  // room made by moving /tight to the front
  EXPECT_EQ(j.heads(), 2u);
  std::string a(kLoose), b(kTight);
  EXPECT_EQ(j.check(n, a), RepeatCheck::kRewritten);
  EXPECT_EQ(a, kTight);
  EXPECT_EQ(j.check(2 * n, b), RepeatCheck::kRewritten);
  EXPECT_EQ(b, kLoose);
}

}  // namespace
}  // namespace sluice::dataplane
