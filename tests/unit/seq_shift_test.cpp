// SeqShift: the sequence correspondence of an edited byte stream (the
// fields inserted and the refusals absorbed), checked against an explicit model
// of the edited stream, across the 2^32 wrap.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "dataplane/seq_shift.h"

namespace sluice::dataplane {
namespace {

// The edited stream modelled byte by byte: for each receiver position, the
// sender byte it carries (or -1 for an inserted byte).
struct Model {
  uint32_t isn;
  std::vector<int64_t> receiver;  // receiver offset -> sender offset, -1 inserted
  std::vector<int64_t> sender_at;  // sender offset -> receiver offset, -1 removed

  Model(uint32_t isn_, uint32_t length, const std::vector<std::array<uint32_t, 3>>& edits) : isn(isn_) {
    sender_at.assign(length, -1);
    for (uint32_t s = 0; s < length; ++s) {
      for (const auto& e : edits) {
        if (e[0] == s) {
          for (uint32_t k = 0; k < e[2]; ++k) receiver.push_back(-1);
        }
      }
      bool removed = false;
      for (const auto& e : edits) removed = removed || (s >= e[0] && s < e[0] + e[1]);
      if (!removed) {
        sender_at[s] = static_cast<int64_t>(receiver.size());
        receiver.push_back(s);
      }
    }
  }
};

// Delayed binding: edits made while the appliance numbered the sender's
// stream itself (from the cookie) move to the real sender's numbers, and
// what the receiver sees of every byte stays as it was.
TEST(SeqShift, RenumberingTheSenderLeavesTheReceiversViewAlone) {
  const uint32_t cookie = 0xfffffff0;  // the appliance's numbers wrap; the origin's do not
  const uint32_t origin_isn = 0x1000;
  SeqShift before;
  before.reset(0);
  ASSERT_TRUE(before.add(cookie + 1, 0, 120));  // a kept answer before the origin's first byte
  SeqShift after = before;
  const uint32_t delta = cookie - origin_isn;
  after.renumber_sender(delta);
  for (const uint32_t off : {0u, 1u, 50u, 5000u}) {
    EXPECT_EQ(after.forward(origin_isn + 1 + off), before.forward(cookie + 1 + off)) << off;
  }
  for (const uint32_t ack : {cookie + 1, cookie + 60, cookie + 121, cookie + 121 + 4000}) {
    EXPECT_EQ(after.backward(ack), before.backward(ack) - delta) << ack;
  }
  after.acknowledged(cookie + 1 + 120 + 10);
  EXPECT_EQ(after.pending(), 0u);
  EXPECT_EQ(static_cast<uint32_t>(after.total_shift()), cookie + 120 - origin_isn);
}

TEST(SeqShift, NoEditsMapsEverythingToItself) {
  SeqShift s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.forward(12345), 12345u);
  EXPECT_EQ(s.backward(12345), 12345u);
}

TEST(SeqShift, AnInsertionShiftsWhatFollowsAndAcksMapBack) {
  for (const uint32_t isn : {1000u, 0xffffff00u}) {  // the second crosses the 2^32 wrap
    SeqShift s;
    // 60 header bytes inserted before sender byte 100; 40 more before 300.
    ASSERT_TRUE(s.add(isn + 100, 0, 60));
    ASSERT_TRUE(s.add(isn + 300, 0, 40));
    const Model m(isn, 500, {{100, 0, 60}, {300, 0, 40}});
    // Every sender byte lands where the edited stream has it (a segment that
    // starts at an edit follows the inserted bytes).
    for (uint32_t off = 0; off < 500; ++off) {
      EXPECT_EQ(s.forward(isn + off), isn + static_cast<uint32_t>(m.sender_at[off])) << off;
    }
    // Every receiver acknowledgement maps to the sender bytes it covers.
    for (uint32_t r = 0; r <= m.receiver.size(); ++r) {
      uint32_t covered = 0;  // sender bytes wholly received before receiver offset r
      for (uint32_t k = 0; k < r; ++k) {
        if (m.receiver[k] >= 0) covered = static_cast<uint32_t>(m.receiver[k]) + 1;
      }
      // Inserted bytes right after covered ones: the sender's next byte is not yet acked.
      EXPECT_EQ(s.backward(isn + r), isn + covered) << r;
    }
    EXPECT_EQ(s.total_shift(), 100);
  }
}

TEST(SeqShift, ARemovalAbsorbsBytesAndItsAckCoversThem) {
  SeqShift s;
  const uint32_t isn = 5000;
  // A refused 80-byte request absorbed at sender byte 200.
  ASSERT_TRUE(s.add(isn + 200, 80, 0));
  EXPECT_EQ(s.forward(isn + 199), isn + 199);
  EXPECT_EQ(s.forward(isn + 200), isn + 200);  // a removed byte: where the range went
  EXPECT_EQ(s.forward(isn + 250), isn + 200);
  EXPECT_EQ(s.forward(isn + 280), isn + 200);  // the next request starts where the refused one was
  EXPECT_EQ(s.forward(isn + 300), isn + 220);
  EXPECT_EQ(s.backward(isn + 200), isn + 280);  // the absorbed bytes count as delivered
  EXPECT_EQ(s.backward(isn + 220), isn + 300);
  EXPECT_EQ(s.total_shift(), -80);
}

TEST(SeqShift, ASplicedAnswerReplacesNothingAndInsertsBytes) {
  SeqShift s;
  // A 429 of 150 bytes spliced into the response stream at byte 1000.
  ASSERT_TRUE(s.add(1000, 0, 150));
  EXPECT_EQ(s.backward(1000), 1000u);
  EXPECT_EQ(s.backward(1075), 1000u);  // half the answer acknowledged: nothing of the origin's past 1000
  EXPECT_EQ(s.backward(1150), 1000u);
  EXPECT_EQ(s.backward(1151), 1001u);
}

TEST(SeqShift, AcknowledgedEditsAreFoldedAndMappingIsUnchanged) {
  SeqShift s;
  ASSERT_TRUE(s.add(100, 0, 10));
  ASSERT_TRUE(s.add(200, 0, 20));
  ASSERT_TRUE(s.add(300, 5, 0));
  std::vector<uint32_t> fwd, back;
  for (uint32_t x = 250; x < 400; ++x) fwd.push_back(s.forward(x));
  for (uint32_t y = 260; y < 420; ++y) back.push_back(s.backward(y));
  s.acknowledged(s.forward(150));  // past the first edit only
  EXPECT_EQ(s.pending(), 2u);
  s.acknowledged(s.forward(250));  // and the second
  EXPECT_EQ(s.pending(), 1u);
  for (uint32_t x = 250; x < 400; ++x) EXPECT_EQ(s.forward(x), fwd[x - 250]) << x;
  for (uint32_t y = 260; y < 420; ++y) EXPECT_EQ(s.backward(y), back[y - 260]) << y;
  s.acknowledged(s.forward(400));
  EXPECT_EQ(s.pending(), 0u);
  EXPECT_EQ(s.forward(500), 525u);
  EXPECT_EQ(s.backward(525), 500u);
}

TEST(SeqShift, FullOrOutOfOrderEditsAreRefused) {
  SeqShift s;
  for (unsigned i = 0; i < SeqShift::kMaxEdits; ++i) ASSERT_TRUE(s.add(100 * (i + 1), 0, 1));
  EXPECT_FALSE(s.add(10000, 0, 1));
  SeqShift t;
  ASSERT_TRUE(t.add(500, 10, 0));
  EXPECT_FALSE(t.add(505, 0, 3));  // inside the removed range
  EXPECT_TRUE(t.add(510, 0, 3));
}

}  // namespace
}  // namespace sluice::dataplane
