// The SYN proxy on the flow engine: a client's SYN answered with a
// cookie and nothing kept; a valid cookie ACK opens the origin's connection
// with the client's options; the origin's numbers, clock and window scale
// translated for the rest of the flow; floods, forgeries, refusals, losses.
// Segments are written here with every option, and the origin picks numbers
// of its own (the harness's handshake makes them agree; these do not).
#include <gtest/gtest.h>

#include "dataplane/checksum.h"
#include "flow_harness.h"
#include "proxy_peers.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::FrameView;
using dataplane::SegmentSpec;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr std::string_view kGet = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";


TEST(SynProxy, ASynIsAnsweredWithACookieAndNothingIsKept) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  const auto sent = p.feed(Side::kClient, p.syn());
  EXPECT_EQ(sent.action, FrameAction::kDrop);
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_TRUE(sent_to(w, Side::kOrigin).empty());
  const auto back = sent_to(w, Side::kClient);
  ASSERT_EQ(back.size(), 1u);
  const FrameView& v = back[0].view;
  EXPECT_TRUE(v.has(flag::kSyn | flag::kAck));
  EXPECT_EQ(v.ack, p.client_isn + 1);
  EXPECT_EQ(v.window, 0) << "the client waits for the origin's connection";
  EXPECT_EQ(v.options.mss, 1460);
  EXPECT_TRUE(v.options.has_wscale);
  EXPECT_EQ(v.options.wscale, dataplane::SynProxy::kClientWscale);
  EXPECT_TRUE(v.options.sack_permitted);
  EXPECT_TRUE(v.options.has_timestamp);
  EXPECT_EQ(v.options.tsecr, p.client_clock);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(back[0].bytes.data(), back[0].view));
  EXPECT_EQ(w.counters.syn_cookies_sent.get(), 1u);
}

TEST(SynProxy, AValidCookieOpensTheOriginsConnectionWithTheClientsOptions) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_handshake();
  EXPECT_EQ(w.engine->flows().size(), 1u);
  EXPECT_TRUE(p.origin_syn.has(flag::kSyn));
  EXPECT_FALSE(p.origin_syn.has(flag::kAck));
  EXPECT_EQ(p.origin_syn.seq, p.client_isn) << "the client's own ISN: its numbers need no translation";
  EXPECT_EQ(p.origin_syn.options.mss, 1460);
  EXPECT_TRUE(p.origin_syn.options.has_wscale);
  EXPECT_EQ(p.origin_syn.options.wscale, 9);
  EXPECT_TRUE(p.origin_syn.options.sack_permitted);
  EXPECT_TRUE(p.origin_syn.options.has_timestamp);
  EXPECT_EQ(p.origin_syn.options.tsval, p.client_clock);
  EXPECT_EQ(w.counters.syn_cookies_validated.get(), 1u);
}

TEST(SynProxy, ForgedAcksTakeNothingAndReachNobody) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  static_cast<void>(p.feed(Side::kClient, p.syn()));
  const uint32_t cookie = sent_to(w, Side::kClient)[0].view.seq;
  // (An ACK and a client ISN moved on together by the same amount pass, as
  // in Linux: the sum is what the cookie holds. Only one who saw the
  // SYN-ACK knows it, and it can only open its own connection shifted.)
  for (const uint32_t ack : {cookie, cookie + 3, cookie ^ 0x100u, 12345u}) {
    SegmentSpec s;
    s.seq = p.client_isn + 1;
    s.ack = ack;
    s.flags = flag::kAck;
    EXPECT_EQ(p.feed(Side::kClient, s).action, FrameAction::kDrop);
  }
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_TRUE(sent_to(w, Side::kOrigin).empty());
  EXPECT_EQ(w.counters.syn_cookies_failed.get(), 4u);
}

TEST(SynProxy, AFloodOfSpoofedSynsTakesNoFlowAndNeverReachesTheOrigin) {
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.flows = 16;
  EngineWorld w(kWidePolicy, config);
  for (int i = 0; i < 2000; ++i) {
    Peers spoofed(w, static_cast<uint16_t>(1024 + i));
    spoofed.client = *net::parse_ip("198.18." + std::to_string(1 + i / 250) + "." + std::to_string(i % 250));
    ASSERT_EQ(spoofed.feed(Side::kClient, spoofed.syn()).action, FrameAction::kDrop);
  }
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_TRUE(sent_to(w, Side::kOrigin).empty());
  EXPECT_EQ(w.counters.syn_cookies_sent.get(), 2000u);
  // A real client, after the flood: in at once.
  Connection real(w, false, 50000);
  real.handshake();
  EXPECT_TRUE(real.data(kGet).forwarded());
}

// The origin's ISN, clock and window scale are its own: the client sees the
// cookie's numbers, its own clock's echo and windows in the scale it was
// promised, and the origin sees its own.
TEST(SynProxy, TheOriginsNumbersClockAndWindowAreTranslatedBothWays) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_handshake();
  const auto answered = p.origin_answer();
  EXPECT_EQ(answered.action, FrameAction::kDrop);
  const auto to_origin = sent_to(w, Side::kOrigin, answered.before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_EQ(to_origin[0].view.flags, flag::kAck);
  EXPECT_EQ(to_origin[0].view.seq, p.client_isn + 1);
  EXPECT_EQ(to_origin[0].view.ack, p.origin_isn + 1);
  EXPECT_EQ(to_origin[0].view.options.tsecr, p.origin_clock);
  const auto to_client = sent_to(w, Side::kClient, answered.before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0].view.seq, p.cookie + 1);
  EXPECT_EQ(to_client[0].view.ack, p.client_isn + 1);
  EXPECT_EQ(to_client[0].view.window, 65160 >> 7) << "the origin's SYN window, in the client's scale";
  EXPECT_EQ(to_client[0].view.options.tsval, p.synack.options.tsval) << "the client's clock of the origin starts where the cookie's did";
  p.seen_tsval = to_client[0].view.options.tsval;

  const auto request = p.client_data(kGet);
  ASSERT_EQ(request.action, FrameAction::kForward);
  p.client_sent += static_cast<uint32_t>(kGet.size());
  EXPECT_EQ(request.view.seq, p.client_isn + 1);
  EXPECT_EQ(request.view.ack, p.origin_isn + 1) << "the cookie's numbers back in the origin's";
  EXPECT_EQ(request.view.options.tsecr, p.origin_clock) << "the echo in the origin's clock";
  EXPECT_EQ(request.view.window, 502) << "both scale the client's window by 9";
  EXPECT_TRUE(dataplane::tcp_checksum_ok(p.last_frame.data(), request.view));

  const auto response = p.origin_data(kOk);
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, p.cookie + 1);
  EXPECT_EQ(response.view.options.tsval, p.synack.options.tsval + 1);
  EXPECT_EQ(response.view.window, 1000 >> 2) << "scaled by 5 at the origin, by 7 at the client";
  EXPECT_TRUE(dataplane::tcp_checksum_ok(p.last_frame.data(), response.view));
  EXPECT_EQ(w.counters.admitted.get(), 1u);
}

// A response the appliance writes again (its fields inserted, the frame
// with no room to grow) is translated as a forwarded one is.
TEST(SynProxy, ASegmentWrittenAgainCarriesTheClientsNumbersClockAndWindow) {
  EngineWorld w(kWidePolicy, EngineWorld::with_fields());
  Peers p(w);
  p.client_handshake();
  static_cast<void>(p.origin_answer());
  ASSERT_EQ(p.client_data(kGet).action, FrameAction::kForward);
  p.client_sent += static_cast<uint32_t>(kGet.size());
  const auto response = p.origin_data(kOk);
  ASSERT_EQ(response.action, FrameAction::kDrop);
  const auto to_client = sent_to(w, Side::kClient, response.before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_NE(to_client[0].payload().find("RateLimit-Limit"), std::string::npos);
  EXPECT_EQ(to_client[0].view.seq, p.cookie + 1);
  EXPECT_EQ(to_client[0].view.options.tsval, p.synack.options.tsval + 1);
  EXPECT_EQ(to_client[0].view.window, 1000 >> 2);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(to_client[0].bytes.data(), to_client[0].view));
}

// The origin happens to pick the cookie for its ISN: no sequence numbers to
// translate, but its clock and window scale are still its own.
TEST(SynProxy, AnOriginWhoseIsnIsTheCookieStillHasItsClockTranslated) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_handshake();
  p.origin_isn = p.cookie;
  static_cast<void>(p.origin_answer());
  ASSERT_EQ(p.client_data(kGet).action, FrameAction::kForward);
  p.client_sent += static_cast<uint32_t>(kGet.size());
  const auto response = p.origin_data(kOk);
  ASSERT_EQ(response.action, FrameAction::kForward);
  EXPECT_EQ(response.view.seq, p.cookie + 1);
  EXPECT_EQ(response.view.options.tsval, p.synack.options.tsval + 1);
  EXPECT_EQ(response.view.window, 1000 >> 2);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(p.last_frame.data(), response.view));
}

TEST(SynProxy, AnOriginThatDoesNotScaleGetsTheClientsWindowUnscaled) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.origin_wscale = -1;
  p.client_handshake();
  static_cast<void>(p.origin_answer());
  const auto request = p.client_data(kGet);
  ASSERT_EQ(request.action, FrameAction::kForward);
  EXPECT_EQ(request.view.window, 0xffff) << "502 << 9, at most 65535";
  p.client_sent += static_cast<uint32_t>(kGet.size());
  const auto response = p.origin_data(kOk);
  EXPECT_EQ(response.view.window, 1000 >> 7);
}

TEST(SynProxy, WithoutClientTimestampsNeitherSideScalesNorSacks) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_ts = false;
  p.client_handshake();
  EXPECT_FALSE(p.synack.options.has_timestamp);
  EXPECT_FALSE(p.synack.options.has_wscale);
  EXPECT_FALSE(p.synack.options.sack_permitted);
  EXPECT_FALSE(p.origin_syn.options.has_timestamp);
  EXPECT_FALSE(p.origin_syn.options.has_wscale);
  EXPECT_FALSE(p.origin_syn.options.sack_permitted);
  static_cast<void>(p.origin_answer());
  const auto request = p.client_data(kGet);
  ASSERT_EQ(request.action, FrameAction::kForward);
  EXPECT_EQ(request.view.ack, p.origin_isn + 1);
}

TEST(SynProxy, ARefusalOnAProxiedFlowIsAnsweredInTheCookiesNumbers) {
  constexpr std::string_view kOne = R"(sluice: 1
name: one
service_ports: [80]
after_answer: close
buckets:
  one: { rate: 1/hour, burst: 1 }
rules:
  - name: one
    key: client_ip
    bucket: one
)";
  EngineWorld w(kOne);
  Peers p(w);
  p.client_handshake();
  static_cast<void>(p.origin_answer());
  ASSERT_TRUE(p.client_data(kGet).action == FrameAction::kForward);
  p.client_sent += static_cast<uint32_t>(kGet.size());
  ASSERT_EQ(p.origin_data(kOk).action, FrameAction::kForward);
  const auto refused = p.client_data(kGet, p.client_sent);
  EXPECT_EQ(refused.action, FrameAction::kDrop);
  const auto to_client = sent_to(w, Side::kClient, refused.before);
  ASSERT_FALSE(to_client.empty());
  EXPECT_TRUE(to_client[0].payload().starts_with("HTTP/1.1 429 "));
  EXPECT_EQ(to_client[0].view.seq, p.cookie + 1 + static_cast<uint32_t>(kOk.size()));
  EXPECT_TRUE(dataplane::tcp_checksum_ok(to_client[0].bytes.data(), to_client[0].view));
  const auto to_origin = sent_to(w, Side::kOrigin, refused.before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, p.client_isn + 1 + p.client_sent);
  EXPECT_EQ(to_origin[0].view.ack, p.origin_isn + 1 + static_cast<uint32_t>(kOk.size())) << "in the origin's numbers";
}

TEST(SynProxy, AnOriginThatRefusesResetsTheClient) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_handshake();
  SegmentSpec rst;
  rst.seq = 0;
  rst.ack = p.client_isn + 1;
  rst.flags = flag::kRst | flag::kAck;
  const auto refused = p.feed(Side::kOrigin, rst);
  EXPECT_EQ(refused.action, FrameAction::kDrop);
  const auto to_client = sent_to(w, Side::kClient, refused.before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_TRUE(to_client[0].view.has(flag::kRst));
  EXPECT_EQ(to_client[0].view.seq, p.cookie + 1);
  EXPECT_EQ(w.counters.syn_proxy_refused.get(), 1u);
}

TEST(SynProxy, AnOriginThatNeverAnswersResetsTheClientAfterFiveSeconds) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_handshake();
  w.now += 4 * time::kNanosPerSecond;
  size_t before = w.sink.sent.size();
  w.sweep();
  EXPECT_EQ(w.sink.sent.size(), before);
  w.now += 2 * time::kNanosPerSecond;
  before = w.sink.sent.size();
  w.sweep();
  const auto to_client = sent_to(w, Side::kClient, before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_TRUE(to_client[0].view.has(flag::kRst));
  EXPECT_EQ(to_client[0].view.seq, p.cookie + 1);
  EXPECT_EQ(w.counters.syn_proxy_refused.get(), 1u);
}

TEST(SynProxy, AnOriginWithoutTimestampsIsNotPromisedThemAgain) {
  EngineWorld w(kWidePolicy);
  Peers first(w, 40001);
  first.origin_ts = false;
  first.client_handshake();
  const auto answered = first.origin_answer();
  EXPECT_EQ(w.counters.syn_proxy_mismatch.get(), 1u);
  const auto to_client = sent_to(w, Side::kClient, answered.before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_TRUE(to_client[0].view.has(flag::kRst));
  EXPECT_TRUE(sent_with(w, Side::kOrigin, flag::kRst, answered.before));
  // The next client is promised no timestamps, and its connection works.
  Peers second(w, 40002);
  second.origin_ts = false;
  second.client_handshake();
  EXPECT_FALSE(second.synack.options.has_timestamp);
  static_cast<void>(second.origin_answer());
  EXPECT_EQ(second.client_data(kGet).action, FrameAction::kForward);
}

// The client's ACK was lost: it believes itself connected, its window
// shut, and probes with a segment one below its next byte. That opens the
// origin's connection as the ACK would have.
TEST(SynProxy, AZeroWindowProbeCompletesAHandshakeWhoseAckWasLost) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  static_cast<void>(p.feed(Side::kClient, p.syn()));
  const FrameView synack = sent_to(w, Side::kClient)[0].view;
  SegmentSpec probe;
  probe.seq = p.client_isn;
  probe.ack = synack.seq + 1;
  probe.flags = flag::kAck;
  probe.timestamp = true;
  probe.tsval = p.client_clock + 300;
  probe.tsecr = synack.options.tsval;
  const auto sent = p.feed(Side::kClient, probe);
  EXPECT_EQ(sent.action, FrameAction::kDrop);
  EXPECT_EQ(w.engine->flows().size(), 1u);
  const auto to_origin = sent_to(w, Side::kOrigin, sent.before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kSyn));
  EXPECT_EQ(to_origin[0].view.seq, p.client_isn);
  EXPECT_EQ(to_origin[0].view.options.wscale, 9) << "the options the cookie kept";
}

TEST(SynProxy, LostHandshakeSegmentsAreSentAgainWhenAnEndAsks) {
  EngineWorld w(kWidePolicy);
  Peers p(w);
  p.client_handshake();
  // The SYN to the origin was lost; the client probes its shut window.
  SegmentSpec probe;
  probe.seq = p.client_isn;
  probe.ack = p.cookie + 1;
  probe.flags = flag::kAck;
  probe.timestamp = true;
  probe.tsecr = p.synack.options.tsval;
  EXPECT_EQ(p.feed(Side::kClient, probe).action, FrameAction::kDrop);
  EXPECT_EQ(sent_to(w, Side::kOrigin).size(), 1u) << "within 200 ms of the first: not again";
  w.now += 300'000'000;
  const auto later = p.feed(Side::kClient, probe);
  const auto again = sent_to(w, Side::kOrigin, later.before);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].view.has(flag::kSyn));
  // The ACK of the origin's SYN-ACK was lost: its SYN-ACK again is acknowledged again.
  static_cast<void>(p.origin_answer());
  const auto repeat = p.origin_answer();
  const auto acked = sent_to(w, Side::kOrigin, repeat.before);
  ASSERT_EQ(acked.size(), 1u);
  EXPECT_EQ(acked[0].view.flags, flag::kAck);
  EXPECT_EQ(acked[0].view.ack, p.origin_isn + 1);
}

}  // namespace
}  // namespace sluice::test
