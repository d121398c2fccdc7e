// Flows carried across a restart (dataplane/flow_carry.h): a flow whose
// state is all in its TcpFlow, copied out of one engine's table and taken
// on by a new engine (as a restarted sluiced does from the flow file),
// continues exactly where it was; a flow that held a parse context is
// judged not to carry, and its next segment is reset, not dropped as a
// young cookie connection's early data; the table on given memory marks a
// slot used only once its flow is whole.
#include <gtest/gtest.h>

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

// Every flow of the world's engine, copied as the flow file keeps them.
std::vector<dataplane::TcpFlow> flows_of(EngineWorld& w) {
  std::vector<dataplane::TcpFlow> out;
  auto& table = const_cast<dataplane::FlowTable&>(w.engine->flows());
  for (size_t i = 0; i < table.capacity(); ++i) {
    if (const dataplane::TcpFlow* f = table.at_slot(i)) out.push_back(*f);
  }
  return out;
}

// The process dies; a new engine (the same limiter state: the buckets are
// re-attached) takes on what carries.
size_t restart(EngineWorld& w, const std::vector<dataplane::TcpFlow>& flows) {
  dataplane::EngineConfig c = EngineWorld::small_config();
  c.cookie_seed = EngineWorld::kCookieSeed;
  c.max_head_bytes = w.snapshot->policy.stream.head.max_head_bytes;
  c.max_fields = w.snapshot->policy.stream.head.max_fields;
  w.engine = std::make_unique<FlowEngine>(c, *w.state, w.counters, 42);
  size_t carried = 0;
  for (const dataplane::TcpFlow& f : flows) {
    if (dataplane::carry_verdict(f) != CarryVerdict::kCarries) continue;
    EXPECT_EQ(w.engine->resume(f, dataplane::flow_hash(f.key)), FlowEngine::Resumed::kYes);
    ++carried;
  }
  return carried;
}

TEST(FlowCarry, AnUnboundFlowCarriesOnAndBindsAtItsFirstRequest) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(/*bound_later=*/true);
  ASSERT_EQ(w.engine->unbound_flows(), 1u);
  const std::vector<dataplane::TcpFlow> left = flows_of(w);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(dataplane::carry_verdict(left[0]), CarryVerdict::kCarries);

  ASSERT_EQ(restart(w, left), 1u);
  EXPECT_EQ(w.engine->flows().size(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u) << "a stash waits for its first request again";
  EXPECT_EQ(w.engine->resume(left[0], dataplane::flow_hash(left[0].key)), FlowEngine::Resumed::kDuplicate);

  // Its first request opens the origin's connection, from the client's ISN
  // the new engine never saw, and goes to the origin whole.
  const auto admitted = p.client_data(kLoose);
  EXPECT_EQ(admitted.action, FrameAction::kDrop);
  const auto syn = sent_to(w, Side::kOrigin, admitted.before);
  ASSERT_EQ(syn.size(), 1u);
  ASSERT_TRUE(syn[0].view.has(flag::kSyn));
  EXPECT_EQ(syn[0].view.seq, p.client_isn);
  p.origin_syn = syn[0].view;
  const auto bound = p.origin_answer();
  StreamView origin_got(p.client_isn + 1);
  origin_got.add_sent(w, Side::kOrigin, bound.before);
  EXPECT_EQ(origin_got.contiguous(), kLoose);

  // The response reaches the client in the cookie's numbers, as before the restart.
  p.client_sent = static_cast<uint32_t>(kLoose.size());
  const auto response = p.origin_data("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, p.cookie + 1);
  EXPECT_EQ(response.view.ack, p.client_isn + 1 + kLoose.size());
}

TEST(FlowCarry, AFlowWithAHeadInFlightDoesNotCarry) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  (void)p.client_data("GET /loose HTTP/1.1\r\nHo");  // a head split across segments: held in a context
  const std::vector<dataplane::TcpFlow> left = flows_of(w);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_NE(dataplane::carry_verdict(left[0]), CarryVerdict::kCarries);
  EXPECT_EQ(restart(w, left), 0u);
  EXPECT_EQ(w.engine->flows().size(), 0u);
}

// The cookie secret outlives the process with the flow file, so the rest
// of a forgotten connection's head passes may_follow: without the
// forgotten list it would be dropped as early data (the client would
// retransmit it until it gave up); with it, both ends are reset.
TEST(FlowCarry, AConnectionNotCarriedIsResetAtItsNextSegmentNotDropped) {
  for (const bool listed : {false, true}) {
    EngineWorld w(kDelayedKeep);
    Peers p(w);
    p.client_handshake(true);
    const std::string_view first = "GET /loose HTTP/1.1\r\nHo";
    (void)p.client_data(first);
    const std::vector<dataplane::TcpFlow> left = flows_of(w);
    ASSERT_EQ(left.size(), 1u);
    ASSERT_EQ(restart(w, left), 0u);
    if (listed) w.engine->forget({left[0].key});
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
  EXPECT_EQ(dataplane::carry_verdict(f), CarryVerdict::kCarries);
  dataplane::TcpFlow bad = f;
  bad.state = static_cast<dataplane::FlowState>(200);
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.client.l2_len = 200;
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.ip_version = 5;
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.bind.state = static_cast<dataplane::Binding>(9);
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kDamaged);
  bad = f;
  bad.state = dataplane::FlowState::kRefusing;
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kAnswering);
  bad = f;
  bad.hold = 3;
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kInFlight);
  bad = f;
  bad.bind.state = dataplane::Binding::kBinding;
  EXPECT_EQ(dataplane::carry_verdict(bad), CarryVerdict::kBinding);
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
