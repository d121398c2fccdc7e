// Fair shares of a worker's flows and parse contexts: a client
// address (an IPv6 /64) holds at most its share, and when the pools run out
// the holder slow the longest makes room, never one making progress.
#include <gtest/gtest.h>

#include <string>

#include "dataplane/client_shares.h"
#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::ClientShares;
using dataplane::FrameAction;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr time::Nanos kSecond = time::kNanosPerSecond;
constexpr std::string_view kGet = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";


net::IpAddress ip(std::string_view s) { return *net::parse_ip(s); }

std::string v4(int i) { return "198.18.1." + std::to_string(i); }

TEST(ClientShares, EachAddressHoldsAtMostItsShareOfFlows) {
  ClientShares shares(64, {.flows = 3, .contexts = 2}, 7);
  int32_t s = ClientShares::kNoShare;
  for (int i = 0; i < 3; ++i) {
    s = shares.open_flow(ip("198.18.0.1"));
    ASSERT_NE(s, ClientShares::kNoShare);
  }
  EXPECT_EQ(shares.open_flow(ip("198.18.0.1")), ClientShares::kNoShare);
  EXPECT_NE(shares.open_flow(ip("198.18.0.2")), ClientShares::kNoShare) << "another address has its own";
  EXPECT_EQ(shares.flows_of(s), 3u);
  shares.close_flow(s);
  EXPECT_EQ(shares.open_flow(ip("198.18.0.1")), s) << "a flow closed makes room";
}

TEST(ClientShares, AnIpv6ClientIsItsSlash64) {
  ClientShares shares(64, {.flows = 2, .contexts = 2}, 7);
  ASSERT_NE(shares.open_flow(ip("2001:db8:1:2::1")), ClientShares::kNoShare);
  ASSERT_NE(shares.open_flow(ip("2001:db8:1:2:ffff::9")), ClientShares::kNoShare);
  EXPECT_EQ(shares.open_flow(ip("2001:db8:1:2:abcd::1")), ClientShares::kNoShare) << "the same /64";
  EXPECT_NE(shares.open_flow(ip("2001:db8:1:3::1")), ClientShares::kNoShare) << "the next /64";
}

TEST(ClientShares, ContextsAreCappedAndSharesGoWithTheirLastFlow) {
  ClientShares shares(4, {.flows = 8, .contexts = 2}, 7);
  const int32_t s = shares.open_flow(ip("198.18.0.1"));
  EXPECT_TRUE(shares.take_context(s));
  EXPECT_TRUE(shares.take_context(s));
  EXPECT_FALSE(shares.take_context(s));
  shares.return_context(s);
  EXPECT_TRUE(shares.take_context(s));
  shares.return_context(s);
  shares.return_context(s);
  shares.close_flow(s);
  EXPECT_EQ(shares.clients(), 0u);
  // Many clients come and go: the table (one client per flow) never fills.
  for (int round = 0; round < 100; ++round) {
    int32_t held[4];
    for (int i = 0; i < 4; ++i) {
      held[i] = shares.open_flow(ip(v4(round * 4 + i)));
      ASSERT_NE(held[i], ClientShares::kNoShare) << round << " " << i;
    }
    for (const int32_t h : held) shares.close_flow(h);
  }
  EXPECT_EQ(shares.clients(), 0u);
}

TEST(ClientShares, DefaultsFitACrowdBehindOneAddress) {
  const dataplane::ShareCaps c = dataplane::default_share_caps(65536, 2048);
  EXPECT_EQ(c.flows, 4096u);
  EXPECT_EQ(c.contexts, 128u);
}

dataplane::EngineConfig shared_config(uint32_t flows_per_client, uint32_t contexts_per_client) {
  dataplane::EngineConfig c = EngineWorld::small_config();
  c.flows_per_client = flows_per_client;
  c.contexts_per_client = contexts_per_client;
  return c;
}

TEST(FairShare, AClientPastItsShareOfFlowsIsRefusedAndOthersAreNot) {
  for (const bool proxy : {false, true}) {
    EngineWorld w(kWidePolicy, shared_config(4, 8));
    w.snapshot->policy.syn_proxy = proxy;
    std::vector<std::unique_ptr<Connection>> held;
    for (uint16_t p = 0; p < 4; ++p) {
      held.push_back(std::make_unique<Connection>(w, false, static_cast<uint16_t>(41000 + p)));
      held.back()->handshake();
    }
    // The fifth's SYN (bridged) or its cookie ACK (proxied) takes no flow.
    Connection fifth(w, false, 41004);
    if (proxy) {
      EXPECT_EQ(fifth.client(flag::kSyn, "", fifth.client_seq_ - 1).action, FrameAction::kDrop);
      const uint32_t cookie =
          w.cookies.offer({*net::parse_ip("198.18.0.10"), *net::parse_ip("198.18.0.20"), 41004, 80},
                          fifth.client_seq_ - 1, dataplane::TcpOptions{.has_timestamp = true}, 7, w.now).isn;
      EXPECT_EQ(fifth.client(flag::kAck, "", {}, cookie + 1).action, FrameAction::kDrop);
      EXPECT_EQ(w.counters.syn_cookies_validated.get(), 5u);
    } else {
      EXPECT_EQ(fifth.client(flag::kSyn, "", 7).action, FrameAction::kDrop);
    }
    EXPECT_EQ(w.counters.share_flows_refused.get(), 1u);
    EXPECT_EQ(w.engine->flows().size(), 4u);
    Connection other(w, false, 41005);
    other.set_client_address("198.18.0.11");
    other.handshake();
    EXPECT_TRUE(other.data(kGet).forwarded());
  }
}

TEST(FairShare, AClientPastItsShareOfContextsWaitsAndOthersAreServed) {
  EngineWorld w(kWidePolicy, shared_config(64, 2));
  std::vector<std::unique_ptr<Connection>> slow;
  for (uint16_t p = 0; p < 3; ++p) {
    slow.push_back(std::make_unique<Connection>(w, false, static_cast<uint16_t>(41000 + p)));
    slow.back()->handshake();
  }
  EXPECT_EQ(slow[0]->data("GET /a").action, FrameAction::kDrop);  // held: a context each
  EXPECT_EQ(slow[1]->data("GET /b").action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.share_contexts_refused.get(), 0u);
  EXPECT_EQ(slow[2]->data("GET /c").action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.share_contexts_refused.get(), 1u) << "the third waits for its client's share";
  Connection other(w, false, 41010);
  other.set_client_address("198.18.0.11");
  other.handshake();
  EXPECT_TRUE(other.data(kGet).forwarded());
}

// A crowd of slow heads from many addresses fills the pool; a newcomer's
// request takes the context of the head slow the longest, which is answered
// 408. A pool filled by heads that arrived within the last second is not
// touched: the newcomer waits.
TEST(FairShare, ANewcomerTakesTheContextOfTheSlowestHead) {
  EngineWorld w(kWidePolicy, shared_config(64, 8));  // a pool of 8
  std::vector<std::unique_ptr<Connection>> crowd;
  for (int i = 0; i < 8; ++i) {
    crowd.push_back(std::make_unique<Connection>(w, false, static_cast<uint16_t>(42000 + i)));
    crowd.back()->set_client_address(v4(i + 1));
    crowd.back()->handshake();
    ASSERT_EQ(crowd.back()->data("GET /slow").action, FrameAction::kDrop);
    w.now += kSecond / 10;
  }
  Connection early(w, false, 43000);
  early.set_client_address("198.18.2.1");
  early.handshake();
  EXPECT_EQ(early.data(kGet).action, FrameAction::kDrop) << "every head arrived within the last second";
  EXPECT_EQ(w.counters.contexts_exhausted.get(), 1u);

  w.now += 2 * kSecond;
  ASSERT_TRUE(crowd[3]->data("/more").action == FrameAction::kDrop);  // bytes, but a head's age is from its first
  Connection late(w, false, 43001);
  late.set_client_address("198.18.2.2");
  late.handshake();
  const Fed f = late.data(kGet);
  EXPECT_TRUE(f.forwarded());
  EXPECT_EQ(w.counters.evicted_slow_head.get(), 1u);
  // The victim is the oldest head looked at, answered 408 and closed.
  bool answered_408 = false;
  for (const SentSegment& s : sent_to(w, Side::kClient, f.sent_before)) {
    if (s.payload().starts_with("HTTP/1.1 408 ")) answered_408 = true;
  }
  EXPECT_TRUE(answered_408);
}

TEST(FairShare, AWaitingClientIsNeverEvicted) {
  EngineWorld w(kWidePolicy, shared_config(64, 8));
  std::vector<std::unique_ptr<Connection>> waiting;
  for (int i = 0; i < 8; ++i) {
    waiting.push_back(std::make_unique<Connection>(w, false, static_cast<uint16_t>(42000 + i)));
    waiting.back()->set_client_address(v4(i + 1));
    waiting.back()->handshake();
    ASSERT_TRUE(waiting.back()->data(kGet).forwarded());  // its response is outstanding
  }
  w.now += 60 * kSecond;
  Connection late(w, false, 43001);
  late.set_client_address("198.18.2.2");
  late.handshake();
  EXPECT_EQ(late.data(kGet).action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.evicted_slow_head.get() + w.counters.evicted_stalled_body.get() +
                w.counters.evicted_idle_context.get(),
            0u);
}

// A spoofed SYN flood fills the flow table with handshakes that never end;
// a second on, a real client's SYN takes the place of one of them.
TEST(FairShare, ASynFloodsHalfOpenFlowsMakeRoomForARealClient) {
  dataplane::EngineConfig config = shared_config(64, 8);
  config.flows = 16;  // 14 usable
  EngineWorld w(kWidePolicy, config);
  w.snapshot->policy.syn_proxy = false;  // with it, SYNs take no flow (syn_proxy_test.cpp)
  for (int i = 0; i < 14; ++i) {
    Connection spoofed(w, false, static_cast<uint16_t>(44000 + i));
    spoofed.set_client_address(v4(i + 1));
    ASSERT_TRUE(spoofed.client(flag::kSyn, "", 7).forwarded());
  }
  Connection early(w, false, 45000);
  early.set_client_address("198.18.2.1");
  EXPECT_EQ(early.client(flag::kSyn, "", 7).action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.flow_table_full.get(), 1u);
  w.now += 2 * kSecond;
  Connection real(w, false, 45001);
  real.set_client_address("198.18.2.2");
  real.handshake();
  EXPECT_TRUE(real.data(kGet).forwarded());
  EXPECT_EQ(w.counters.evicted_half_open.get(), 1u);
  EXPECT_EQ(w.engine->flows().size(), 14u);
}

TEST(FairShare, AFlowAlreadyOverGoesFirst) {
  dataplane::EngineConfig config = shared_config(64, 8);
  config.flows = 16;
  EngineWorld w(kWidePolicy, config);
  w.snapshot->policy.syn_proxy = false;
  Connection done(w, false, 44999);
  done.set_client_address(v4(100));
  done.handshake();
  ASSERT_TRUE(done.client(flag::kRst, "").forwarded());
  for (int i = 0; i < 13; ++i) {
    Connection spoofed(w, false, static_cast<uint16_t>(44000 + i));
    spoofed.set_client_address(v4(i + 1));
    ASSERT_TRUE(spoofed.client(flag::kSyn, "", 7).forwarded());
  }
  Connection real(w, false, 45001);
  real.set_client_address("198.18.2.2");
  EXPECT_TRUE(real.client(flag::kSyn, "", 7).forwarded()) << "no second to wait: the reset flow is over";
  EXPECT_EQ(w.counters.evicted_over.get(), 1u);
}

// A table full of connections with nothing in flight: a second on, a new
// client's flow takes the place of the one idle the longest, whose client
// gets a FIN and whose origin a RST; one that moved within the second is
// left alone.
TEST(FairShare, AnIdleConnectionMakesRoomAndABusyOneDoesNot) {
  for (const bool proxy : {false, true}) {
    dataplane::EngineConfig config = shared_config(64, 8);
    config.flows = 16;  // 14 usable
    EngineWorld w(kWidePolicy, config);
    w.snapshot->policy.syn_proxy = proxy;
    std::vector<std::unique_ptr<Connection>> idle;
    for (int i = 0; i < 14; ++i) {
      idle.push_back(std::make_unique<Connection>(w, false, static_cast<uint16_t>(44000 + i)));
      idle.back()->set_client_address(v4(i + 1));
      idle.back()->handshake();
      ASSERT_TRUE(idle.back()->data(kGet).forwarded());
      ASSERT_TRUE(idle.back()->respond("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").forwarded());
      w.now += kSecond / 20;
    }
    // The opening segment that would take a flow: the SYN, or the cookie's ACK.
    Connection early(w, false, 45000);
    early.set_client_address("198.18.2.1");
    static_cast<void>(early.client(flag::kSyn, "", early.client_seq_ - 1));
    if (proxy) {
      const uint32_t cookie =
          w.cookies.offer({*net::parse_ip("198.18.2.1"), *net::parse_ip("198.18.0.20"), 45000, 80},
                          early.client_seq_ - 1, dataplane::TcpOptions{.has_timestamp = true}, 7, w.now).isn;
      static_cast<void>(early.client(flag::kAck, "", {}, cookie + 1));
    }
    EXPECT_EQ(w.counters.flow_table_full.get(), 1u) << "every idle connection moved within the second";
    EXPECT_EQ(w.counters.evicted_idle_flow.get(), 0u);
    w.now += 2 * kSecond;
    ASSERT_TRUE(idle[0]->data(kGet).forwarded());  // the oldest moves again: no longer the one to go
    const size_t before = w.sink.sent.size();
    Connection late(w, false, 45001);
    late.set_client_address("198.18.2.2");
    late.handshake();
    EXPECT_TRUE(late.data(kGet).forwarded()) << (proxy ? "proxied" : "bridged");
    EXPECT_EQ(w.counters.evicted_idle_flow.get(), 1u);
    EXPECT_TRUE(sent_with(w, Side::kClient, dataplane::tcp_flag::kFin, before));
    EXPECT_TRUE(sent_with(w, Side::kOrigin, dataplane::tcp_flag::kRst, before));
    // Not the connection that just moved.
    EXPECT_TRUE(idle[0]->respond("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").forwarded());
  }
}

// A full context pool held by stalled bodies: a newcomer's request takes the
// context of the body stalled the longest, and both its ends are reset.
TEST(FairShare, AStalledBodyMakesRoomForANewcomer) {
  EngineWorld w(kWidePolicy, shared_config(64, 8));  // a pool of 8
  std::vector<std::unique_ptr<Connection>> uploads;
  for (int i = 0; i < 8; ++i) {
    uploads.push_back(std::make_unique<Connection>(w, false, static_cast<uint16_t>(42000 + i)));
    uploads.back()->set_client_address(v4(i + 1));
    uploads.back()->handshake();
    ASSERT_TRUE(uploads.back()->data("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nab").forwarded());
  }
  w.now += 2 * kSecond;
  Connection late(w, false, 43001);
  late.set_client_address("198.18.2.2");
  late.handshake();
  const Fed f = late.data(kGet);
  EXPECT_TRUE(f.forwarded());
  EXPECT_EQ(w.counters.evicted_stalled_body.get(), 1u);
  size_t resets = 0;
  for (const SentSegment& s : w.sink.sent) resets += s.view.has(flag::kRst) ? 1 : 0;
  EXPECT_EQ(resets, 2u) << "the evicted upload's client and origin";
}

}  // namespace
}  // namespace sluice::test
