// Connections adopted mid-stream (dataplane/flow_adopter.h), where the policy
// turns adoption on: a
// keep-alive connection opened before the appliance restarted, its two ends
// each with the numbers and clock the appliance that is gone had translated
// between. Its next request is adopted at the head: parsed, decided, and
// forwarded in the origin's numbers once the origin has told them.
#include <gtest/gtest.h>

#include <string>

#include "dataplane/flow_adopter.h"
#include "flow_harness.h"
#include "proxy_peers.h"

namespace sluice::test {
namespace {

namespace flag = dataplane::tcp_flag;
using dataplane::FlowAdopter;

constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
constexpr time::Nanos kSecond = time::kNanosPerSecond;
// Adoption is off unless the policy turns it on (a connection the appliance
// does not know cannot be known to be between requests).
const std::string kAdoptKeep = std::string(kKeepPolicy) + "adoption: on\n";

// Both ends of a connection older than the engine, as each numbers it. The
// origin's numbers of the client's stream are 777 ahead of the client's (a
// refused request was cut out before the restart); its stream and clock are
// the origin's own, the client's view of them the cookie's.
struct Survivor {
  explicit Survivor(EngineWorld& w, uint16_t port = 40000) : p(w, port) {}

  Peers::Sent client(std::string_view payload, uint8_t flags = flag::kAck | flag::kPsh) {
    SegmentSpec s;
    s.seq = c_seq;
    s.ack = c_ack;
    s.flags = flags;
    s.window = 502;
    s.timestamp = true;
    s.tsval = ++c_clock;
    s.tsecr = c_echo;
    s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
    c_seq += static_cast<uint32_t>(payload.size());
    return p.feed(Side::kClient, s);
  }
  // The last `payload` sent again, as the client's stack does when nothing
  // acknowledged it.
  Peers::Sent again(std::string_view payload) {
    c_seq -= static_cast<uint32_t>(payload.size());
    return client(payload);
  }
  Peers::Sent origin(std::string_view payload, uint32_t seq, uint8_t flags = flag::kAck | flag::kPsh) {
    SegmentSpec s;
    s.seq = seq;
    s.ack = o_rcv;
    s.flags = flags;
    s.window = 1000;
    s.timestamp = true;
    s.tsval = ++o_clock;
    s.tsecr = c_clock;
    s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
    return p.feed(Side::kOrigin, s);
  }
  Peers::Sent origin(std::string_view payload) {
    const Peers::Sent sent = origin(payload, o_seq);
    o_seq += static_cast<uint32_t>(payload.size());
    return sent;
  }
  // The payload of a client segment as forwarded (its last frame).
  std::string_view forwarded(const Peers::Sent& sent) const {
    return {reinterpret_cast<const char*>(p.last_frame.data() + sent.view.payload_offset), sent.view.payload_len};
  }
  // The origin's answer to the probe: its next byte, and the next it expects.
  Peers::Sent origin_ack() { return origin("", o_seq, flag::kAck); }

  Peers p;
  uint32_t c_seq = 0x20000000, c_ack = 0x30000000, c_clock = 7000, c_echo = 500000;
  uint32_t o_seq = 0x90000000, o_rcv = 0x20000000 + 777, o_clock = 100;
};

// Its first bytes adopted, the probe sent and answered, the request sent
// again by the client: judged now, and gone to the origin. Returns the
// client's repeat as forwarded.
Peers::Sent adopt_with(EngineWorld& w, Survivor& s, std::string_view request) {
  const auto first = s.client(request);
  EXPECT_EQ(first.action, FrameAction::kDrop);
  EXPECT_EQ(sent_to(w, Side::kOrigin, first.before).size(), 1u) << "the probe";
  const auto answer = s.origin_ack();
  EXPECT_EQ(answer.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, answer.before).empty()) << "nothing judged yet, nothing to send";
  return s.again(request);
}

TEST(FlowAdoption, AKeepAliveRequestIsJudgedOnceTheOriginHasShownTheConnection) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  const uint32_t c_start = s.c_seq;
  const auto first = s.client(kLoose);
  EXPECT_EQ(first.action, FrameAction::kDrop) << "unread and unacknowledged, until the origin answers";
  EXPECT_EQ(w.counters.flows_adopted.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 0u) << "identity before charge: not even parsed";
  EXPECT_EQ(w.counters.admitted.get(), 0u);
  EXPECT_EQ(w.counters.untracked_reset.get(), 0u);
  const auto probe = sent_to(w, Side::kOrigin, first.before);
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].view.flags, flag::kAck) << "a bare ACK";
  EXPECT_EQ(probe[0].view.payload_len, 0u);
  EXPECT_EQ(probe[0].view.seq, c_start - FlowAdopter::kProbeDistance) << "outside any window: the origin answers";
  EXPECT_TRUE(sent_to(w, Side::kClient, first.before).empty());

  const uint32_t o_clock_answered = s.o_clock + 1;
  const auto answer = s.origin_ack();
  EXPECT_EQ(answer.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, answer.before).empty());
  EXPECT_EQ(w.counters.adoption_proved.get(), 1u);
  const auto request = s.again(kLoose);
  ASSERT_EQ(request.action, FrameAction::kForward);
  EXPECT_EQ(s.forwarded(request), kLoose);
  EXPECT_EQ(request.view.seq, s.o_rcv) << "where the origin's stream of the client's bytes stands";
  EXPECT_EQ(request.view.ack, s.o_seq);
  EXPECT_EQ(request.view.options.tsecr, o_clock_answered) << "the origin's own clock echoed";
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.admitted.get(), 1u);
  s.o_rcv += static_cast<uint32_t>(kLoose.size());

  // The response, in the client's numbers and on the clock it knows.
  const auto response = s.origin(kOk);
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, s.c_ack);
  EXPECT_EQ(response.view.ack, s.c_seq);
  EXPECT_EQ(response.view.options.tsval, s.c_echo + 1) << "continues from what the client echoed";
  s.c_ack += static_cast<uint32_t>(kOk.size());
  s.c_echo = response.view.options.tsval;

  // The next request goes straight through, renumbered.
  const auto next = s.client(kLoose);
  ASSERT_EQ(next.action, FrameAction::kForward);
  EXPECT_EQ(next.view.seq, s.o_rcv);
  EXPECT_EQ(next.view.ack, s.o_seq);
  EXPECT_EQ(next.view.options.tsecr, s.o_clock) << "the echo mapped back";
  EXPECT_EQ(w.counters.requests.get(), 2u);
  EXPECT_EQ(w.counters.adoption_failed.get(), 0u);
}

// A forged head (a victim's address, a connection nobody opened): the
// origin answers the probe with a RST. Nothing was parsed, charged or
// forwarded; what the forger sends meanwhile is dropped unread.
TEST(FlowAdoption, AForgedHeadIsNeverChargedNorForwarded) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  const auto first = s.client(kTight);
  EXPECT_EQ(first.action, FrameAction::kDrop);
  const auto more = s.client(kTight);
  EXPECT_EQ(more.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_to(w, Side::kOrigin, more.before).empty());
  const auto rst = s.origin("", s.o_seq, flag::kRst);
  EXPECT_EQ(rst.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.requests.get(), 0u);
  EXPECT_EQ(w.counters.admitted.get(), 0u);
  EXPECT_EQ(w.counters.refused.get(), 0u);
  EXPECT_EQ(w.counters.adoption_failed.get(), 1u);
  EXPECT_EQ(w.counters.adoption_proved.get(), 0u);
  // /tight's one request of the hour is still there for the address.
  Survivor real(w, 40001);
  EXPECT_EQ(adopt_with(w, real, kTight).action, FrameAction::kForward);
  EXPECT_EQ(w.counters.admitted.get(), 1u);
}

// A refusal on an adopted connection is answered by the appliance in the
// client's numbers and cut out of the stream: the admitted request after it
// arrives where the origin's stream stands, and the response follows the
// 429 in the client's view.
TEST(FlowAdoption, ARefusalOnAnAdoptedConnectionIsCutOutAndRenumbered) {
  EngineWorld w(kAdoptKeep);
  {
    Survivor spend(w, 40001);  // /tight's one request of the hour
    (void)adopt_with(w, spend, kTight);
  }
  Survivor s(w);
  (void)s.client(kTight);
  (void)s.origin_ack();
  const auto refused = s.again(kTight);
  // Cut out: at most a bare acknowledgement goes on.
  EXPECT_TRUE(refused.action == FrameAction::kDrop || refused.view.payload_len == 0) << "nothing of it reaches the origin";
  EXPECT_TRUE(sent_to(w, Side::kOrigin, refused.before).empty());
  StreamView seen(s.c_ack);
  seen.add_sent(w, Side::kClient, refused.before);
  const std::string answer = seen.contiguous();
  ASSERT_TRUE(answer.starts_with("HTTP/1.1 429")) << answer;
  s.c_ack += static_cast<uint32_t>(answer.size());

  const uint32_t after_refused = s.c_seq;
  const auto admitted = s.client(kLoose);
  ASSERT_EQ(admitted.action, FrameAction::kForward);
  EXPECT_EQ(s.forwarded(admitted), kLoose);
  EXPECT_EQ(admitted.view.seq, s.o_rcv) << "the refused request is not in the origin's stream";
  s.o_rcv += static_cast<uint32_t>(kLoose.size());

  const auto response = s.origin(kOk);
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, s.c_ack) << "after the 429 the client already has";
  EXPECT_EQ(response.view.ack, after_refused + kLoose.size()) << "the client's numbers, the cut put back";
}

TEST(FlowAdoption, BytesThatDoNotBeginARequestAreResetAsBefore) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  const auto mid_body = s.client("0123456789abcdef0123456789abcdef");
  EXPECT_EQ(mid_body.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.untracked_reset.get(), 1u);
  EXPECT_EQ(w.counters.flows_adopted.get(), 0u);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, mid_body.before));
  EXPECT_TRUE(sent_with(w, Side::kOrigin, flag::kRst, mid_body.before));
  EXPECT_EQ(w.engine->flows().size(), 0u);
}

TEST(FlowAdoption, OffInThePolicyEveryUnknownConnectionIsReset) {
  EngineWorld w(kKeepPolicy);  // adoption off: the default
  Survivor s(w);
  const auto request = s.client(kLoose);
  EXPECT_EQ(request.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.untracked_reset.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 0u);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, request.before));
}

// Behind a load balancer (the PROXY protocol from a trusted proxy), a
// connection the appliance does not know is not adopted: whom it relays was
// said in a header long gone. It is reset and counted; the balancer
// connects again, with a header.
TEST(FlowAdoption, ATrustedProxysConnectionIsNotAdopted) {
  EngineWorld w(kAdoptKeep + "client_ip:\n  trusted_proxies: [198.18.0.10/32]\n  proxy_protocol: strip\n");
  Survivor s(w);
  const auto request = s.client(kLoose);
  EXPECT_EQ(request.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.proxy_not_adopted.get(), 1u);
  EXPECT_EQ(w.counters.flows_adopted.get(), 0u);
  EXPECT_EQ(w.counters.untracked_reset.get(), 1u);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, request.before));
  EXPECT_EQ(w.counters.requests.get(), 0u);
}

// The origin may be inside an earlier body: a request with a body (or a
// protocol switch) could hide requests it reads. The connection is reset,
// the request not judged; before the origin has answered it never heard of
// the adoption, after it gets a RST at the byte it expects.
TEST(FlowAdoption, ARequestWithABodyResetsTheConnectionUnjudged) {
  constexpr std::string_view kPost = "POST /loose HTTP/1.1\r\nHost: api\r\nContent-Length: 5\r\n\r\nhello";
  EngineWorld w(kAdoptKeep);
  Survivor first(w, 40001);
  (void)first.client(kPost);
  (void)first.origin_ack();
  const auto post = first.again(kPost);
  EXPECT_EQ(post.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, post.before));
  const auto post_rst = sent_to(w, Side::kOrigin, post.before);
  ASSERT_EQ(post_rst.size(), 1u);
  EXPECT_TRUE(post_rst[0].view.has(flag::kRst));
  EXPECT_EQ(post_rst[0].view.seq, first.o_rcv) << "the byte the origin expects";
  EXPECT_EQ(w.counters.requests.get(), 0u);
  EXPECT_EQ(w.counters.adopted_reset.get(), 1u);

  Survivor s(w);
  (void)adopt_with(w, s, kLoose);
  s.o_rcv += static_cast<uint32_t>(kLoose.size());
  const auto upgrade = s.client("GET /loose HTTP/1.1\r\nHost: api\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_EQ(upgrade.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, upgrade.before));
  const auto to_origin = sent_to(w, Side::kOrigin, upgrade.before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, s.o_rcv) << "the byte the origin expects";
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.adopted_reset.get(), 2u);
}

// An origin that answers the probe with data was mid-response: the client's
// acknowledgement did not cover what it sent, and the numbers cannot be
// trusted. Both ends reset, the origin where it expects.
TEST(FlowAdoption, AnOriginThatIsSendingEndsTheAdoption) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  (void)s.client(kLoose);
  const auto data = s.origin("rest of an earlier response");
  EXPECT_EQ(data.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, data.before));
  const auto to_origin = sent_to(w, Side::kOrigin, data.before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, s.o_rcv);
  EXPECT_EQ(w.counters.adoption_failed.get(), 1u);
}

TEST(FlowAdoption, AnOriginWithoutTheConnectionEndsTheAdoption) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  (void)s.client(kLoose);
  const auto rst = s.origin("", s.o_seq, flag::kRst);
  EXPECT_EQ(rst.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, rst.before));
  EXPECT_EQ(w.counters.adoption_failed.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 0u);
}

TEST(FlowAdoption, ASilentOriginIsProbedAgainThenTheClientReset) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  (void)s.client(kLoose);
  w.now += kSecond + kSecond / 10;
  size_t before = w.sink.sent.size();
  w.sweep();
  const auto again = sent_to(w, Side::kOrigin, before);
  ASSERT_EQ(again.size(), 1u) << "the probe again";
  EXPECT_EQ(again[0].view.payload_len, 0u);
  w.now += dataplane::SynProxy::kOriginAnswerDeadline;
  before = w.sink.sent.size();
  w.sweep();
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, before));
  EXPECT_EQ(w.counters.adoption_failed.get(), 1u);
  before = w.sink.sent.size();
  w.now += kSecond;
  w.sweep();
  EXPECT_TRUE(sent_to(w, Side::kClient, before).empty()) << "told once";
}

// Bytes the origin sent before the adoption, arriving after it: the client
// had not acknowledged all of them, so the numbers are wrong. Reset.
TEST(FlowAdoption, OriginBytesFromBeforeTheAdoptionEndIt) {
  EngineWorld w(kAdoptKeep);
  Survivor s(w);
  (void)adopt_with(w, s, kLoose);
  const auto late = s.origin("0123456789", s.o_seq - 10);
  EXPECT_EQ(late.action, FrameAction::kDrop);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, late.before));
  EXPECT_TRUE(sent_with(w, Side::kOrigin, flag::kRst, late.before));
  EXPECT_EQ(w.counters.adoption_failed.get(), 1u);
}

TEST(FlowAdoption, WhatBeginsARequest) {
  auto begins = [](std::string_view s) {
    return FlowAdopter::begins_request({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  EXPECT_TRUE(begins("GET / HTTP/1.1\r\nHost: a\r\n"));
  EXPECT_TRUE(begins("PROPFIND /x HTTP/1.0\n"));
  EXPECT_TRUE(begins("M-SEARCH * HTTP/1.1\r\n"));
  EXPECT_FALSE(begins("GET /a-long-target-whose-line-ends-in-the-next-segment")) << "cannot tell";
  EXPECT_FALSE(begins("GET / HTTP/1.1")) << "its end not seen";
  EXPECT_FALSE(begins("body bytes of some earlier request\r\n")) << "words, not a request line";
  EXPECT_FALSE(begins("GET / HTTP/2.0\r\n"));
  EXPECT_FALSE(begins(" GET / HTTP/1.1\r\n"));
  EXPECT_FALSE(begins("\r\nGET / HTTP/1.1\r\n"));
  EXPECT_FALSE(begins("{\"json\": 1}\n"));
  EXPECT_FALSE(begins("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n")) << "no method is that long";
  EXPECT_FALSE(begins(""));
}

TEST(FlowAdoption, AdoptionsPerWorkerAreLimited) {
  dataplane::SegmentEmitter emitter;
  FlowAdopter adopter(emitter);
  time::Nanos now = 1000 * kSecond;
  uint32_t allowed = 0;
  for (uint32_t i = 0; i < FlowAdopter::kBurst + 10; ++i) allowed += adopter.allows(now) ? 1u : 0u;
  EXPECT_EQ(allowed, FlowAdopter::kBurst);
  now += kSecond / 100;  // 10 ms: 20 more
  allowed = 0;
  for (uint32_t i = 0; i < 100; ++i) allowed += adopter.allows(now) ? 1u : 0u;
  EXPECT_EQ(allowed, FlowAdopter::kPerSecond / 100);
}

// On the appliance's clock (ns since 1970) the first call, and any after a
// long idle, find the whole burst: the refill never overflows.
TEST(FlowAdoption, TheAllowanceIsWholeOnARealClockAndAfterALongIdle) {
  dataplane::SegmentEmitter emitter;
  FlowAdopter adopter(emitter);
  time::Nanos now = 1'768'464'000ull * kSecond;
  for (int round = 0; round < 2; ++round) {
    uint32_t allowed = 0;
    for (uint32_t i = 0; i < FlowAdopter::kBurst + 10; ++i) allowed += adopter.allows(now) ? 1u : 0u;
    EXPECT_EQ(allowed, FlowAdopter::kBurst) << "round " << round;
    // About 107 days: elapsed x kPerSecond is 2^64 plus a little, which a
    // wrapping refill read as almost nothing.
    now += (~uint64_t{0} / FlowAdopter::kPerSecond) + 1;
  }
}

// A flow forgotten inside a request body (deadlines.body off, the idle
// timeout past) has its connection reset, so that no connection the
// appliance does not know is mid-body.
TEST(FlowAdoption, AFlowExpiringInsideABodyIsReset) {
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.timeouts.idle = 30 * kSecond;
  EngineWorld w(std::string(kWidePolicy) + "deadlines: { body: 0s, keep_alive: 0s }\n", config);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data("POST /up HTTP/1.1\r\nHost: api\r\nContent-Length: 100\r\n\r\n0123456789").forwarded());
  w.now += 31 * kSecond;
  const size_t before = w.sink.sent.size();
  w.sweep();
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_TRUE(sent_with(w, Side::kOrigin, flag::kRst, before));
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kRst, before));
}

}  // namespace
}  // namespace sluice::test
