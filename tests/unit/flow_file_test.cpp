// Flows that outlive the process (control/flow_file.h): flows written
// through one mapping are carried by the next; the flow a work mark names
// as it was before its change (the undo area), or not at all where the
// change cannot be undone;
// a change of geometry carries them into a new file; a file from another
// boot carries nothing; another layout, a damaged header or a foreign file
// is set aside with its reason; a key in two slots (a crash inside a
// backward shift) is kept once if both copies agree, else not at all.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "control/flow_file.h"
#include "dataplane/answer_store.h"
#include "dataplane/change_undo.h"
#include "dataplane/flow_key.h"
#include "dataplane/flow_table.h"
#include "dataplane/parse_context.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

using dataplane::FlowKey;
using dataplane::FlowTable;
using dataplane::TcpFlow;

FlowFile::Seeds seeds(uint8_t n) {
  FlowFile::Seeds s;
  s.cookie.fill(n);
  s.flow = n * 3u;
  s.share = n * 5u;
  return s;
}

FlowKey key(uint16_t port) {
  FlowKey k{};
  k.client = *net::parse_ip("198.18.0.10");
  k.origin = *net::parse_ip("198.18.0.20");
  k.client_port = port;
  k.origin_port = 80;
  return k;
}

// Flows for ports [from, to) in worker w's table, each with its port in client.next.
void fill(const FlowFile& f, unsigned w, uint16_t from, uint16_t to) {
  FlowTable t(f.slots(w));
  for (uint16_t p = from; p < to; ++p) {
    TcpFlow* flow = t.insert(key(p), dataplane::flow_hash(key(p), 99));
    ASSERT_NE(flow, nullptr);
    flow->state = dataplane::FlowState::kEstablished;
    flow->client.next = p;
  }
}

std::vector<uint16_t> ports_of(const FlowFile::Opened& o) {
  std::vector<uint16_t> out;
  for (const dataplane::CarriedFlow& c : o.carried) {
    const TcpFlow& f = c.flow;
    EXPECT_EQ(f.client.next, f.key.client_port) << "a flow carried whole";
    out.push_back(f.key.client_port);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint16_t> range(uint16_t from, uint16_t to) {
  std::vector<uint16_t> out;
  for (uint16_t p = from; p < to; ++p) out.push_back(p);
  return out;
}

void poke(const std::string& path, off_t offset, uint8_t byte) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, &byte, 1, offset), 1);
  ::close(fd);
}

// Contexts with heads of up to 256 bytes (320-byte held-head buffers), two
// bind stashes of 1 KiB.
const FlowFile::Geometry kTwo{2, 64, 4, 4, 8192, 320, 2, 1024};

TEST(FlowFile, FlowsWrittenThroughOneMappingAreCarriedByTheNextButOneWhoseChangeWasSent) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file) << o.error;
    EXPECT_EQ(o.outcome, FlowFile::Outcome::kCreated);
    EXPECT_TRUE(o.carried.empty());
    EXPECT_EQ(o.file->seeds().flow, 3u);
    fill(*o.file, 0, 1, 20);
    fill(*o.file, 1, 100, 130);
    // Worker 1 died changing the flow of port 105, after a frame of the
    // change was sent: it cannot be undone.
    dataplane::WorkMarker marker(o.file->mark(1));
    marker.flow(dataplane::flow_hash(key(105), 99));
    marker.saved(0);
    marker.sending();
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file) << o.error;
  EXPECT_EQ(o.outcome, FlowFile::Outcome::kAttached);
  EXPECT_EQ(o.file->generation(), 2u);
  EXPECT_EQ(o.file->seeds().flow, 3u) << "the old file's seeds, not the fresh ones";
  EXPECT_EQ(o.marked, 1u);
  EXPECT_EQ(o.undone, 0u);
  EXPECT_EQ(o.left_out.size(), 1u);
  std::vector<uint16_t> want = range(1, 20);
  for (uint16_t p : range(100, 130)) {
    if (p != 105) want.push_back(p);
  }
  EXPECT_EQ(ports_of(o), want);
  EXPECT_EQ(o.file->mark(1)->what, dataplane::WorkMark::kIdle) << "marks cleared for the new workers";
  FlowTable fresh(o.file->slots(0));
  EXPECT_EQ(fresh.size(), 0u) << "the workers' tables start empty: the carried flows go in again";
}

// The contexts, their held heads and the holds live in the file beside the
// flows: a flow is carried with the context it names if that context names
// it as its owner (one given back and lent to another flow does not come
// along), with the head it held, and with its hold.
TEST(FlowFile, AFlowIsCarriedWithTheContextThatNamesItAndItsHold) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file) << o.error;
    ASSERT_EQ(o.file->contexts(1).size(), 4 * dataplane::ContextPool::object_stride());
    ASSERT_EQ(o.file->holds(1).size(), 4u);
    ASSERT_EQ(o.file->heads(1).size(), 4u * dataplane::ContextPool::head_stride(256));
    dataplane::ContextPool pool(4, 256, 8, o.file->contexts(1), o.file->heads(1));
    FlowTable t(o.file->slots(1));
    for (uint16_t p = 1; p <= 3; ++p) {
      TcpFlow* f = t.insert(key(p), dataplane::flow_hash(key(p), 99));
      ASSERT_NE(f, nullptr);
      f->client.next = p;
      f->context = p;  // contexts 1, 2 and 3
      pool.at(p).owner = key(p == 3 ? 9 : p);  // context 3 now another flow's
      pool.at(p).owner_hash = dataplane::flow_hash(pool.at(p).owner, 99);
      pool.at(p).responses_ended = 40u + p;
    }
    // Context 2 holds the start of a head, as RequestPath leaves it.
    std::memcpy(pool.at(2).head, "GET /held", 9);
    pool.at(2).head_len = 9;
    pool.at(2).buffering = true;
    TcpFlow* held = t.insert(key(4), dataplane::flow_hash(key(4), 99));
    held->client.next = 4;
    held->hold = 2;
    o.file->holds(1)[2].count = 1;
    o.file->holds(1)[2].bytes[0].fields.assign("RateLimit-Remaining: 3\r\n");
    // An answer put in worker 1's store.
    ASSERT_EQ(o.file->answers(1).size(), 8192u);
    dataplane::AnswerStore store(8192, o.file->answers(1), o.file->answers_written(1));
    EXPECT_EQ(store.put("HTTP/1.1 429 Too Many Requests\r\n\r\n"), 0u);
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file) << o.error;
  ASSERT_EQ(ports_of(o), (std::vector<uint16_t>{1, 2, 3, 4}));
  EXPECT_TRUE(o.answers_kept) << "the same file: each worker's answer store as it was";
  const dataplane::AnswerStore store(8192, o.file->answers(1), o.file->answers_written(1));
  const std::span<const char> answer = store.get(0, 34);
  EXPECT_EQ(std::string(answer.data(), answer.size()), "HTTP/1.1 429 Too Many Requests\r\n\r\n");
  EXPECT_TRUE(store.get(0, 9000).empty()) << "longer than the ring";
  EXPECT_TRUE(store.get(40, 10).empty()) << "never written";
  for (const dataplane::CarriedFlow& c : o.carried) {
    const uint16_t p = c.flow.key.client_port;
    EXPECT_EQ(c.context != nullptr, p == 1 || p == 2) << p;
    if (c.context != nullptr) {
      EXPECT_EQ(c.context->view().responses_ended, 40u + p);
      EXPECT_EQ(std::string(c.context->held_head.begin(), c.context->held_head.end()), p == 2 ? "GET /held" : "") << p;
    }
    EXPECT_EQ(c.hold.has_value(), p == 4) << p;
    EXPECT_EQ(c.worker, 1u);
    if (c.hold) {
      EXPECT_EQ(c.hold->bytes[0].fields.view(), "RateLimit-Remaining: 3\r\n");
    }
    EXPECT_EQ(dataplane::carry_verdict(c, o.answers_kept),
              p == 3 ? dataplane::CarryVerdict::kInFlight : dataplane::CarryVerdict::kCarries) << p;
  }
}

// The worker copies a flow before it changes it (dataplane/change_undo.h):
// the flow a worker was killed changing is carried as it was before, with
// its context's live parts, its held head and its hold, whatever the
// change had done to them; the segment is as good as lost on the wire.
TEST(FlowFile, AFlowKilledMidChangeIsCarriedAsItWasBeforeTheChange) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file) << o.error;
    dataplane::ContextPool pool(4, 256, 8, o.file->contexts(1), o.file->heads(1));
    FlowTable t(o.file->slots(1));
    for (uint16_t p = 1; p <= 3; ++p) {
      TcpFlow* f = t.insert(key(p), dataplane::flow_hash(key(p), 99));
      ASSERT_NE(f, nullptr);
      f->client.next = p;
    }
    TcpFlow* f = t.find(key(2), dataplane::flow_hash(key(2), 99));
    f->context = 1;
    f->hold = 3;
    dataplane::ParseContext& c = pool.at(1);
    c.owner = key(2);
    c.owner_hash = f->hash;
    c.responses_ended = 7;
    std::memcpy(c.head, "GET /before", 11);
    c.head_len = 11;
    c.buffering = true;
    o.file->holds(1)[3].count = 1;
    o.file->holds(1)[3].bytes[0].fields.assign("RateLimit-Remaining: 3\r\n");

    dataplane::WorkMarker marker(o.file->mark(1));
    dataplane::ChangeUndo undo(o.file->undo(1), 256);
    marker.flow(f->hash);
    undo.save(f, &c, &o.file->holds(1)[3], nullptr, marker);
    // The change, half done when the worker is killed: the flow, its
    // context, its held head and its hold all written over.
    f->client.next = 9999;
    c.responses_ended = 8;
    std::memcpy(c.head, "PUT /during", 11);
    c.head_len = 5;
    o.file->holds(1)[3].count = 0;
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file) << o.error;
  EXPECT_EQ(o.marked, 0u) << "nothing reset";
  EXPECT_EQ(o.undone, 1u);
  EXPECT_TRUE(o.left_out.empty());
  ASSERT_EQ(ports_of(o), (std::vector<uint16_t>{1, 2, 3})) << "port 2's client.next as it was before the change";
  for (const dataplane::CarriedFlow& c : o.carried) {
    if (c.flow.key.client_port != 2) continue;
    ASSERT_NE(c.context, nullptr);
    EXPECT_EQ(c.context->view().responses_ended, 7u);
    EXPECT_EQ(std::string(c.context->held_head.begin(), c.context->held_head.end()), "GET /before");
    ASSERT_TRUE(c.hold.has_value());
    EXPECT_EQ(c.hold->count, 1u);
    EXPECT_EQ(c.worker, 1u);
    EXPECT_EQ(dataplane::carry_verdict(c, o.answers_kept), dataplane::CarryVerdict::kCarries);
  }
}

// A mark whose change has not begun carries the flow as it is; one whose
// change was making the flow (a SYN, a handshake completing) drops it, as
// if the segment had been lost; an undo area that is not the marked flow's
// (damaged: another hash, or the key of a flow in another slot) resets it.
TEST(FlowFile, AMarkBeforeTheChangeCarriesTheFlowAMadeFlowIsDroppedAForeignUndoResets) {
  for (const int what : {0, 1, 2, 3}) {
    test::ScratchDir dir;
    {
      FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
      ASSERT_TRUE(o.file);
      fill(*o.file, 0, 1, 5);
      dataplane::WorkMarker marker(o.file->mark(0));
      dataplane::ChangeUndo undo(o.file->undo(0), 256);
      marker.flow(dataplane::flow_hash(key(3), 99));
      if (what == 1) undo.save(nullptr, nullptr, nullptr, nullptr, marker);
      if (what >= 2) {
        TcpFlow other{};
        other.key = key(what == 2 ? 77 : 1);
        other.hash = dataplane::flow_hash(what == 2 ? key(77) : key(3), 99);
        other.client.next = 1;
        undo.save(&other, nullptr, nullptr, nullptr, marker);
      }
    }
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
    ASSERT_TRUE(o.file);
    switch (what) {
      case 0:
        EXPECT_EQ(ports_of(o), range(1, 5));
        EXPECT_EQ(o.marked + o.undone, 0u);
        break;
      case 1:
        EXPECT_EQ(ports_of(o), (std::vector<uint16_t>{1, 2, 4}));
        EXPECT_EQ(o.undone, 1u);
        EXPECT_TRUE(o.left_out.empty()) << "not reset: its sender repeats what made it";
        break;
      default:
        EXPECT_EQ(ports_of(o), (std::vector<uint16_t>{1, 2, 4}));
        EXPECT_EQ(o.marked, 1u);
        EXPECT_EQ(o.undone, 0u);
        break;
    }
  }
}

// A flow being bound to its origin (delayed binding) comes along with what
// it stashed for the origin (dataplane/bind_stash.h): the bytes, where they
// start, whether the client's FIN follows; a slot that does not read whole
// does not, and the flow is then not carried.
TEST(FlowFile, AFlowBeingBoundIsCarriedWithItsStash) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file) << o.error;
    ASSERT_EQ(o.file->stashes(0).size(), 2u * 1024);
    ASSERT_EQ(o.file->stash_slots(0).size(), 2u);
    FlowTable t(o.file->slots(0));
    for (uint16_t p = 1; p <= 2; ++p) {
      TcpFlow* f = t.insert(key(p), dataplane::flow_hash(key(p), 99));
      f->client.next = p;
      f->bind.state = dataplane::Binding::kBinding;
      f->stash = p - 1;
    }
    std::memcpy(o.file->stashes(0).data(), "GET /stashed", 12);
    o.file->stash_slots(0)[0] = {5000, 12, 1};
    o.file->stash_slots(0)[1] = {6000, 2000, 0};  // longer than its buffer
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file);
  ASSERT_EQ(ports_of(o), (std::vector<uint16_t>{1, 2}));
  for (const dataplane::CarriedFlow& c : o.carried) {
    if (c.flow.key.client_port == 1) {
      ASSERT_TRUE(c.stash.has_value());
      EXPECT_EQ(c.stash->start, 5000u);
      EXPECT_TRUE(c.stash->fin);
      EXPECT_EQ(std::string(c.stash->bytes.begin(), c.stash->bytes.end()), "GET /stashed");
      EXPECT_EQ(dataplane::carry_verdict(c, true), dataplane::CarryVerdict::kCarries);
    } else {
      EXPECT_FALSE(c.stash.has_value());
      EXPECT_EQ(dataplane::carry_verdict(c, true), dataplane::CarryVerdict::kBinding);
    }
  }
}

TEST(FlowFile, ASlotMarkNamesTheFlowTheSweepWasChanging) {
  test::ScratchDir dir;
  size_t slot = 0;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file);
    fill(*o.file, 0, 1, 5);
    FlowTable t(o.file->slots(0));  // (clears the used flags: fill again through it)
    for (uint16_t p = 1; p < 5; ++p) ASSERT_NE(t.insert(key(p), dataplane::flow_hash(key(p), 99)), nullptr);
    TcpFlow* f = t.find(key(3), dataplane::flow_hash(key(3), 99));
    ASSERT_NE(f, nullptr);
    slot = t.slot_of(*f);
    for (uint16_t p = 1; p < 5; ++p) t.find(key(p), dataplane::flow_hash(key(p), 99))->client.next = p;
    dataplane::WorkMarker(o.file->mark(0)).slot(slot);
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file);
  EXPECT_EQ(o.marked, 1u);
  EXPECT_EQ(ports_of(o), (std::vector<uint16_t>{1, 2, 4}));
}

TEST(FlowFile, AnotherGeometryCarriesTheFlowsIntoANewFile) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file);
    fill(*o.file, 0, 1, 10);
    fill(*o.file, 1, 10, 20);
  }
  FlowFile::Opened o =
      FlowFile::open(dir.path(), FlowFile::Geometry{3, 128, 4, 4, 8192, 320, 2, 1024}, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file) << o.error;
  EXPECT_EQ(o.outcome, FlowFile::Outcome::kRelaid);
  EXPECT_FALSE(o.answers_kept) << "a new file: answers in the old one cannot be got";
  EXPECT_NE(o.note.find("made for 2 workers of 64 slots, 4 contexts (320 bytes of held head each), 4 holds, 2 bind stashes of 1024 bytes and 8192 answer bytes, this start has 3 workers of 128 slots, 4 contexts (320 bytes of held head each), 4 holds, 2 bind stashes of 1024 bytes and 8192 answer bytes"), std::string::npos)
      << o.note;
  EXPECT_EQ(ports_of(o), range(1, 20));
  EXPECT_EQ(o.file->seeds().flow, 3u);
  EXPECT_EQ(o.file->slots(2).slots.size(), 128u);
}

TEST(FlowFile, AFileFromAnotherBootCarriesNothing) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file);
    fill(*o.file, 0, 1, 10);
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-b", 2, seeds(2));
  ASSERT_TRUE(o.file);
  EXPECT_EQ(o.outcome, FlowFile::Outcome::kRebooted);
  EXPECT_TRUE(o.carried.empty());
  EXPECT_EQ(o.file->seeds().flow, 6u) << "fresh seeds";
  // Nor does an unknown boot.
  o.file.reset();
  FlowFile::Opened unknown = FlowFile::open(dir.path(), kTwo, "", 3, seeds(3));
  ASSERT_TRUE(unknown.file);
  EXPECT_EQ(unknown.outcome, FlowFile::Outcome::kRebooted);
}

TEST(FlowFile, AnotherLayoutADamagedHeaderOrAForeignFileIsSetAside) {
  struct Case {
    off_t offset;  // -1: the file replaced by text
    const char* says;
  };
  const std::string other_layout = "layout 9, this sluiced reads layout " + std::to_string(FlowFile::kLayout);
  for (const Case& c : {Case{8, other_layout.c_str()}, Case{30, "damaged (checksum)"},
                        Case{0, "not a sluice flow file"}, Case{-1, "too short for a header"}}) {
    test::ScratchDir dir;
    const std::string path = dir.path() + "/flows.table";
    {
      FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
      ASSERT_TRUE(o.file);
      fill(*o.file, 0, 1, 10);
    }
    if (c.offset >= 0) {
      poke(path, c.offset, 0x09);
    } else {
      std::filesystem::remove(path);
      FILE* f = std::fopen(path.c_str(), "w");
      std::fputs("hello\n", f);
      std::fclose(f);
    }
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
    ASSERT_TRUE(o.file) << o.error;
    EXPECT_EQ(o.outcome, FlowFile::Outcome::kSetAside) << c.says;
    EXPECT_NE(o.note.find(c.says), std::string::npos) << o.note;
    EXPECT_NE(o.note.find("set aside as " + path + ".set-aside"), std::string::npos) << o.note;
    EXPECT_TRUE(std::filesystem::exists(path + ".set-aside"));
    EXPECT_TRUE(o.carried.empty());
    EXPECT_EQ(o.file->seeds().flow, 6u);
  }
}

TEST(FlowFile, AKeyInTwoSlotsIsKeptOnceIfBothCopiesAgreeElseNotAtAll) {
  test::ScratchDir dir;
  {
    FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 1, seeds(1));
    ASSERT_TRUE(o.file);
    fill(*o.file, 0, 1, 3);
    // A crash inside a backward shift: port 1's flow copied into a free slot
    // of worker 0, whole; port 2's into worker 1's, with another state.
    const dataplane::FlowSlots w0 = o.file->slots(0), w1 = o.file->slots(1);
    for (size_t i = 0; i < w0.slots.size(); ++i) {
      if (w0.used[i] == 0) continue;
      if (w0.slots[i].key.client_port == 1) {
        const size_t j = (i + 17) % w0.slots.size();
        ASSERT_EQ(w0.used[j], 0);
        w0.slots[j] = w0.slots[i];
        w0.used[j] = 1;
      } else {
        w1.slots[5] = w0.slots[i];
        w1.slots[5].client.next += 1;
        w1.used[5] = 1;
      }
    }
  }
  FlowFile::Opened o = FlowFile::open(dir.path(), kTwo, "boot-a", 2, seeds(2));
  ASSERT_TRUE(o.file);
  EXPECT_EQ(o.duplicates, 2u);
  EXPECT_EQ(ports_of(o), (std::vector<uint16_t>{1}));
}

}  // namespace
}  // namespace sluice::control
