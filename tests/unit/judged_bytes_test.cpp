// The record of judged bytes: a repeat of forwarded bytes carries
// the judged ones, whatever the copy says; what the record let go of before
// the origin acknowledged it is not forwarded again.
#include "dataplane/judged_bytes.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::dataplane {
namespace {

constexpr std::string_view kLoose = "GET /loose HTTP/1.1\r\nHost: api\r\n\r\n";
constexpr std::string_view kTight = "GET /tight HTTP/1.1\r\nHost: api\r\n\r\n";

TEST(JudgedBytes, ARepeatWithOtherBytesGetsTheJudgedOnes) {
  JudgedBytes j(1024);
  j.reset(100);
  j.record(100, kLoose);
  std::string copy(kTight);
  EXPECT_EQ(j.check(100, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, kLoose);
  EXPECT_EQ(j.check(100, copy), RepeatCheck::kUnchanged);
}

TEST(JudgedBytes, OnlyTheBytesOfRecordedHeadsAreWritten) {
  JudgedBytes j(1024);
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

TEST(JudgedBytes, AHeldHeadIsRecordedFromBothParts) {
  JudgedBytes j(1024);
  j.reset(0);
  j.record(0, kLoose.substr(0, 18), kLoose.substr(18));
  std::string copy(kTight);
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, kLoose);
}

TEST(JudgedBytes, AcknowledgedBytesAreForgotten) {
  const uint32_t n = static_cast<uint32_t>(kLoose.size());
  JudgedBytes j(1024);
  j.reset(0);
  j.record(0, kLoose);
  j.record(n, kLoose);  // where the first ended: one range
  EXPECT_EQ(j.ranges(), 1u);
  j.acknowledged(n + 4);
  EXPECT_EQ(j.ranges(), 1u);
  std::string copy(kTight);  // the origin has the first head: its repeat is harmless
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kUnchanged);
  std::string tail(kTight);  // the second one's first four bytes, too
  EXPECT_EQ(j.check(n, tail), RepeatCheck::kRewritten);
  EXPECT_EQ(tail.substr(0, 4), kTight.substr(0, 4));
  EXPECT_EQ(tail.substr(4), kLoose.substr(4));
  j.acknowledged(2 * n);
  EXPECT_EQ(j.ranges(), 0u);
}

TEST(JudgedBytes, RangesWithAGapBetweenStaySeparate) {
  const uint32_t n = static_cast<uint32_t>(kLoose.size());
  JudgedBytes j(1024);
  j.reset(0);
  j.record(0, kLoose);
  j.record(n + 100, kLoose);  // a Content-Length body of 100 bytes between
  EXPECT_EQ(j.ranges(), 2u);
  std::string body_and_head = std::string(100, 'x') + std::string(kTight);
  EXPECT_EQ(j.check(n, body_and_head), RepeatCheck::kRewritten);
  EXPECT_EQ(body_and_head, std::string(100, 'x') + std::string(kLoose));
}

// More in flight than the record holds: only as much of the oldest as the
// new bytes need is let go of, and a repeat that reaches into it is refused,
// while a repeat of bytes still recorded is written back.
TEST(JudgedBytes, ARepeatOfBytesLetGoOfUnacknowledgedIsUnverifiable) {
  const uint32_t n = static_cast<uint32_t>(kLoose.size());
  JudgedBytes j(3 * n);
  j.reset(0);
  for (uint32_t i = 0; i < 4; ++i) j.record(i * n, kLoose);
  EXPECT_EQ(j.ranges(), 1u);
  std::string first(kTight);
  EXPECT_EQ(j.check(0, first), RepeatCheck::kUnverifiable);
  std::string second(kTight);
  EXPECT_EQ(j.check(n, second), RepeatCheck::kRewritten);
  std::string last(kTight);
  EXPECT_EQ(j.check(3 * n, last), RepeatCheck::kRewritten);
  EXPECT_EQ(last, kLoose);
  // Once the origin acknowledges past it, it no longer matters.
  j.acknowledged(n);
  std::string again(kTight);
  EXPECT_EQ(j.check(0, again), RepeatCheck::kUnchanged);
}

// Many small pieces of one stream (a chunked body sent a byte at a time)
// make one range, not one each: the record does not run out of ranges.
TEST(JudgedBytes, ContiguousPiecesMakeOneRange) {
  JudgedBytes j(1024);
  j.reset(0);
  const std::string body = "5\r\nhello\r\n0\r\n\r\n";
  for (uint32_t i = 0; i < 200; ++i) j.record(i, {body.data() + i % body.size(), 1});
  EXPECT_EQ(j.ranges(), 1u);
  std::string copy(10, '?');
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, body.substr(0, 10));
}

TEST(JudgedBytes, ARangeLargerThanTheRecordIsLetGoOf) {
  JudgedBytes j(16);
  j.reset(0);
  j.record(0, kLoose);
  std::string copy(kTight);
  EXPECT_EQ(j.check(0, copy), RepeatCheck::kUnverifiable);
}

TEST(JudgedBytes, SequenceNumbersWrap) {
  JudgedBytes j(1024);
  const uint32_t seq = 0xfffffff0u;
  j.reset(seq);
  j.record(seq, kLoose);
  std::string copy(kTight);
  EXPECT_EQ(j.check(seq, copy), RepeatCheck::kRewritten);
  EXPECT_EQ(copy, kLoose);
  j.acknowledged(seq + static_cast<uint32_t>(kLoose.size()));
  EXPECT_EQ(j.ranges(), 0u);
}

TEST(JudgedBytes, CompactsWhenTheFrontIsAcknowledged) {
  const uint32_t n = static_cast<uint32_t>(kLoose.size());
  JudgedBytes j(2 * n);
  j.reset(0);
  j.record(0, kLoose);
  j.record(n, kTight);
  j.acknowledged(n);
  j.record(2 * n, kLoose);  // room made by moving /tight to the front
  std::string a(kLoose), b(kTight);
  EXPECT_EQ(j.check(n, a), RepeatCheck::kRewritten);
  EXPECT_EQ(a, kTight);
  EXPECT_EQ(j.check(2 * n, b), RepeatCheck::kRewritten);
  EXPECT_EQ(b, kLoose);
}

}  // namespace
}  // namespace sluice::dataplane
