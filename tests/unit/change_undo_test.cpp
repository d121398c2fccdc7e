// The copy a worker takes of a flow before it changes it
// (dataplane/change_undo.h): the flow, the live parts of its context at
// their own offsets (with every ring, edit list and answer full, the copy
// is the context's bytes), its hold and its held head; a segment with no
// flow yet says so in the mark.
#include <gtest/gtest.h>

#include <cstring>
#include <new>
#include <vector>

#include "dataplane/change_undo.h"

namespace sluice::dataplane {
namespace {

constexpr std::byte kPattern{0xc3};

// A context built on memory filled with kPattern (its padding keeps it).
struct PatternedContext {
  PatternedContext() : fields(8), spill(64), head(300), judged(300) {
    std::memset(static_cast<void*>(storage), static_cast<int>(kPattern), sizeof storage);
    ctx = new (storage) ParseContext(ParseBuffers{fields.data(), spill.data(), head.data(), judged.data()}, 256, 8);
  }
  ~PatternedContext() { ctx->~ParseContext(); }
  std::vector<http::FieldLine> fields;
  std::vector<char> spill, head, judged;
  alignas(ParseContext) std::byte storage[sizeof(ParseContext)];
  ParseContext* ctx;
};

TEST(ChangeUndo, AContextWithEveryPartFullIsCopiedByteForByte) {
  PatternedContext c;
  ParseContext& ctx = *c.ctx;
  ctx.response_fields_front = 3;
  ctx.response_fields_count = static_cast<uint8_t>(ctx.response_fields.size());
  ctx.usage_front = 5;
  ctx.usage_count = static_cast<uint8_t>(ctx.usage_notes.size());
  ctx.kept_front = 1;
  ctx.kept_count = static_cast<uint8_t>(ctx.kept.size());
  for (size_t i = 0; i < ctx.response_fields.size(); ++i) ctx.response_fields[i].limit = 100 + i;
  for (size_t i = 0; i < ctx.usage_notes.size(); ++i) ctx.usage_notes[i].charge = true;
  for (size_t i = 0; i < ctx.kept.size(); ++i) ctx.kept[i].pos = 7 + i;
  for (unsigned i = 0; i < SeqShift::kMaxEdits; ++i) {
    ASSERT_TRUE(ctx.to_client.add(1000 + 10 * i, 0, 5));
    ASSERT_TRUE(ctx.to_origin.add(5000 + 10 * i, 3, 0));
    ctx.edit_bytes[i].fields.assign("X: 1\r\n");
  }
  ctx.answer_len = sizeof ctx.answer;
  std::memset(ctx.answer, 'a', sizeof ctx.answer);

  std::vector<std::byte> image(ContextPool::object_stride(), kPattern);
  ctx.save_live(image.data());
  const size_t used = reinterpret_cast<const std::byte*>(ctx.answer + ctx.answer_len) - c.storage;
  EXPECT_EQ(std::memcmp(image.data(), c.storage, used), 0) << "a member save_live() leaves out";
}

TEST(ChangeUndo, OnlyTheLivePartsOfAnEmptyContextAreWritten) {
  PatternedContext c;
  std::vector<std::byte> image(ContextPool::object_stride(), kPattern);
  c.ctx->save_live(image.data());
  // The rings' free slots and the answer buffer are left as they were.
  const size_t answer = reinterpret_cast<const std::byte*>(c.ctx->answer) - c.storage;
  const size_t ring = reinterpret_cast<const std::byte*>(&c.ctx->response_fields) - c.storage;
  EXPECT_EQ(image[answer], kPattern);
  EXPECT_EQ(image[ring + 8], kPattern);
  EXPECT_EQ(std::memcmp(image.data(), c.storage, ring), 0) << "everything before the rings";
}

TEST(ChangeUndo, TheFlowItsHoldAndItsHeldHeadAreCopiedAndTheMarkSaysSo) {
  PatternedContext c;
  std::memcpy(c.ctx->head, "GET /held", 9);
  c.ctx->head_len = 9;
  c.ctx->buffering = true;
  TcpFlow flow{};
  flow.hash = 77;
  flow.client.next = 1234;
  flow.context = 0;
  flow.hold = 0;
  EditHold hold{};
  hold.count = 1;
  WorkMark mark;
  WorkMarker marker(&mark);
  ChangeUndo undo({}, 256);
  marker.flow(77);
  EXPECT_EQ(mark.before, WorkMark::kUntouched);
  undo.save(&flow, c.ctx, &hold, nullptr, marker);
  EXPECT_EQ(mark.what, WorkMark::kFlow);
  EXPECT_EQ(mark.before, WorkMark::kSaved);
  EXPECT_EQ(mark.head_len, 9u);
  marker.sending();
  EXPECT_EQ(mark.escaped, 1);
  marker.done();
  EXPECT_EQ(mark.what, WorkMark::kIdle);
  marker.sending();
  marker.flow(78);
  EXPECT_EQ(mark.escaped, 0) << "a new change starts with nothing sent";
  undo.save(nullptr, nullptr, nullptr, nullptr, marker);
  EXPECT_EQ(mark.before, WorkMark::kWasAbsent);
}

}  // namespace
}  // namespace sluice::dataplane
