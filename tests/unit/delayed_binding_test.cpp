// Delayed binding: a connection the SYN proxy accepted reaches
// the origin only once its first request is forwarded. Refusals before that
// are answered by the appliance alone; the origin's SYN-ACK renumbers the
// flow (the client's view never changes) and releases what waited for it.
#include <gtest/gtest.h>

#include <string>

#include "dataplane/checksum.h"
#include "flow_harness.h"
#include "proxy_peers.h"

namespace sluice::test {
namespace {

namespace flag = dataplane::tcp_flag;

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

// /tight: one request an hour (refusals kept open); anything else admitted.
const std::string kDelayedKeep = std::string(kKeepPolicy) + "binding: delayed\n";
// Two requests a minute per client; a refusal closes the connection.
const std::string kDelayedClose = std::string(kSmallPolicy) + "binding: delayed\n";

// The client's FIN at its sequence number `seq`, acknowledging the cookie.
Peers::Sent client_fin(Peers& p, uint32_t seq) {
  SegmentSpec fin;
  fin.seq = seq;
  fin.ack = p.cookie + 1;
  fin.flags = flag::kFin | flag::kAck;
  fin.window = 502;
  fin.timestamp = true;
  fin.tsval = ++p.client_clock;
  return p.feed(Side::kClient, fin);
}

// The client's view of the origin's stream, from the cookie on.
StreamView client_stream(const Peers& p) { return StreamView(p.cookie + 1); }

TEST(DelayedBinding, AHandshakeOffersAWindowAndOpensNothingAtTheOrigin) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(/*bound_later=*/true);
  EXPECT_EQ(p.synack.window, dataplane::BindStash::kWindow) << "room for the first request";
  EXPECT_TRUE(sent_to(w, Side::kOrigin).empty());
  EXPECT_EQ(w.engine->flows().size(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u);
  EXPECT_EQ(w.counters.syn_proxy_unbound.get(), 1u);
  EXPECT_EQ(w.counters.syn_proxy_bound.get(), 0u);
}

// A first request refused on a kept-open connection is answered by the
// appliance; the next, admitted, opens the origin's connection, and the
// origin gets that request alone, at the start of its stream.
TEST(DelayedBinding, ARequestRefusedFirstNeverReachesTheOrigin) {
  EngineWorld w(kDelayedKeep);
  {
    Peers spend(w, 40001);  // /tight's one request of the hour, on another connection
    spend.client_handshake(true);
    (void)spend.client_data(kTight);
  }
  const size_t mark = w.sink.sent.size();
  Peers p(w);
  p.client_handshake(true);
  const auto refused = p.client_data(kTight);
  EXPECT_EQ(refused.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, mark).empty()) << "not even a SYN";
  StreamView seen = client_stream(p);
  seen.add_sent(w, Side::kClient, refused.before);
  EXPECT_EQ(seen.contiguous().substr(0, 12), "HTTP/1.1 429");
  EXPECT_EQ(w.counters.unbound_answers.get(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 2u);  // this one and the one still binding

  // The admitted request: held back, the SYN sent with the client's options.
  const std::string answer = seen.contiguous();
  p.origin_sent = static_cast<uint32_t>(answer.size());  // the client acknowledges the 429 whole
  const auto admitted = p.client_data(kLoose, static_cast<uint32_t>(kTight.size()));
  EXPECT_EQ(admitted.action, FrameAction::kDrop);
  const auto syn = sent_to(w, Side::kOrigin, admitted.before);
  ASSERT_EQ(syn.size(), 1u);
  ASSERT_TRUE(syn[0].view.has(flag::kSyn));
  EXPECT_EQ(syn[0].view.seq, p.client_isn);
  EXPECT_EQ(syn[0].view.options.wscale, 9);
  p.origin_syn = syn[0].view;

  // The origin answers: the request goes to it at the start of its stream.
  const auto bound = p.origin_answer();
  EXPECT_EQ(bound.action, FrameAction::kDrop);
  StreamView origin_got(p.client_isn + 1);
  origin_got.add_sent(w, Side::kOrigin, bound.before);
  EXPECT_EQ(origin_got.contiguous(), kLoose);
  for (const SentSegment& s : sent_to(w, Side::kOrigin, bound.before)) {
    EXPECT_EQ(s.view.ack, p.origin_isn + 1);
    EXPECT_EQ(s.view.options.tsecr, p.origin_clock) << "the origin's own clock echoed";
    EXPECT_TRUE(dataplane::tcp_checksum_ok(s.bytes.data(), s.view));
  }
  EXPECT_EQ(w.counters.syn_proxy_bound.get(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u);

  // Its response follows the 429 in the client's numbers, and its
  // acknowledgement covers the refused request too.
  p.client_sent = static_cast<uint32_t>(kLoose.size());  // what the origin got
  p.origin_sent = 0;                                      // and its stream starts
  const auto response = p.origin_data(kOk);
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, p.cookie + 1 + answer.size());
  EXPECT_EQ(response.view.ack, p.client_isn + 1 + kTight.size() + kLoose.size());
  EXPECT_EQ(response.view.options.tsval, p.synack.options.tsval + 1) << "the cookie's clock, moved on";
}

TEST(DelayedBinding, ARefusalThatClosesEndsTheConnectionWithoutTheOrigin) {
  EngineWorld w(kDelayedClose);
  {
    Peers spend(w, 40001);  // the minute's two requests, on another connection
    spend.client_handshake(true);
    (void)spend.client_data(kTight);
    (void)spend.client_data(kTight, static_cast<uint32_t>(kTight.size()));
  }
  const size_t mark = w.sink.sent.size();
  Peers p(w);
  p.client_handshake(true);
  (void)p.client_data(kTight);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, mark).empty()) << "no SYN, no RST";
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kFin, mark));
  EXPECT_EQ(w.counters.unbound_answers.get(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u) << "the answered flow's stash went back";
}

// A head split across segments is held (and acknowledged); once admitted
// it waits for the origin whole, and goes to it whole.
TEST(DelayedBinding, AHeldHeadGoesToTheOriginWholeOnceItAnswers) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  const std::string head(kLoose);
  const auto first = p.client_data(head.substr(0, 10));
  EXPECT_EQ(first.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, first.before).empty());
  const auto rest = p.client_data(head.substr(10), 10);
  ASSERT_EQ(sent_to(w, Side::kOrigin, rest.before).size(), 1u);
  p.origin_syn = sent_to(w, Side::kOrigin, rest.before)[0].view;
  const auto bound = p.origin_answer();
  StreamView origin_got(p.client_isn + 1);
  origin_got.add_sent(w, Side::kOrigin, bound.before);
  EXPECT_EQ(origin_got.contiguous(), head);
}

// The client sends its request again while the origin has not answered:
// nothing twice; once bound, its next copy goes on as any repeat.
TEST(DelayedBinding, ARequestSentAgainWhileBindingIsNotSentTwice) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  const auto first = p.client_data(kLoose);
  p.origin_syn = sent_to(w, Side::kOrigin, first.before)[0].view;
  const auto again = p.client_data(kLoose);
  EXPECT_EQ(again.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, again.before).empty()) << "within 200 ms: not even the SYN again";
  const auto bound = p.origin_answer();
  size_t payload = 0;
  for (const SentSegment& s : sent_to(w, Side::kOrigin, bound.before)) payload += s.view.payload_len;
  EXPECT_EQ(payload, kLoose.size());
  EXPECT_EQ(w.counters.requests.get(), 1u);
  const auto later = p.client_data(kLoose);
  EXPECT_EQ(later.action, FrameAction::kForward);
  EXPECT_EQ(w.counters.requests.get(), 1u) << "charged once";
}

// A client that sends its request and closes (HTTP/1.0's way): the FIN
// waits with the request and goes with it.
TEST(DelayedBinding, AFinAfterTheRequestGoesWithIt) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  const auto request = p.client_data(kLoose);
  p.origin_syn = sent_to(w, Side::kOrigin, request.before)[0].view;
  const uint32_t fin_seq = p.client_isn + 1 + static_cast<uint32_t>(kLoose.size());
  EXPECT_EQ(client_fin(p, fin_seq).action, FrameAction::kDrop);
  const auto bound = p.origin_answer();
  const auto to_origin = sent_to(w, Side::kOrigin, bound.before);
  ASSERT_FALSE(to_origin.empty());
  EXPECT_TRUE(to_origin.back().view.has(flag::kFin));
  EXPECT_EQ(to_origin.back().view.seq + to_origin.back().view.payload_len, fin_seq);
}

TEST(DelayedBinding, AClientThatClosesFirstNeverReachesTheOrigin) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  const auto sent = client_fin(p, p.client_isn + 1);
  EXPECT_EQ(sent.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin).empty());
  bool fin_acked = false;
  for (const SentSegment& s : sent_to(w, Side::kClient, sent.before)) {
    if (s.view.has(flag::kAck) && s.view.ack == p.client_isn + 2) fin_acked = true;
  }
  EXPECT_TRUE(fin_acked);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kFin, sent.before));
  EXPECT_EQ(w.engine->unbound_flows(), 0u);
}

// The origin stays silent: its SYN goes again each second, and after five
// the client, which is waiting for its response, is reset.
TEST(DelayedBinding, ASilentOriginGetsItsSynAgainThenTheClientIsReset) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  (void)p.client_data(kLoose);
  const size_t mark = w.sink.sent.size();
  w.now += 1'100'000'000;
  w.sweep();
  const auto again = sent_to(w, Side::kOrigin, mark);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].view.has(flag::kSyn));
  w.now += 4'000'000'000;
  const size_t before_reset = w.sink.sent.size();
  w.sweep();
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, before_reset));
  EXPECT_EQ(w.counters.syn_proxy_refused.get(), 1u);
  EXPECT_EQ(w.engine->unbound_flows(), 0u);
}

TEST(DelayedBinding, AnOriginThatRefusesTheSynResetsTheClient) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  (void)p.client_data(kLoose);
  SegmentSpec rst;
  rst.seq = 0;
  rst.ack = p.client_isn + 1;
  rst.flags = flag::kRst | flag::kAck;
  const auto refused = p.feed(Side::kOrigin, rst);
  EXPECT_EQ(refused.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, refused.before));
  EXPECT_EQ(w.counters.syn_proxy_refused.get(), 1u);
}

// Unbound, the origin has no connection: whatever claims to come from it
// is dropped, and acknowledges nothing to the client.
TEST(DelayedBinding, SegmentsFromTheOriginOfAnUnboundFlowAreDropped) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.client_handshake(true);
  const auto forged = p.origin_data(kOk);
  EXPECT_EQ(forged.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kClient, forged.before).empty());
  SegmentSpec synack;
  synack.seq = 77;
  synack.ack = p.client_isn + 1;
  synack.flags = flag::kSyn | flag::kAck;
  EXPECT_EQ(p.feed(Side::kOrigin, synack).action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.syn_proxy_bound.get(), 0u);
  EXPECT_EQ(w.engine->unbound_flows(), 1u);
}

// The client's first data overtakes its handshake's ACK (reordered): it is
// dropped, not reset, and once the ACK has made the flow it is taken.
TEST(DelayedBinding, DataAheadOfTheHandshakesAckIsDroppedNotReset) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  const auto syn = p.feed(Side::kClient, p.syn());
  p.synack = sent_to(w, Side::kClient, syn.before)[0].view;
  p.cookie = p.synack.seq;
  p.seen_tsval = p.synack.options.tsval;
  const std::string head(kLoose);
  const auto early = p.client_data(head.substr(10), 10);  // the request's second segment, first
  EXPECT_EQ(early.action, FrameAction::kDrop);
  EXPECT_FALSE(sent_with(w, Side::kClient, flag::kRst, early.before));
  EXPECT_TRUE(sent_to(w, Side::kOrigin, early.before).empty());
  EXPECT_EQ(w.counters.syn_cookie_early_data.get(), 1u);
  EXPECT_EQ(w.engine->flows().size(), 0u);
  // Its first segment arrives (the ACK lost): it completes the handshake.
  const auto first = p.client_data(head.substr(0, 10));
  EXPECT_EQ(w.engine->flows().size(), 1u);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, first.before).empty()) << "a part of a head: held, nothing forwarded";
  const auto rest = p.client_data(head.substr(10), 10);  // sent again
  ASSERT_EQ(sent_to(w, Side::kOrigin, rest.before).size(), 1u);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, rest.before)[0].view.has(flag::kSyn));
}

// A segment of a connection the appliance never answered that does not
// begin a request (adopted if it did: flow_adoption_test.cpp) is reset, as
// before delayed binding: the client reconnects through the proxy.
TEST(DelayedBinding, DataOfAnUnknownConnectionIsStillReset) {
  EngineWorld w(kDelayedKeep);
  Peers p(w);
  p.cookie = 0x5a5a5a5a;  // no cookie of this engine's
  const auto stray = p.client_data("body bytes of some earlier request");
  EXPECT_EQ(stray.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, stray.before));
  EXPECT_EQ(w.counters.untracked_reset.get(), 1u);
}

// With every stash in use, a new connection is bound as its handshake
// completes, as without delayed binding: it costs the origin a handshake,
// never the client its connection.
TEST(DelayedBinding, WithNoStashFreeAFlowIsBoundAtOnce) {
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.bind_stashes = 1;
  EngineWorld w(kDelayedKeep, config);
  Peers first(w, 40001);
  first.client_handshake(true);
  Peers second(w);
  second.client_handshake(/*bound_later=*/false);
  EXPECT_TRUE(second.origin_syn.has(flag::kSyn));
  EXPECT_EQ(w.counters.bind_stash_exhausted.get(), 1u);
}

}  // namespace
}  // namespace sluice::test
