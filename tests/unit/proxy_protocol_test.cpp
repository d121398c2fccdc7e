// The PROXY protocol on the wire side (client_ip proxy_protocol): a trusted
// balancer's header names the client whose budget its requests use, and is
// taken out of the stream to the origin (strip) or passed on (keep); a
// header from anyone else, none from a balancer, or a malformed one resets
// both ends; a header cut short waits for the rest, unacknowledged.
#include <gtest/gtest.h>

#include <string>

#include "flow_harness.h"
#include "proxy_peers.h"

namespace sluice::test {
namespace {

namespace flag = dataplane::tcp_flag;
using dataplane::Side;

// One request an hour per client; 198.18.0.10 (the harness's client) is
// the balancer.
std::string policy(const char* mode) {
  return std::string("sluice: 1\nname: pp\nservice_ports: [80]\nclient_ip:\n  trusted_proxies: [198.18.0.10/32]\n"
                     "  proxy_protocol: ") +
         mode +
         "\nbuckets:\n  hourly: { rate: 1/hour, burst: 1 }\nrules:\n  - name: per-client\n    key: client_ip\n"
         "    bucket: hourly\n";
}

constexpr std::string_view kGet = "GET /a HTTP/1.1\r\nHost: o\r\n\r\n";

std::string v1(const std::string& client) { return "PROXY TCP4 " + client + " 198.18.0.20 51000 80\r\n"; }

// Whether the engine reset the connection towards both ends since `from`.
bool reset_both(const EngineWorld& w, size_t from) {
  bool client = false, origin = false;
  for (const SentSegment& s : sent_to(w, Side::kClient, from)) client = client || s.view.has(flag::kRst);
  for (const SentSegment& s : sent_to(w, Side::kOrigin, from)) origin = origin || s.view.has(flag::kRst);
  return client && origin;
}

TEST(ProxyProtocol, TheRelayedClientIsKeyedAndTheHeaderStripped) {
  EngineWorld w(policy("strip"));
  Connection a(w, false, 40001), b(w, false, 40002), c(w, false, 40003);
  for (Connection* k : {&a, &b, &c}) k->handshake();
  const Fed first = a.data(v1("203.0.113.7") + std::string(kGet));
  ASSERT_TRUE(first.forwarded());
  EXPECT_EQ(first.payload(), kGet) << "the origin gets the request, not the header";
  EXPECT_EQ(first.view.seq, a.client_seq_ - kGet.size() - v1("203.0.113.7").size()) << "numbered from its ISN";
  EXPECT_EQ(w.counters.proxy_headers.get(), 1u);
  // Another client behind the same balancer has a budget of its own.
  EXPECT_EQ(b.data(v1("203.0.113.8") + std::string(kGet)).payload(), kGet);
  EXPECT_EQ(w.counters.admitted.get(), 2u);
  // The first one again, on a connection of its own: its hour is spent.
  EXPECT_TRUE(c.data(v1("203.0.113.7") + std::string(kGet)).payload_withheld());
  EXPECT_EQ(w.counters.refused.get(), 1u);
  // The origin's acknowledgement of the request covers the header too.
  const Fed ack = a.origin(flag::kAck, "", {}, a.client_seq_ - static_cast<uint32_t>(v1("203.0.113.7").size()));
  EXPECT_EQ(ack.view.ack, a.client_seq_);
}

TEST(ProxyProtocol, AHeaderAloneIsAcknowledgedAndTheRequestFollows) {
  EngineWorld w(policy("strip"));
  Connection a(w, false, 40001);
  a.handshake();
  const std::string header = v1("203.0.113.7");
  const Fed alone = a.data(header);
  EXPECT_TRUE(alone.payload_withheld());
  const std::vector<SentSegment> acks = sent_to(w, Side::kClient, alone.sent_before);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.ack, a.client_seq_) << "the header acknowledged in the origin's name";
  const Fed req = a.data(kGet);
  ASSERT_TRUE(req.forwarded());
  EXPECT_EQ(req.payload(), kGet);
  EXPECT_EQ(req.view.seq, a.client_seq_ - kGet.size() - header.size()) << "the origin's stream begins with it";
}

TEST(ProxyProtocol, KeepPassesTheHeaderOn) {
  EngineWorld w(policy("keep"));
  Connection a(w, false, 40001);
  a.handshake();
  const std::string both = v1("203.0.113.7") + std::string(kGet);
  const Fed f = a.data(both);
  EXPECT_EQ(f.payload(), both);
  EXPECT_EQ(w.counters.proxy_headers.get(), 1u);
}

TEST(ProxyProtocol, AHeaderFromAnUntrustedPeerResetsBothEnds) {
  EngineWorld w(policy("strip"));
  Connection a(w, false, 40001);
  a.set_client_address("198.18.0.11");
  a.handshake();
  const Fed f = a.data(v1("203.0.113.7") + std::string(kGet));
  EXPECT_TRUE(f.payload_withheld());
  EXPECT_TRUE(reset_both(w, f.sent_before));
  EXPECT_EQ(w.counters.proxy_untrusted.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 0u) << "nothing judged";
  // Without a header, the same peer is a client of its own.
  Connection b(w, false, 40002);
  b.set_client_address("198.18.0.11");
  b.handshake();
  EXPECT_EQ(b.data(kGet).payload(), kGet);
}

TEST(ProxyProtocol, ABalancerWithoutAHeaderOrWithABadOneIsReset) {
  EngineWorld w(policy("strip"));
  Connection a(w, false, 40001), b(w, false, 40002);
  a.handshake();
  b.handshake();
  const Fed none = a.data(kGet);
  EXPECT_TRUE(none.payload_withheld());
  EXPECT_TRUE(reset_both(w, none.sent_before));
  EXPECT_EQ(w.counters.proxy_missing.get(), 1u);
  const Fed bad = b.data("PROXY TCP4 203.0.113.7  198.18.0.20 51000 80\r\n" + std::string(kGet));
  EXPECT_TRUE(bad.payload_withheld());
  EXPECT_TRUE(reset_both(w, bad.sent_before));
  EXPECT_EQ(w.counters.proxy_malformed.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 0u);
}

TEST(ProxyProtocol, AHeaderCutShortWaitsForTheRest) {
  EngineWorld w(policy("strip"));
  Connection a(w, false, 40001);
  a.handshake();
  const std::string both = v1("203.0.113.7") + std::string(kGet);
  const uint32_t start = a.client_seq_;
  const Fed part = a.client(flag::kAck | flag::kPsh, both.substr(0, 20), start);
  EXPECT_EQ(part.action, dataplane::FrameAction::kDrop);
  EXPECT_EQ(sent_to(w, Side::kClient, part.sent_before).size(), 0u) << "unacknowledged";
  const Fed whole = a.client(flag::kAck | flag::kPsh, both, start);
  EXPECT_EQ(whole.payload(), kGet);
  EXPECT_EQ(w.counters.admitted.get(), 1u);
}

// Behind the SYN proxy with delayed binding, the header arrives before the
// origin has a connection: the origin's connection, once opened, gets the
// request alone, numbered from the client's ISN, and the response comes back
// in the cookie's numbers with the header's bytes acknowledged.
TEST(ProxyProtocol, WorksBehindTheSynProxyWithDelayedBinding) {
  EngineWorld w(policy("strip") + "syn_proxy: on\nbinding: delayed\n");
  Peers p(w);
  p.client_handshake(true);
  const std::string header = v1("203.0.113.7");
  const auto sent = p.client_data(header + std::string(kGet));
  origin_binds(w, p, sent.before, kGet, header.size() + kGet.size());
  EXPECT_EQ(w.counters.proxy_headers.get(), 1u);
  EXPECT_EQ(w.counters.admitted.get(), 1u);
}

// A PROXY header anywhere but at the stream's start is only bytes of HTTP:
// a request line the parser refuses, never a header the origin reads.
TEST(ProxyProtocol, ALaterHeaderIsNoHeader) {
  EngineWorld w(policy("keep"));
  Connection a(w, false, 40001);
  a.handshake();
  ASSERT_EQ(a.data(v1("203.0.113.7") + std::string(kGet)).payload(), v1("203.0.113.7") + std::string(kGet));
  ASSERT_TRUE(a.respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").forwarded());
  const Fed smuggled = a.data(v1("203.0.113.99") + std::string(kGet));
  EXPECT_TRUE(smuggled.payload_withheld());
  EXPECT_EQ(w.counters.parse_errors.get(), 1u);
  EXPECT_EQ(w.counters.proxy_headers.get(), 1u);
}

}  // namespace
}  // namespace sluice::test
