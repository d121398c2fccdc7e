// Flows carried across a restart (dataplane/flow_carry.h): a flow copied
// out of one engine's table, with the context or hold it borrowed, and
// taken on by a new engine on the same pool memory (as a restarted sluiced
// does from the flow file), continues exactly where it was: unbound,
// inside a request body, inside a response, with inserted fields
// unacknowledged, with a head held across segments (its held-head buffer is
// in the file too). A flow whose context is damaged, or whose held head did
// not come along or does not read as the dead process read it, does not,
// and its next segment is reset, not dropped as a young cookie
// connection's early data; the table on given memory marks a slot used
// only once its flow is whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <vector>

#include "dataplane/flow_carry.h"
#include "flow_harness.h"
#include "proxy_peers.h"

namespace sluice::test {
namespace {

namespace flag = dataplane::tcp_flag;
using dataplane::CarryVerdict;
using dataplane::FlowEngine;

const std::string kDelayedKeep = std::string(kKeepPolicy) + "binding: delayed\n";

// What the flow file holds for one worker besides its table: the memory
// its parse contexts, their held heads, edit holds and bind stashes live
// in. (The test policies' heads are at most 16 KiB.)
constexpr uint32_t kMaxHead = 16 * 1024;
struct PoolMemory {
  explicit PoolMemory(const dataplane::EngineConfig& c)
      : contexts(c.contexts * dataplane::ContextPool::object_stride()),
        heads(c.contexts * dataplane::ContextPool::head_stride(kMaxHead)),
        holds(c.edit_holds),
        stashes(c.bind_stashes * dataplane::BindStash::buffer_bytes(kMaxHead)),
        stash_slots(c.bind_stashes),
        answers(dataplane::AnswerStore::ring_size(c.answer_bytes)) {}
  dataplane::EngineConfig on_it(dataplane::EngineConfig c) {
    c.mark = &mark;
    // The undo area filled with a pattern, as a file's would hold an older
    // copy: a part the copy missed reads as garbage.
    std::fill(undo.begin(), undo.end(), std::byte{0x5a});
    c.undo = undo_area();
    c.context_memory = contexts;
    c.head_memory = heads;
    c.hold_memory = holds;
    c.stash_memory = stashes;
    c.stash_slots = stash_slots;
    c.answer_memory = answers;
    c.answers_written = &answers_written;
    return c;
  }
  std::vector<std::byte> contexts;
  std::vector<char> heads;
  std::vector<dataplane::EditHold> holds;
  std::vector<uint8_t> stashes;
  std::vector<dataplane::StashSlot> stash_slots;
  std::vector<std::byte> answers;
  uint64_t answers_written = 0;
  dataplane::WorkMark mark;
  // The flow, context, hold, stash slot and head of the undo area, one
  // after another (aligned for each).
  static constexpr size_t kUndoContext = (sizeof(dataplane::TcpFlow) + 63) / 64 * 64;
  static size_t undo_hold() { return kUndoContext + (dataplane::ContextPool::object_stride() + 63) / 64 * 64; }
  static size_t undo_stash() { return undo_hold() + (sizeof(dataplane::EditHold) + 63) / 64 * 64; }
  static size_t undo_head() { return undo_stash() + 64; }
  alignas(64) std::array<std::byte, 64 * 1024> undo_bytes{};
  std::span<std::byte> undo{undo_bytes.data(), undo_head() + kMaxHead};
  dataplane::UndoArea undo_area() {
    return {reinterpret_cast<dataplane::TcpFlow*>(undo.data()), undo.data() + kUndoContext,
            reinterpret_cast<dataplane::EditHold*>(undo.data() + undo_hold()),
            reinterpret_cast<dataplane::StashSlot*>(undo.data() + undo_stash()),
            {reinterpret_cast<char*>(undo.data() + undo_head()), kMaxHead}};
  }
  dataplane::PoolImages images(uint32_t max_head_bytes) const {
    return {contexts, holds, heads, dataplane::ContextPool::head_stride(max_head_bytes),
            stashes, stash_slots, dataplane::BindStash::buffer_bytes(max_head_bytes)};
  }
};

// Every flow of the world's engine, copied as the flow file keeps them,
// with what each borrowed from the pools on `memory`.
std::vector<dataplane::CarriedFlow> flows_of(EngineWorld& w, const PoolMemory& memory) {
  std::vector<dataplane::CarriedFlow> out;
  auto& table = const_cast<dataplane::FlowTable&>(w.engine->flows());
  for (size_t i = 0; i < table.capacity(); ++i) {
    if (const dataplane::TcpFlow* f = table.at_slot(i)) {
      out.push_back(dataplane::carried_from(*f, memory.images(w.snapshot->policy.stream.head.max_head_bytes)));
    }
  }
  return out;
}

// flows_of(), where the worker was killed in the middle of a change: the
// marked flow as the undo area kept it (control/flow_file.cpp reads a
// file's the same way).
std::vector<dataplane::CarriedFlow> flows_at_kill(EngineWorld& w, PoolMemory& memory) {
  std::vector<dataplane::CarriedFlow> out = flows_of(w, memory);
  EXPECT_EQ(memory.mark.what, dataplane::WorkMark::kFlow);
  EXPECT_EQ(memory.mark.before, dataplane::WorkMark::kSaved);
  EXPECT_EQ(memory.mark.escaped, 0);
  std::erase_if(out, [&](const dataplane::CarriedFlow& c) { return c.flow.hash == memory.mark.hash; });
  out.push_back(dataplane::carried_from_undo(memory.undo_area(), memory.mark.head_len,
                                             memory.images(w.snapshot->policy.stream.head.max_head_bytes)));
  return out;
}

// The process dies; a new engine on the same memory (and the same limiter
// state: the buckets are re-attached) takes on what carries. How many did.
size_t restart(EngineWorld& w, PoolMemory& memory, const std::vector<dataplane::CarriedFlow>& flows,
               dataplane::EngineConfig c = EngineWorld::small_config()) {
  c.cookie_seed = EngineWorld::kCookieSeed;
  c.max_head_bytes = w.snapshot->policy.stream.head.max_head_bytes;
  c.max_fields = w.snapshot->policy.stream.head.max_fields;
  w.engine.reset();
  w.engine = std::make_unique<FlowEngine>(memory.on_it(c), *w.state, w.counters, 42);
  size_t carried = 0;
  for (const dataplane::CarriedFlow& f : flows) {
    if (dataplane::carry_verdict(f, true) != CarryVerdict::kCarries) continue;
    carried += w.engine->resume(f, dataplane::flow_hash(f.flow.key), *w.snapshot, true) == FlowEngine::Resumed::kYes;
  }
  return carried;
}

// The client's stream as the origin got it up to and including `last`: what
// the engine sent to the origin while handling it, and `last` itself when
// it was forwarded as it came.
std::string origin_stream(EngineWorld& w, const Peers& p, const Peers::Sent& last) {
  StreamView got(p.client_isn + 1);
  got.add_sent(w, Side::kOrigin, last.before);
  if (last.action == FrameAction::kForward) {
    got.add(last.view.seq, std::string_view(reinterpret_cast<const char*>(p.last_frame.data()) + last.view.payload_offset,
                                            last.view.payload_len));
  }
  return got.contiguous();
}

// A world whose engine's contexts and holds are on `memory`.
dataplane::EngineConfig on(PoolMemory& memory, dataplane::EngineConfig c = EngineWorld::small_config()) {
  return memory.on_it(c);
}

TEST(FlowCarry, AnUnboundFlowCarriesOnAndBindsAtItsFirstRequest) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kDelayedKeep, on(memory));
  Peers p(w);
  p.client_handshake(/*bound_later=*/true);
  ASSERT_EQ(w.engine->unbound_flows(), 1u);
  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(dataplane::carry_verdict(left[0], true), CarryVerdict::kCarries);

  ASSERT_EQ(restart(w, memory, left), 1u);
  EXPECT_EQ(w.engine->flows().size(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u) << "a stash waits for its first request again";
  EXPECT_EQ(w.engine->resume(left[0], dataplane::flow_hash(left[0].flow.key), *w.snapshot, true),
            FlowEngine::Resumed::kDuplicate);

  // Its first request opens the origin's connection, from the client's ISN
  // the new engine never saw, and goes to the origin whole.
  const auto admitted = p.client_data(kLoose);
  EXPECT_EQ(admitted.action, FrameAction::kDrop);
  origin_binds(w, p, admitted.before, kLoose);
}

// A flow being bound to its origin at the kill (delayed binding: its first
// request stashed, the SYN sent, no answer yet) carries on with its stash,
// which is in the flow file: the new process sends the SYN again at the
// sweep's first look (an answer to the first may have come while no
// process listened), and once the origin answers, the stashed request goes
// to it whole, judged and charged once.
TEST(FlowCarry, AFlowBeingBoundCarriesOnWithItsStash) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kDelayedKeep, on(memory));
  Peers p(w);
  p.client_handshake(/*bound_later=*/true);
  const auto stashed = p.client_data(kLoose);
  ASSERT_EQ(stashed.action, FrameAction::kDrop);
  ASSERT_EQ(sent_to(w, Side::kOrigin, stashed.before).size(), 1u) << "the SYN to the origin";
  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_EQ(left[0].flow.bind.state, dataplane::Binding::kBinding);
  ASSERT_TRUE(left[0].stash.has_value());
  EXPECT_EQ(std::string(left[0].stash->bytes.begin(), left[0].stash->bytes.end()), kLoose);
  EXPECT_EQ(dataplane::carry_verdict(left[0], true), CarryVerdict::kCarries);
  const uint64_t admitted = w.counters.admitted.get();

  ASSERT_EQ(restart(w, memory, left), 1u);
  w.now += 2 * time::kNanosPerSecond;
  const size_t swept = w.sink.sent.size();
  w.engine->sweep(w.now, 64, *w.snapshot, w.sink);
  origin_binds(w, p, swept, kLoose);
  EXPECT_EQ(w.counters.admitted.get(), admitted) << "judged and charged once, before the kill";
}

// A head split across segments is held (acknowledged to the client, not
// yet forwarded) in its context's held-head buffer, which is in the flow
// file: after a restart the new process feeds it to a fresh stream and the
// rest of the head completes it. It is judged once, whole, and the origin
// gets it whole; nothing reached the origin before.
TEST(FlowCarry, AHeadHeldAcrossSegmentsCarriesOnAndIsJudgedWhole) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  const std::string head(kLoose);
  const uint32_t cut = 23;  // "GET /loose HTTP/1.1\r\nHo"
  const auto first = p.client_data(head.substr(0, cut));
  EXPECT_EQ(sent_to(w, Side::kOrigin, first.before).size(), 0u) << "held, not forwarded";
  EXPECT_EQ(w.counters.requests.get(), 0u);

  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_NE(left[0].context, nullptr);
  EXPECT_EQ(std::string(left[0].context->held_head.begin(), left[0].context->held_head.end()), head.substr(0, cut));
  ASSERT_EQ(restart(w, memory, left), 1u);

  const auto rest = p.client_data(head.substr(cut), cut);
  EXPECT_EQ(w.counters.requests.get(), 1u) << "judged once, whole";
  EXPECT_EQ(w.counters.admitted.get(), 1u);
  EXPECT_EQ(origin_stream(w, p, rest), head) << "the origin gets the head whole";
}

// A head admitted late (a rule's delay) waits in its context's head buffer,
// in the flow file: a restart carries it on, still not a byte of it sent,
// and the new process sends it to the origin when its time comes, judged
// and charged once.
TEST(FlowCarry, ADelayedHeadCarriesOnAndGoesAtItsTime) {
  const std::string policy = std::string(kKeepPolicy).replace(std::string(kKeepPolicy).find("    bucket: tight\n"),
                                                              std::string("    bucket: tight\n").size(),
                                                              "    bucket: tight\n    delay_max: 10s\n");
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(policy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  (void)p.client_data(kTight);
  ASSERT_EQ(w.counters.admitted.get(), 1u);
  p.client_sent = static_cast<uint32_t>(kTight.size());
  (void)p.origin_data("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  // One an hour: 5 s before the hour is up, the next one waits 5 s.
  w.now += 3595 * time::kNanosPerSecond;
  const auto held = p.client_data(kTight, p.client_sent);
  EXPECT_EQ(sent_to(w, Side::kOrigin, held.before).size(), 0u) << "held, not forwarded";
  EXPECT_EQ(w.counters.delayed.get(), 1u);

  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_NE(left[0].context, nullptr);
  EXPECT_EQ(std::string(left[0].context->held_head.begin(), left[0].context->held_head.end()), kTight);
  ASSERT_EQ(restart(w, memory, left), 1u);
  EXPECT_EQ(w.engine->delays().size(), 1u);

  const size_t before = w.sink.sent.size();
  w.now += 4 * time::kNanosPerSecond;
  EXPECT_FALSE(w.engine->release_delayed(w.now, *w.out)) << "not before its time";
  w.now += time::kNanosPerSecond;
  EXPECT_TRUE(w.engine->release_delayed(w.now, *w.out));
  std::string got;
  for (const SentSegment& seg : sent_to(w, Side::kOrigin, before)) got += seg.payload();
  EXPECT_EQ(got, kTight);
  EXPECT_EQ(w.counters.admitted.get(), 2u) << "judged and charged once";
}

// After the restart the client sends the held part again with other bytes
// (a request for the tight path in place of the loose one), then the rest:
// the held copy is what is judged and what the origin gets, as before a
// restart (ClientRepeats): the repeat is acknowledged and dropped.
TEST(FlowCarry, AHeldHeadSentAgainDifferentlyAfterARestartIsJudgedAsHeld) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  const std::string head(kLoose);
  const uint32_t cut = 23;
  (void)p.client_data(head.substr(0, cut));
  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(restart(w, memory, left), 1u);

  const std::string other = std::string(kTight).substr(0, cut);  // "GET /tight HTTP/1.1\r\nHo"
  const auto again = p.client_data(other);
  EXPECT_EQ(again.action, FrameAction::kDrop) << "the held part again: still held";
  EXPECT_EQ(sent_to(w, Side::kOrigin, again.before).size(), 0u);
  const auto rest = p.client_data(head.substr(cut), cut);
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.admitted.get(), 1u) << "/loose admitted, /tight's budget untouched";
  EXPECT_EQ(origin_stream(w, p, rest), head) << "the origin gets the held head, not the repeat's bytes";
  // /tight's one request an hour is still whole.
  p.client_sent = static_cast<uint32_t>(head.size());
  (void)p.origin_data("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(p.client_data(kTight, p.client_sent).action, FrameAction::kForward);
  EXPECT_EQ(w.counters.admitted.get(), 2u);
}

// A held head that did not come along, or whose bytes the fresh stream
// does not read as a head still in progress (bytes a damaged file or
// another policy reads otherwise), is not taken on: the connection is reset
// at its next segment, and nothing it borrowed stays lent.
TEST(FlowCarry, AHeldHeadThatDoesNotReadAsTheDeadOneDidDoesNotCarry) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  (void)p.client_data("GET /loose HTTP/1.1\r\nHo");
  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_NE(left[0].context, nullptr);
  ASSERT_EQ(left[0].context->held_head.size(), 23u);
  // The flow as the file had it, with other held bytes.
  const auto with = [&](const std::string& bytes) {
    std::vector<dataplane::CarriedFlow> one;
    one.push_back({left[0].flow, std::make_unique<dataplane::ContextImage>(*left[0].context), left[0].hold,
                   std::nullopt, 0});
    one[0].context->held_head.assign(bytes.begin(), bytes.end());
    return one;
  };
  for (const std::string& bytes : {
           std::string(),                               // did not come along
           std::string("GET /loose HT"),                // not the length the context says
           std::string("GET / HTTP/1.1\r\nA:b\r\n\r\n"),  // a whole head: the dead stream would have ended it
           std::string("GET /loose HTTP/9.9\r\nHo"),  // refused by the parser
       }) {
    // (A fresh engine on the same memory each time.)
    EXPECT_EQ(restart(w, memory, with(bytes)), 0u) << bytes;
    EXPECT_EQ(w.engine->flows().size(), 0u);
    EXPECT_EQ(w.engine->contexts().free_count(), EngineWorld::small_config().contexts) << "nothing lent stays lent";
  }
  // The bytes as they were carry.
  EXPECT_EQ(restart(w, memory, with("GET /loose HTTP/1.1\r\nHo")), 1u);
}

// A connection inside a request body carries on: the rest of the body is
// forwarded as body, though it reads as a request for the limited path (a
// new process that guessed would judge it, or an attacker would smuggle
// it); the origin's response is framed as the answer to the POST; the next
// request is judged and charged as before.
TEST(FlowCarry, AConnectionInsideARequestBodyCarriesOnWithoutSmuggling) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  const std::string rest(kTight);  // the body's second part reads as a request for /tight
  const std::string first = "POST /loose HTTP/1.1\r\nHost: api\r\nContent-Length: " +
                            std::to_string(10 + rest.size()) + "\r\n\r\n0123456789";
  ASSERT_EQ(p.client_data(first).action, FrameAction::kForward);
  p.client_sent = static_cast<uint32_t>(first.size());
  (void)p.origin_data("");  // the origin acknowledges the head and the body so far
  const uint64_t judged = w.counters.requests.get();

  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_EQ(restart(w, memory, left), 1u);
  EXPECT_EQ(w.engine->contexts().free_count(), EngineWorld::small_config().contexts - 1);

  const auto body = p.client_data(rest, static_cast<uint32_t>(first.size()));
  EXPECT_EQ(body.action, FrameAction::kForward);
  EXPECT_EQ(w.counters.requests.get(), judged) << "the body was judged as a request";
  p.client_sent += static_cast<uint32_t>(rest.size());
  EXPECT_EQ(p.origin_data("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").action, FrameAction::kForward);
  EXPECT_EQ(w.counters.response_errors.get(), 0u);

  // /tight's one request an hour is whole: the body did not spend it.
  const uint32_t at = p.client_sent;
  EXPECT_EQ(p.client_data(kTight, at).action, FrameAction::kForward);
  EXPECT_EQ(w.counters.admitted.get(), 2u);
  EXPECT_EQ(w.counters.requests.get(), judged + 1);
}

// A connection inside a response carries on: the rest of the response's
// body is framed where the last process left it (a body that reads as a
// response is not taken for one), and the connection's next request and
// response go through.
TEST(FlowCarry, AConnectionInsideAResponseCarriesOn) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  ASSERT_EQ(p.client_data(kLoose).action, FrameAction::kForward);
  p.client_sent = static_cast<uint32_t>(kLoose.size());
  const std::string fake = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(5 + fake.size()) + "\r\n\r\n";
  ASSERT_EQ(p.origin_data(head + "01234").action, FrameAction::kForward);

  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_EQ(restart(w, memory, left), 1u);

  EXPECT_EQ(p.origin_data(fake).action, FrameAction::kForward) << "the rest of the body";
  EXPECT_EQ(w.counters.response_errors.get(), 0u);
  // The response has ended: a second one now would be an unsolicited
  // response, but the client's next request makes room for one.
  ASSERT_EQ(p.client_data(kLoose, p.client_sent).action, FrameAction::kForward);
  p.client_sent += static_cast<uint32_t>(kLoose.size());
  EXPECT_EQ(p.origin_data("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").action, FrameAction::kForward);
  EXPECT_EQ(w.counters.response_errors.get(), 0u);
  EXPECT_EQ(w.counters.admitted.get(), 2u);
}

// Rate-limit fields inserted into a response the client has not yet
// acknowledged (an edit hold, between requests): after the restart the
// origin's next bytes still reach the client shifted by the inserted
// length, and a retransmission of the edited segment is written again the
// same way.
TEST(FlowCarry, InsertedFieldsTheClientHasNotAcknowledgedCarryOn) {
  PoolMemory memory(EngineWorld::with_fields());
  EngineWorld w(kKeepPolicy, on(memory, EngineWorld::with_fields()));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  ASSERT_EQ(p.client_data(kLoose).action, FrameAction::kForward);
  p.client_sent = static_cast<uint32_t>(kLoose.size());
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  const size_t before = w.sink.sent.size();
  (void)p.origin_data(response);  // written again with the fields (the frame has no room to grow)
  const auto first = sent_to(w, Side::kClient, before);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_GT(first[0].payload().size(), response.size()) << "fields were inserted";

  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_TRUE(left[0].hold) << "the edit waits in a hold between requests";
  ASSERT_EQ(restart(w, memory, left, EngineWorld::with_fields()), 1u);
  EXPECT_EQ(w.engine->holds().free_count(), EngineWorld::with_fields().edit_holds - 1);

  // The origin sends the response again (its ACK was lost): the same bytes
  // at the same place.
  p.origin_sent = 0;
  const size_t again_at = w.sink.sent.size();
  (void)p.origin_data(response);
  const auto again = sent_to(w, Side::kClient, again_at);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].payload(), first[0].payload());
  EXPECT_EQ(again[0].view.seq, first[0].view.seq);
  // The next response is shifted by the inserted fields, as before the restart.
  const uint32_t inserted = static_cast<uint32_t>(first[0].payload().size() - response.size());
  ASSERT_EQ(p.client_data(kLoose, p.client_sent).action, FrameAction::kForward);
  p.client_sent += static_cast<uint32_t>(kLoose.size());
  const size_t next_at = w.sink.sent.size();
  (void)p.origin_data(response);
  const auto next = sent_to(w, Side::kClient, next_at);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].view.seq, first[0].view.seq + response.size() + inserted);
}

// The flow a worker is killed changing (dataplane/change_undo.h): the
// engine copied it before the change, and carried from that copy the
// segment is as good as lost on the wire. Here the origin's response to
// the first of two pipelined requests, fields inserted into it (two
// outstanding requests' fields, usage notes and an edit in the copy): after
// the restart the origin sends it again and the client gets the very bytes
// the dead process wrote for it, at the same place, and the second
// response follows shifted by the fields as before.
TEST(FlowCarry, AFlowKilledMidChangeCarriesOnAsItWasBeforeTheSegment) {
  PoolMemory memory(EngineWorld::with_fields());
  EngineWorld w(kKeepPolicy, on(memory, EngineWorld::with_fields()));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  const std::string two = std::string(kLoose) + std::string(kLoose);
  ASSERT_EQ(p.client_data(two).action, FrameAction::kForward);
  p.client_sent = static_cast<uint32_t>(two.size());
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  // The worker names the flow; the engine copies it and changes it; the
  // process dies before the worker clears the mark.
  ASSERT_EQ(flows_of(w, memory).size(), 1u);
  w.engine->marker().flow(flows_of(w, memory)[0].flow.hash);
  const size_t before = w.sink.sent.size();
  (void)p.origin_data(response);
  const auto first = sent_to(w, Side::kClient, before);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_GT(first[0].payload().size(), response.size()) << "fields were inserted";

  const std::vector<dataplane::CarriedFlow> left = flows_at_kill(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_NE(left[0].context, nullptr);
  EXPECT_EQ(left[0].context->view().response_fields_count, 2u) << "as before the response: two outstanding";
  ASSERT_EQ(restart(w, memory, left, EngineWorld::with_fields()), 1u);

  // The origin sends it again: its first copy is, to the new process, lost.
  p.origin_sent = 0;
  const size_t again_at = w.sink.sent.size();
  (void)p.origin_data(response);
  const auto again = sent_to(w, Side::kClient, again_at);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].payload(), first[0].payload());
  EXPECT_EQ(again[0].view.seq, first[0].view.seq);
  const uint32_t inserted = static_cast<uint32_t>(first[0].payload().size() - response.size());

  // Killed again in the middle of the second response, with the first's
  // inserted fields not yet acknowledged by the client (a pending edit).
  w.engine->marker().flow(left[0].flow.hash);
  const size_t next_at = w.sink.sent.size();
  (void)p.origin_data(response);
  const auto next = sent_to(w, Side::kClient, next_at);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].view.seq, first[0].view.seq + response.size() + inserted);
  EXPECT_GT(next[0].payload().size(), response.size()) << "the second response's fields, from the copy's ring";
  const std::vector<dataplane::CarriedFlow> left2 = flows_at_kill(w, memory);
  ASSERT_EQ(left2.size(), 1u);
  ASSERT_NE(left2[0].context, nullptr);
  EXPECT_EQ(left2[0].context->view().to_client.pending(), 1u) << "the first response's fields, unacknowledged";
  ASSERT_EQ(restart(w, memory, left2, EngineWorld::with_fields()), 1u);
  p.origin_sent = static_cast<uint32_t>(response.size());
  const size_t again2_at = w.sink.sent.size();
  (void)p.origin_data(response);
  const auto again2 = sent_to(w, Side::kClient, again2_at);
  ASSERT_EQ(again2.size(), 1u);
  EXPECT_EQ(again2[0].payload(), next[0].payload());
  EXPECT_EQ(again2[0].view.seq, next[0].view.seq);
}

// A refusal answered on the open connection (keep-alive answers): its
// answer is in the answer store, which outlives the process with the flow
// file. After the restart the client sends the refused request again (the
// answer was lost): it gets the same answer at the same place, uncharged;
// and its next request goes to the origin as before.
TEST(FlowCarry, AKeptAnswerCarriesOnAndIsSentAgain) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kTight).forwarded());
  ASSERT_TRUE(c.respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").forwarded());
  const uint32_t refused_at = c.client_seq_;
  const size_t before = w.sink.sent.size();
  ASSERT_TRUE(c.data(kTight).payload_withheld());
  const auto first = sent_to(w, Side::kClient, before);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_NE(first[0].payload().find("429"), std::string::npos);

  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_NE(left[0].context, nullptr) << "the kept answer holds the context";
  EXPECT_EQ(dataplane::carry_verdict(left[0], true), CarryVerdict::kCarries);
  ASSERT_EQ(restart(w, memory, left), 1u);

  const size_t again_at = w.sink.sent.size();
  EXPECT_TRUE(c.client(flag::kAck | flag::kPsh, kTight, refused_at).payload_withheld());
  const auto second = sent_to(w, Side::kClient, again_at);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].payload(), first[0].payload());
  EXPECT_EQ(second[0].view.seq, first[0].view.seq);
  EXPECT_EQ(w.counters.kept_answers_resent.get(), 1u);
  EXPECT_EQ(w.counters.refused.get(), 1u) << "not judged again";
}

// The same flow, taken on by a worker without the store its answer was in
// (another geometry, another worker): it is not carried.
TEST(FlowCarry, AKeptAnswerInAnotherStoreDoesNotCarry) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kTight).forwarded());
  ASSERT_TRUE(c.respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").forwarded());
  ASSERT_TRUE(c.data(kTight).payload_withheld());
  const std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  w.engine.reset();
  dataplane::EngineConfig cfg = EngineWorld::small_config();
  cfg.cookie_seed = EngineWorld::kCookieSeed;
  w.engine = std::make_unique<FlowEngine>(memory.on_it(cfg), *w.state, w.counters, 42);
  EXPECT_EQ(w.engine->resume(left[0], dataplane::flow_hash(left[0].flow.key), *w.snapshot, false),
            FlowEngine::Resumed::kCannotCarry);
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_EQ(w.engine->contexts().free_count(), cfg.contexts);
}

// A context image with a position no binary writes is not taken on: the
// connection is reset at its next segment, and nothing is lent.
TEST(FlowCarry, ADamagedContextIsNotTakenOn) {
  PoolMemory memory(EngineWorld::small_config());
  EngineWorld w(kKeepPolicy, on(memory));
  Peers p(w);
  p.client_handshake();
  (void)p.origin_answer();
  ASSERT_EQ(p.client_data("POST /loose HTTP/1.1\r\nHost: api\r\nContent-Length: 100\r\n\r\n01").action,
            FrameAction::kForward);
  std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
  ASSERT_EQ(left.size(), 1u);
  ASSERT_NE(left[0].context, nullptr);
  auto& image = const_cast<dataplane::ParseContext&>(left[0].context->view());
  image.usage_count = 200;
  EXPECT_EQ(restart(w, memory, left), 0u);
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_EQ(w.engine->contexts().free_count(), EngineWorld::small_config().contexts);
}

// The cookie secret outlives the process with the flow file, so the rest
// of a forgotten connection's head passes may_follow: without the
// forgotten list it would be dropped as early data (the client would
// retransmit it until it gave up); with it, both ends are reset.
TEST(FlowCarry, AConnectionNotCarriedIsResetAtItsNextSegmentNotDropped) {
  for (const bool listed : {false, true}) {
    PoolMemory memory(EngineWorld::small_config());
    EngineWorld w(kDelayedKeep, on(memory));
    Peers p(w);
    p.client_handshake(true);
    const std::string_view first = "GET /loose HTTP/1.1\r\nHo";
    (void)p.client_data(first);
    std::vector<dataplane::CarriedFlow> left = flows_of(w, memory);
    ASSERT_EQ(left.size(), 1u);
    ASSERT_NE(left[0].context, nullptr);
    left[0].context->held_head.clear();  // its held head did not come along
    ASSERT_EQ(restart(w, memory, left), 0u);
    if (listed) w.engine->forget({left[0].flow.key});
    const size_t mark = w.sink.sent.size();
    const auto rest = p.client_data("st: api\r\n\r\n", static_cast<uint32_t>(first.size()));
    EXPECT_EQ(rest.action, FrameAction::kDrop);
    EXPECT_EQ(sent_with(w, Side::kClient, flag::kRst, mark), listed) << (listed ? "reset" : "dropped as early data");
    EXPECT_EQ(w.counters.untracked_reset.get(), listed ? 1u : 0u);
    EXPECT_EQ(w.counters.syn_cookie_early_data.get(), listed ? 0u : 1u);
  }
}

TEST(FlowCarry, StatesThisBinaryNeverWritesAreDamaged) {
  dataplane::TcpFlow f;
  f.ip_version = 4;
  const auto verdict = [](const dataplane::TcpFlow& flow) {
    return dataplane::carry_verdict(dataplane::CarriedFlow{flow, nullptr, std::nullopt}, false);
  };
  EXPECT_EQ(verdict(f), CarryVerdict::kCarries);
  dataplane::TcpFlow bad = f;
  bad.state = static_cast<dataplane::FlowState>(200);
  EXPECT_EQ(verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.client.l2_len = 200;
  EXPECT_EQ(verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.ip_version = 5;
  EXPECT_EQ(verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.bind.state = static_cast<dataplane::Binding>(9);
  EXPECT_EQ(verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.state = dataplane::FlowState::kRefusing;
  EXPECT_EQ(verdict(bad), CarryVerdict::kAnswering) << "its answer store is not this worker's";
  EXPECT_EQ(dataplane::carry_verdict(dataplane::CarriedFlow{bad, nullptr, std::nullopt}, true),
            CarryVerdict::kCarries);
  bad = f;
  bad.hold = 3;
  EXPECT_EQ(verdict(bad), CarryVerdict::kInFlight) << "a hold that did not come along";
  EXPECT_EQ(dataplane::carry_verdict(dataplane::CarriedFlow{bad, nullptr, dataplane::EditHold{}}, false),
            CarryVerdict::kCarries);
  bad = f;
  bad.context = 2;
  EXPECT_EQ(verdict(bad), CarryVerdict::kInFlight) << "a context that did not come along";
  bad = f;
  bad.bind.state = dataplane::Binding::kBinding;
  EXPECT_EQ(verdict(bad), CarryVerdict::kCarries) << "being bound without a stash: the SYN is sent again";
  bad.stash = 1;
  EXPECT_EQ(verdict(bad), CarryVerdict::kBinding) << "a stash that did not come along";
  dataplane::CarriedFlow with_stash{bad, nullptr, std::nullopt, dataplane::CarriedStash{7, false, {1, 2, 3}}};
  EXPECT_EQ(dataplane::carry_verdict(with_stash, false), CarryVerdict::kCarries);
}

TEST(FlowCarry, ATableOnGivenMemoryStartsEmptyAndKeepsItsFlowsThere) {
  std::vector<dataplane::TcpFlow> slots(64);
  std::vector<uint8_t> used(64, 1);  // whatever the memory held before
  dataplane::FlowTable t(dataplane::FlowSlots{slots, used});
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.capacity(), 64u);
  dataplane::FlowKey k{};
  k.client = *net::parse_ip("198.18.0.10");
  k.origin = *net::parse_ip("198.18.0.20");
  for (uint16_t port = 1; port <= 40; ++port) {
    k.client_port = port;
    ASSERT_NE(t.insert(k, dataplane::flow_hash(k)), nullptr);
  }
  size_t in_memory = 0;
  for (size_t i = 0; i < 64; ++i) in_memory += used[i];
  EXPECT_EQ(in_memory, 40u);
  k.client_port = 7;
  dataplane::TcpFlow* f = t.find(k, dataplane::flow_hash(k));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(t.slot_of(*f), static_cast<size_t>(f - slots.data()));
  t.erase(f);
  in_memory = 0;
  for (size_t i = 0; i < 64; ++i) in_memory += used[i];
  EXPECT_EQ(in_memory, 39u);
  for (uint16_t port = 1; port <= 40; ++port) {
    k.client_port = port;
    EXPECT_EQ(t.find(k, dataplane::flow_hash(k)) != nullptr, port != 7) << port;
  }
}

}  // namespace
}  // namespace sluice::test
