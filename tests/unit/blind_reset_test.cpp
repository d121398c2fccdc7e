// RFC 5961 on tracked flows: only a RST at the exact expected number ends a
// connection; one elsewhere in the window gets a challenge ACK, one outside
// it is dropped, and neither touches the flow (before, any RST closed it,
// and a closed flow's later bytes went to the origin unjudged). A SYN on an
// open connection gets a challenge ACK. Both through the SYN proxy bound at
// once (Connection) and unbound behind it (Peers, delayed binding).
#include <gtest/gtest.h>

#include "dataplane/rst_acceptance.h"
#include "flow_harness.h"
#include "proxy_peers.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::RstVerdict;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr std::string_view kGet = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

TEST(RstAcceptance, OnlyTheExpectedNumberIsExact) {
  dataplane::TcpFlow f;
  f.state = dataplane::FlowState::kEstablished;
  f.proxy.active = true;
  f.client.wscale = 7;
  f.client.next = 1000;
  f.origin.window = 100;  // 100 << 7 = 12800 bytes
  EXPECT_EQ(dataplane::judge_client_rst(f, 1000, 1000), RstVerdict::kExact);
  EXPECT_EQ(dataplane::judge_client_rst(f, 900, 900), RstVerdict::kExact) << "what the origin acknowledged";
  EXPECT_EQ(dataplane::judge_client_rst(f, 900, 1000), RstVerdict::kOutOfWindow) << "before the window";
  EXPECT_EQ(dataplane::judge_client_rst(f, 1001, 1000), RstVerdict::kInWindow);
  EXPECT_EQ(dataplane::judge_client_rst(f, 1000 + 12799, 1000), RstVerdict::kInWindow);
  EXPECT_EQ(dataplane::judge_client_rst(f, 1000 + 12800, 1000), RstVerdict::kOutOfWindow);
  EXPECT_EQ(dataplane::judge_client_rst(f, 1000 - 100000, 1000), RstVerdict::kOutOfWindow);
  EXPECT_EQ(dataplane::judge_client_rst(f, 1000 + 3000000, 1000), RstVerdict::kOutOfWindow);
  f.origin.window = 0;  // a shut window: the exact number or nothing
  EXPECT_EQ(dataplane::judge_client_rst(f, 1001, 1000), RstVerdict::kOutOfWindow);
  // Before the handshake is complete, the number after the client's ISN.
  f.state = dataplane::FlowState::kSynReceived;
  f.client.isn = 5000;
  f.origin.window = 100;
  EXPECT_EQ(dataplane::judge_client_rst(f, 5001, 1000), RstVerdict::kExact);
  EXPECT_EQ(dataplane::judge_client_rst(f, 1000, 1000), RstVerdict::kOutOfWindow);
}

// The second variant of the attack: a request answered, then one RST far
// ahead. Before, the flow closed at the appliance (the origin ignored the
// RST) and every later request went through unjudged.
TEST(BlindReset, ARstFarAheadLeavesTheConnectionJudged) {
  EngineWorld w;  // two requests a minute per client
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const size_t before = w.sink.sent.size();
  const Fed far = c.client(flag::kRst, "", c.client_seq_ + 3000000u * 16);
  EXPECT_EQ(far.action, FrameAction::kDrop);
  const Fed behind = c.client(flag::kRst | flag::kAck, "", c.client_seq_ - 100000);
  EXPECT_EQ(behind.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.rst_out_of_window.get(), 2u);
  EXPECT_TRUE(sent_to(w, Side::kClient, before).empty()) << "nothing answers a RST outside the window";
  ASSERT_TRUE(c.data(kGet).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  EXPECT_EQ(c.data(kGet).action, FrameAction::kDrop) << "the third of a budget of two: still judged";
  EXPECT_EQ(w.counters.requests.get(), 3u);
  EXPECT_EQ(w.counters.refused.get(), 1u);
}

TEST(BlindReset, ARstInTheWindowGetsAChallengeAckAndChangesNothing) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const size_t before = w.sink.sent.size();
  const Fed near = c.client(flag::kRst, "", c.client_seq_ + 10);
  EXPECT_EQ(near.action, FrameAction::kDrop) << "not forwarded: the origin's connection stays as it is";
  const auto acks = sent_to(w, Side::kClient, before);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.flags, flag::kAck);
  EXPECT_EQ(acks[0].view.ack, c.client_seq_) << "the number a real peer's RST must carry";
  EXPECT_EQ(acks[0].view.seq, c.origin_seq_);
  EXPECT_EQ(w.counters.rst_challenged.get(), 1u);
  ASSERT_TRUE(c.data(kGet).forwarded());
  EXPECT_EQ(w.counters.admitted.get(), 2u);
}

// The exact RST ends the connection; its later bytes are dropped, never
// forwarded unjudged.
TEST(BlindReset, AnExactRstEndsTheConnectionAndNothingFollowsIt) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const Fed rst = c.client(flag::kRst | flag::kAck, "", c.client_seq_);
  EXPECT_TRUE(rst.forwarded());
  const Fed after = c.data(kGet);
  EXPECT_EQ(after.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.closed_data_dropped.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 1u);
}

TEST(BlindReset, ChallengeAcksAreRateLimitedPerWorker) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  const size_t before = w.sink.sent.size();
  for (int i = 0; i < 1100; ++i) (void)c.client(flag::kRst, "", c.client_seq_ + 1);
  EXPECT_EQ(sent_to(w, Side::kClient, before).size(), 1000u);
  EXPECT_EQ(w.counters.challenge_acks_limited.get(), 100u);
  w.now += time::kNanosPerSecond;
  const size_t later = w.sink.sent.size();
  (void)c.client(flag::kRst, "", c.client_seq_ + 1);
  EXPECT_EQ(sent_to(w, Side::kClient, later).size(), 1u) << "refilled a second later";
}

// Through the SYN proxy, a SYN on an open connection is answered with a
// challenge ACK (bridged, the origin's own stack sends one).
TEST(BlindReset, ASynOnAnOpenProxiedConnectionGetsAChallengeAck) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(c.client(flag::kSyn, "", 12345).action, FrameAction::kDrop);
  const auto acks = sent_to(w, Side::kClient, before);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.ack, c.client_seq_);
  EXPECT_EQ(w.counters.syn_challenged.get(), 1u);
  EXPECT_TRUE(c.data(kGet).forwarded());
}

// The first variant: a new connection behind the SYN proxy, not yet bound
// to the origin. Before, any RST ended it at the appliance.
TEST(BlindReset, AnUnboundConnectionSurvivesRstsOutsideItsWindow) {
  EngineWorld w(std::string(kKeepPolicy) + "binding: delayed\n");
  Peers p(w);
  p.client_handshake(/*bound_later=*/true);
  for (const uint32_t off : {uint32_t{0} - 100000, uint32_t{3000000}}) {
    for (const bool ack : {false, true}) {
      dataplane::SegmentSpec s;
      s.seq = p.client_isn + 1 + off;
      s.ack = p.cookie + 1;
      s.flags = ack ? flag::kRst | flag::kAck : flag::kRst;
      EXPECT_EQ(p.feed(Side::kClient, s).action, FrameAction::kDrop);
    }
  }
  EXPECT_EQ(w.counters.rst_out_of_window.get(), 4u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u) << "the flow is still there";
  const auto sent = p.client_data(kLoose);
  EXPECT_EQ(sent.action, FrameAction::kDrop) << "stashed";
  const auto syn = sent_to(w, Side::kOrigin, sent.before);
  ASSERT_EQ(syn.size(), 1u) << "the request binds the connection";
  EXPECT_TRUE(syn[0].view.has(flag::kSyn));
  EXPECT_EQ(w.counters.admitted.get(), 1u);
}

}  // namespace
}  // namespace sluice::test
