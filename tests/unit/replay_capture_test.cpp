// sluice-replay's capture input (replay/capture_input.h): captures written
// by tests/support/pcap_writer.h, read back with the deployment-quota policy's
// fields, stream limits and usage field (DQ05), and the records checked byte
// for byte: formats and link types, reassembly (splits, reordering,
// retransmission, pipelining, bodies, adoption, switches), usage, and every
// kind of damage.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "limiter_harness.h"
#include "pcap_writer.h"
#include "replay/capture_flows.h"
#include "replay/capture_input.h"
#include "scratch_dir.h"

namespace sluice::test {
namespace {

using replay::InputResult;
using replay::RequestRecord;

const std::string kGet = "GET /v1/models HTTP/1.1\r\nHost: router\r\nAuthorization: Bearer sk-a\r\n\r\n";
const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: router\r\n\r\n"; }

// The policy's parts a capture is read with, loaded and compiled once.
const http::Http1Policy& quotas() {
  static const std::unique_ptr<http::Http1Policy> compiled = [] {
    auto loaded = policy::load_policy_file(config_path("deployment-quotas.yaml"));
    EXPECT_TRUE(loaded.policy);
    std::vector<policy::PolicyError> errors;
    auto c = http::compile_http1_policy(*loaded.policy, test_hasher(2), errors);
    EXPECT_TRUE(c);
    return std::make_unique<http::Http1Policy>(std::move(*c));
  }();
  return *compiled;
}

class Capture : public ::testing::Test {
 protected:
  Capture() {
    const http::Http1Policy& p = quotas();
    for (const uint16_t port : p.source.service_ports) options.service_ports.set(port);
    options.fields = &p.fields;
    options.stream = p.stream;
    options.usage_field = p.usage_field;
  }

  // Adds `s` on `link` at the clock, which then moves on `step` ns.
  uint64_t add(const TcpSegment& s, Link link = Link::kEthernet, uint64_t step = 1'000'000) {
    packets.push_back({clock, frame_of(s, link)});
    clock += step;
    return packets.back().at;
  }
  // A handshake and one request with its response: packets 1-5, the request 4.
  void exchange(Conversation& c, Link link = Link::kEthernet, const std::string& request = kGet) {
    add(c.syn(), link), add(c.syn_ack(), link), add(c.ack(), link), add(c.client(request), link), add(c.origin(kOk), link);
  }
  InputResult read(const std::string& bytes, uint32_t input = 0) {
    write_file(path, bytes);
    return replay::read_capture(path, input, options);
  }
  InputResult read_pcap(uint32_t link_type = 1) { return read(pcap_file(packets, link_type, false, true)); }

  replay::CaptureOptions options;
  std::vector<CapPacket> packets;
  uint64_t clock = kStart + 123'456'789;
  ScratchDir dir{"sluice-capture"};
  std::string path = dir.path() + "/in.pcap";
};

std::string problems_of(const InputResult& r) {
  std::string s;
  for (const auto& p : r.problems) s += p.to_string() + "\n";
  return s;
}

TEST_F(Capture, ClassicPcapInEitherByteOrderInMicroOrNanoseconds) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c);
  for (const bool big : {false, true}) {
    for (const bool nanos : {false, true}) {
      const InputResult r = read(pcap_file(packets, 1, big, nanos), 3);
      ASSERT_FALSE(r.fatal) << problems_of(r);
      EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
      EXPECT_EQ(r.units_read, 5u);
      ASSERT_EQ(r.records.size(), 1u);
      const RequestRecord& rec = r.records[0];
      EXPECT_EQ(rec.head, kGet);
      EXPECT_EQ(rec.at, nanos ? packets[3].at : packets[3].at / 1000 * 1000) << big << nanos;
      EXPECT_EQ(rec.record_number, 4u);
      EXPECT_EQ(rec.input, 3u);
      EXPECT_EQ(rec.order, replay::record_order(3, 4));
      EXPECT_EQ(rec.conn.peer, *net::parse_ip("198.18.0.10"));
      EXPECT_EQ(rec.conn.destination, *net::parse_ip("198.19.0.1"));
      EXPECT_EQ(rec.conn.destination_port, 80);
      EXPECT_EQ(rec.parse_error, http::ParseError::kNone);
    }
  }
}

// Appends a block of a type nobody knows (it is skipped).
std::string with_unknown_block(std::string file, bool big) {
  std::vector<uint8_t> b;
  pcap_detail::put32(b, 0x40000bad, big), pcap_detail::put32(b, 16, big), pcap_detail::put32(b, 7, big);
  pcap_detail::put32(b, 16, big);
  return file + std::string(b.begin(), b.end());
}

TEST_F(Capture, PcapngInEitherByteOrderWithInterfacesOfTheirOwnLinkAndResolution) {
  Conversation a("198.18.0.10", 40000, "198.19.0.1", 80), b("198.18.0.11", 40001, "198.19.0.1", 80);
  exchange(a);
  const size_t first = packets.size();
  exchange(b, Link::kSll, get("/on-sll"));
  for (size_t i = first; i < packets.size(); ++i) packets[i].interface = 1;
  packets.push_back({0, frame_of(a.client_fin(), Link::kEthernet), 0, true});  // a simple packet block
  for (const bool big : {false, true}) {
    const std::string file = with_unknown_block(pcapng_file(packets, {{1, 9}, {113, 6}}, big), big);
    const InputResult r = read(file);
    ASSERT_FALSE(r.fatal) << problems_of(r);
    EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
    EXPECT_EQ(r.units_read, 11u);
    ASSERT_EQ(r.records.size(), 2u);
    const bool a_first = r.records[0].head == kGet;
    const RequestRecord& ra = r.records[a_first ? 0 : 1];
    const RequestRecord& rb = r.records[a_first ? 1 : 0];
    EXPECT_EQ(ra.head, kGet);
    EXPECT_EQ(ra.at, packets[3].at);  // nanoseconds on interface 0
    EXPECT_EQ(rb.head, get("/on-sll"));
    EXPECT_EQ(rb.at, packets[8].at / 1000 * 1000);  // microseconds on interface 1
    EXPECT_EQ(rb.record_number, 9u);
  }
}

TEST_F(Capture, PcapngBinaryResolutionAndSimplePacketBlocks) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c);
  packets.push_back({0, frame_of(c.client(get("/simple")), Link::kEthernet), 0, true});
  const InputResult r = read(pcapng_file(packets, {{1, 0x80 | 20}}));  // 2^-20 s
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_LE(packets[3].at - r.records[0].at, 954u);  // rounded down to a 2^-20 s tick (953.67 ns)
  EXPECT_LE(r.records[0].at, packets[3].at);
  // A simple packet block has no time: it takes the one before it.
  EXPECT_EQ(r.records[1].head, get("/simple"));
  EXPECT_LE(packets[4].at - r.records[1].at, 954u);
}

TEST_F(Capture, EveryLinkTypeOverIpv4AndIpv6) {
  for (const Link link : {Link::kEthernet, Link::kEthernetVlan, Link::kSll, Link::kSll2, Link::kRaw}) {
    for (const bool v6 : {false, true}) {
      packets.clear();
      Conversation c(v6 ? "2001:db8::10" : "198.18.0.10", 40000, v6 ? "2001:db8:1::1" : "198.19.0.1", 80);
      exchange(c, link);
      const InputResult r = read_pcap(link_type_of(link));
      EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
      ASSERT_EQ(r.records.size(), 1u) << static_cast<int>(link) << v6;
      EXPECT_EQ(r.records[0].head, kGet);
      EXPECT_EQ(r.records[0].conn.peer, *net::parse_ip(v6 ? "2001:db8::10" : "198.18.0.10"));
      EXPECT_EQ(r.records[0].conn.destination, *net::parse_ip(v6 ? "2001:db8:1::1" : "198.19.0.1"));
    }
  }
}

TEST_F(Capture, AHeadInThreeSegmentsCompletesAtTheThird) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  add(c.client(kGet.substr(0, 10))), add(c.client(kGet.substr(10, 25)));
  const uint64_t third = add(c.client(kGet.substr(35)));
  const InputResult r = read_pcap();
  ASSERT_EQ(r.records.size(), 1u) << problems_of(r);
  EXPECT_EQ(r.records[0].head, kGet);
  EXPECT_EQ(r.records[0].at, third);
  EXPECT_EQ(r.records[0].record_number, 6u);
}

// A capture behind a load balancer: each connection begins with a PROXY
// protocol header (here v1, split across two segments with the request's
// first bytes), taken off the stream and noted on its records.
TEST_F(Capture, APROXYHeaderIsTakenOffAndNoted) {
  Conversation c("198.18.0.250", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  const std::string header = "PROXY TCP4 203.0.113.7 198.19.0.1 51000 80\r\n";
  add(c.client(header.substr(0, 9)));
  add(c.client(header.substr(9) + kGet.substr(0, 12)));
  add(c.client(kGet.substr(12)));
  add(c.origin(kOk));
  add(c.client(get("/b")));
  Conversation d("198.18.0.11", 40001, "198.19.0.1", 80);
  exchange(d);
  const InputResult r = read_pcap();
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 3u);
  EXPECT_EQ(r.records[0].head, kGet);
  EXPECT_EQ(r.records[0].relay, RequestRecord::Relay::kRelayed);
  EXPECT_EQ(r.records[0].relay_version, 1);
  EXPECT_EQ(r.records[0].relayed, *net::parse_ip("203.0.113.7"));
  EXPECT_EQ(r.records[1].head, get("/b"));
  EXPECT_EQ(r.records[1].relay, RequestRecord::Relay::kRelayed) << "the whole connection's";
  EXPECT_EQ(r.records[2].relay, RequestRecord::Relay::kNone);
}

TEST_F(Capture, SegmentsOutOfOrderAndRetransmittedGiveEachHeadOnce) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  const TcpSegment a1 = c.client(kGet.substr(0, 20)), a2 = c.client(kGet.substr(20)), b = c.client(get("/b"));
  add(b), add(a2);  // ahead of a gap: held
  const uint64_t filled = add(a1);
  add(a1), add(a2);
  TcpSegment overlap = b;  // a retransmission that starts inside what was read
  overlap.seq -= 5;
  overlap.payload = kGet.substr(kGet.size() - 5) + b.payload;
  add(overlap);
  const InputResult r = read_pcap();
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].head, kGet);
  EXPECT_EQ(r.records[1].head, get("/b"));
  // Both became readable when the gap filled.
  EXPECT_EQ(r.records[0].at, filled);
  EXPECT_EQ(r.records[1].at, filled);
}

TEST_F(Capture, PipelinedRequestsInOneSegmentComeInStreamOrder) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  add(c.client("\r\n" + get("/1") + get("/2") + get("/3")));
  const InputResult r = read_pcap();
  ASSERT_EQ(r.records.size(), 3u) << problems_of(r);
  EXPECT_EQ(r.records[0].head, "\r\n" + get("/1"));  // leading empty lines belong to the head, as the parser reads it
  EXPECT_EQ(r.records[1].head, get("/2"));
  EXPECT_EQ(r.records[2].head, get("/3"));
  for (const RequestRecord& rec : r.records) EXPECT_EQ(rec.record_number, 4u);
}

TEST_F(Capture, AChunkedBodyBetweenTwoHeads) {
  const std::string post =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nTransfer-Encoding: chunked\r\nX-Pi-Deployment: d1\r\n\r\n";
  const std::string stream = post + "5\r\nhello\r\n1a\r\nGET /not-a-head HTTP/1.1\r\n\r\n0\r\n\r\n" + get("/after");
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  for (size_t at = 0; at < stream.size(); at += 17) add(c.client(stream.substr(at, 17)));
  const InputResult r = read_pcap();
  ASSERT_EQ(r.records.size(), 2u) << problems_of(r);
  EXPECT_EQ(r.records[0].head, post);
  EXPECT_EQ(r.records[1].head, get("/after"));
  EXPECT_EQ(r.records[1].record_number, 3 + (stream.size() + 16) / 17);
}

TEST_F(Capture, TheResponsesReportedTokensGoToTheRequestTheyAnswer) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  add(c.client(get("/1") + get("/2") + get("/3")));
  const uint64_t first = add(c.origin("HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 120\r\nContent-Length: 2\r\n\r\nok"));
  add(c.origin("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Pi-Usage-Tokens\r\n\r\n2\r\nok\r\n"));
  const uint64_t second = add(c.origin("0\r\nX-Pi-Usage-Tokens: 75\r\n\r\n"));
  add(c.origin(kOk));
  const InputResult r = read_pcap();
  ASSERT_EQ(r.records.size(), 3u) << problems_of(r);
  EXPECT_TRUE(r.records[0].has_usage);
  EXPECT_EQ(r.records[0].usage_tokens, 120u);
  EXPECT_EQ(r.records[0].usage_at, first);
  EXPECT_TRUE(r.records[1].has_usage);  // from the trailer section
  EXPECT_EQ(r.records[1].usage_tokens, 75u);
  EXPECT_EQ(r.records[1].usage_at, second);
  EXPECT_FALSE(r.records[2].has_usage);
}

TEST_F(Capture, AHeadTheParserRefusesIsARecordAndEndsTheConnection) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  add(c.client(get("/ok")));
  const uint64_t refused = add(c.client("GET /x HTTP/1.1\r\nHost : router\r\n\r\n"));
  add(c.client(get("/never-read")));
  const InputResult r = read_pcap();
  ASSERT_EQ(r.records.size(), 2u) << problems_of(r);
  EXPECT_EQ(r.records[0].head, get("/ok"));
  EXPECT_EQ(r.records[1].parse_error, http::ParseError::kWhitespaceBeforeColon);
  EXPECT_TRUE(r.records[1].head.empty());
  EXPECT_EQ(r.records[1].at, refused);
}

TEST_F(Capture, AnUpgradeWaitsForItsAnswer) {
  const std::string upgrade = "GET /ws HTTP/1.1\r\nHost: router\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80), d("198.18.0.10", 40001, "198.19.0.1", 80);
  add(c.syn()), add(c.syn_ack()), add(c.ack());
  add(c.client(upgrade + get("/after-refused-switch")));
  const uint64_t answered = add(c.origin(kOk));  // no switch: parsing resumes
  add(d.syn()), add(d.syn_ack()), add(d.ack());
  add(d.client(upgrade));
  add(d.origin("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"));
  add(d.client(get("/inside-the-tunnel")));
  InputResult r = read_pcap();
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 3u);
  std::sort(r.records.begin(), r.records.end(), [](auto& x, auto& y) { return x.order < y.order; });
  EXPECT_EQ(r.records[1].head, get("/after-refused-switch"));
  EXPECT_EQ(r.records[1].at, answered);
  EXPECT_EQ(r.records[2].head, upgrade);
}

TEST_F(Capture, AFlowWithoutItsSynIsAdoptedAtARequestHead) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  add(c.client("the end of a body from before the capture"));
  add(c.origin("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));  // answers a request the capture missed
  add(c.client(kGet));
  add(c.origin("HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 9\r\nContent-Length: 0\r\n\r\n"));
  const InputResult r = read_pcap();
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0].head, kGet);
  EXPECT_EQ(r.records[0].usage_tokens, 9u);
}

TEST_F(Capture, ANewSynOnTheSameTupleStartsANewConnection) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80), again("198.18.0.10", 40000, "198.19.0.1", 80, 77777, 5);
  exchange(c);
  add(c.client("GET /half"));  // never completed: the connection is reset
  add(c.client_rst());
  exchange(again, Link::kEthernet, get("/again"));
  const InputResult r = read_pcap();
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].head, kGet);
  EXPECT_EQ(r.records[1].head, get("/again"));
  // Another connection: an answer that closed the first would not silence it.
  EXPECT_NE(r.records[0].connection, 0u);
  EXPECT_NE(r.records[1].connection, 0u);
  EXPECT_NE(r.records[0].connection, r.records[1].connection);
}

TEST_F(Capture, AFlowToAnotherPortIsNotRead) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 8080);
  exchange(c);
  const InputResult r = read_pcap();
  EXPECT_TRUE(r.records.empty());
  EXPECT_EQ(r.problem_count, 0u);
  EXPECT_EQ(r.units_read, 5u);
}

TEST_F(Capture, ManyFlowsInterleavedComeInTimeOrderEachFlowsInStreamOrder) {
  std::vector<Conversation> flows;
  for (uint16_t i = 0; i < 300; ++i) flows.emplace_back("198.18.1." + std::to_string(i % 250), 1000 + i, "198.19.0.1", 80);
  for (auto& f : flows) add(f.syn());
  for (int n = 0; n < 3; ++n) {
    for (size_t i = 0; i < flows.size(); ++i) add(flows[i].client(get("/" + std::to_string(i) + "/" + std::to_string(n))));
  }
  const InputResult r = read_pcap();
  ASSERT_EQ(r.records.size(), 900u) << problems_of(r);
  // As the packets came: round n of every flow before round n + 1.
  for (size_t at = 0; at < r.records.size(); ++at) {
    EXPECT_EQ(r.records[at].head, get("/" + std::to_string(at % 300) + "/" + std::to_string(at / 300)));
    if (at > 0) {
      EXPECT_LT(r.records[at - 1].at, r.records[at].at);
    }
  }
}

TEST_F(Capture, AResponseThatCannotBeFramedIsAProblemAndRequestsStillCount) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c);
  add(c.client(get("/2")));
  add(c.origin("HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nok"));
  add(c.client(get("/3")));
  const InputResult r = read_pcap();
  EXPECT_EQ(r.records.size(), 3u);
  ASSERT_EQ(r.problem_count, 1u);
  EXPECT_EQ(r.problems[0].where, path + ": packet 7");
  EXPECT_NE(r.problems[0].message.find("bad_content_length"), std::string::npos) << r.problems[0].message;
}

TEST_F(Capture, BytesAfterAGapNeverFilledAreAProblem) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c);
  c.skip_client(10);
  add(c.client(get("/after-the-gap")));
  const InputResult r = read_pcap();
  EXPECT_EQ(r.records.size(), 1u);
  ASSERT_EQ(r.problem_count, 1u);
  EXPECT_EQ(r.problems[0].where, path + ": packet 6");
  EXPECT_NE(r.problems[0].message.find("gap"), std::string::npos);
}

TEST_F(Capture, AFrameThatDoesNotParseIsAProblemNamingItsPacket) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c);
  packets[1].bytes[17] = 0xff;  // an IPv4 total length past the frame
  packets[4].bytes.resize(40);  // cut short inside its IP packet
  const InputResult r = read_pcap();
  EXPECT_EQ(r.records.size(), 1u);
  ASSERT_EQ(r.problem_count, 2u) << problems_of(r);
  EXPECT_EQ(r.problems[0].where, path + ": packet 2");
  EXPECT_EQ(r.problems[1].where, path + ": packet 5");
}

TEST_F(Capture, ATruncatedFileKeepsTheRecordsBeforeIt) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c);
  add(c.client(get("/cut")));
  std::string pcap = pcap_file(packets, 1);
  InputResult r = read(pcap.substr(0, pcap.size() - 10));
  EXPECT_FALSE(r.fatal);
  ASSERT_EQ(r.records.size(), 1u);
  ASSERT_EQ(r.problem_count, 1u);
  EXPECT_EQ(r.problems[0].where, path + ": packet 6");
  const std::string ng = pcapng_file(packets, {{1, 6}});
  r = read(ng.substr(0, ng.size() - 10));
  ASSERT_EQ(r.records.size(), 1u);
  ASSERT_EQ(r.problem_count, 1u);
  EXPECT_EQ(r.problems[0].where, path + ": packet 6");
  // An absurd record length ends a classic file; a block length that cannot be, a pcapng file.
  pcap[24 + 16 + packets[0].bytes.size() + 11] = '\x7f';  // packet 2's captured length, high byte
  r = read(pcap);
  EXPECT_EQ(r.problems.at(0).where, path + ": packet 2");
  std::string broken = ng;
  broken[28 + 32 + 4] = '\x7f';  // the first packet block's length: not a multiple of 4
  r = read(broken);
  EXPECT_EQ(r.problems.at(0).where, path + ": byte 60");
  EXPECT_EQ(r.units_read, 0u);
}

TEST_F(Capture, WhatIsNotACaptureIsFatal) {
  for (const std::string& bytes : {std::string(), std::string("GET / HTTP/1.1\r\n\r\nnot a capture at all"),
                                   std::string("\xd4\xc3\xb2\xa1\x02\x00", 6), std::string("\x0a\x0d\x0d\x0a", 4)}) {
    const InputResult r = read(bytes);
    EXPECT_TRUE(r.fatal);
    ASSERT_EQ(r.problems.size(), 1u);
    EXPECT_EQ(r.problems[0].where.rfind(path, 0), 0u);
  }
  // What --format auto goes by (sluice-replay reads an input's first bytes once).
  const auto magic = [](const std::string& bytes) {
    return replay::capture_format({reinterpret_cast<const uint8_t*>(bytes.data()), std::min<size_t>(bytes.size(), 4)});
  };
  EXPECT_EQ(magic("GET / HTTP/1.1\r\n\r\n"), replay::CaptureFormat::kUnknown);
  const InputResult missing = replay::read_capture(dir.path() + "/none.pcap", 0, options);
  EXPECT_TRUE(missing.fatal);
  ASSERT_EQ(missing.problems.size(), 1u);
  EXPECT_EQ(missing.problems[0].to_string(), dir.path() + "/none.pcap: cannot open: No such file or directory");
  EXPECT_EQ(magic(pcap_file({}, 1)), replay::CaptureFormat::kPcap);
  EXPECT_EQ(magic(pcapng_file({}, {}, true)), replay::CaptureFormat::kPcapng);
}

TEST(CaptureInOrderBytes, PutsBytesInOrderAcrossTheSequenceWrapAndHoldsAtMostAMebibyte) {
  replay::InOrderBytes in;
  std::string got;
  auto sink = [&](std::span<const uint8_t> b) { got.append(b.begin(), b.end()); };
  // Views, as into a capture's image: what is held must outlive the call.
  auto bytes = [](std::string_view s) { return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  const std::string_view text = "0123456789abcdefgh";
  in.start(0xfffffffa);  // the stream crosses 2^32 six bytes in
  using Took = replay::InOrderBytes::Took;
  EXPECT_EQ(in.take(0xfffffffa + 8, bytes(text.substr(8, 8)), {0, 3}, sink), Took::kHeld);
  EXPECT_EQ(in.take(0xfffffffa + 4, bytes(text.substr(4, 4)), {0, 2}, sink), Took::kHeld);
  EXPECT_EQ(in.held_bytes(), 12u);
  EXPECT_EQ(in.first_held().number, 2u);
  EXPECT_EQ(in.take(0xfffffffa, bytes(text.substr(0, 6)), {0, 1}, sink), Took::kFed);  // overlaps what is held
  EXPECT_EQ(got, text.substr(0, 16));
  EXPECT_EQ(in.held_bytes(), 0u);
  EXPECT_EQ(in.take(0xfffffffa + 2, bytes(text.substr(2, 6)), {0, 4}, sink), Took::kOld);
  EXPECT_EQ(in.take(0xfffffffa + 14, bytes(text.substr(14)), {0, 5}, sink), Took::kFed);  // only "gh" is new
  EXPECT_EQ(got, text);
  const std::string big(replay::kMaxHeldBytes / 2 + 1, 'x');
  EXPECT_EQ(in.take(100, bytes(big), {0, 6}, sink), Took::kHeld);
  EXPECT_EQ(in.take(100 + static_cast<uint32_t>(big.size()), bytes(big), {0, 7}, sink), Took::kOverflow);
  in.fin_at(0xfffffffa + 18);
  EXPECT_TRUE(in.finished());
}

TEST_F(Capture, SequenceNumbersThatWrapAround) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80, 0xfffffff0, 0xffffffe0);
  exchange(c);
  add(c.client(get("/1") + get("/2")));
  add(c.origin("HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 3\r\nContent-Length: 0\r\n\r\n" + kOk));
  const InputResult r = read_pcap();
  EXPECT_EQ(r.problem_count, 0u) << problems_of(r);
  ASSERT_EQ(r.records.size(), 3u);
  EXPECT_EQ(r.records[2].head, get("/2"));
  EXPECT_EQ(r.records[1].usage_tokens, 3u);
  EXPECT_FALSE(r.records[2].has_usage);
}

// Every cut and many one-byte changes of a capture are read without a crash
// (and, under the sanitizers, without an out-of-bounds read).
TEST_F(Capture, DamagedFilesNeverCrash) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  exchange(c, Link::kSll);
  add(c.client("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab"));
  std::mt19937 random(19);
  for (const std::string& file : {pcap_file(packets, 113), pcapng_file(packets, {{113, 9}}, true)}) {
    for (size_t n = 0; n < file.size(); n += 3) (void)read(file.substr(0, n));
    for (int i = 0; i < 300; ++i) {
      std::string bad = file;
      for (int k = 0; k < 3; ++k) bad[random() % bad.size()] = static_cast<char>(random());
      const InputResult r = read(bad);
      EXPECT_LE(r.records.size(), 2u);
    }
  }
}

// ---- several captures read as one (read_captures) ------------------------------------

// Traffic written once and cut into files: by direction (tcpdump -Q in and
// -Q out), by time (a ring buffer), or copied whole.
class CaptureMerge : public Capture {
 protected:
  struct Sent {
    TcpSegment segment;
    uint64_t at = 0;
  };
  using Keep = std::function<bool(size_t index, const Sent&)>;

  uint64_t send(const TcpSegment& s) {
    sent.push_back({s, clock});
    clock += 1'000'000;
    return sent.back().at;
  }
  // The packets `keep` keeps, written to `name` on `link`: pcap with
  // nanoseconds, or pcapng.
  std::string write(const std::string& name, const Keep& keep, Link link = Link::kEthernet, bool ng = false) {
    std::vector<CapPacket> kept;
    for (size_t i = 0; i < sent.size(); ++i) {
      if (keep(i, sent[i])) kept.push_back({sent[i].at, frame_of(sent[i].segment, link)});
    }
    const std::string file = dir.path() + "/" + name;
    write_file(file, ng ? pcapng_file(kept, {{link_type_of(link), 9}}) : pcap_file(kept, link_type_of(link), false, true));
    return file;
  }
  // read_captures on `paths`, the first one input 7, the next 8, ...
  std::vector<InputResult> read_all(const std::vector<std::string>& paths) {
    std::vector<replay::CaptureFile> files;
    for (const std::string& p : paths) files.push_back({p, static_cast<uint32_t>(7 + files.size())});
    return replay::read_captures(files, options);
  }
  static bool from_client(const Sent& s) { return s.segment.dport == 80; }

  // Keep-alive connections from three clients, interleaved: each a
  // handshake, 40 requests each answered with its tokens, and a close. 40
  // is more than the 32 unanswered requests the appliance lets through, so
  // a client half read without its answers stops short.
  void keep_alive_traffic() {
    std::vector<Conversation> cs;
    for (uint16_t i = 0; i < 3; ++i) cs.emplace_back("198.18.0." + std::to_string(10 + i), 40000 + i, "198.19.0.1", 80);
    for (Conversation& c : cs) send(c.syn()), send(c.syn_ack()), send(c.ack());
    for (int n = 0; n < 40; ++n) {
      for (size_t i = 0; i < cs.size(); ++i) {
        send(cs[i].client(get("/c" + std::to_string(i) + "/" + std::to_string(n))));
        send(cs[i].origin("HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: " + std::to_string(100 * i + n) +
                          "\r\nContent-Length: 2\r\n\r\nok"));
      }
    }
    for (Conversation& c : cs) send(c.client_fin()), send(c.origin_fin());
  }

  std::vector<Sent> sent;
};

// What a record says, whichever file it came from: compared as a sorted
// list, so the order the records come out in does not matter.
std::vector<std::string> described(const std::vector<InputResult>& results) {
  std::vector<std::string> d;
  for (const InputResult& r : results) {
    for (const RequestRecord& rec : r.records) {
      d.push_back(std::to_string(rec.at) + " " + rec.conn.peer.to_string() + " " + std::to_string(rec.has_usage) + " " +
                  std::to_string(rec.usage_tokens) + "@" + std::to_string(rec.usage_at) + " " +
                  std::to_string(static_cast<int>(rec.parse_error)) + " " + rec.head);
    }
  }
  std::sort(d.begin(), d.end());
  return d;
}

std::string problems_of(const std::vector<InputResult>& results) {
  std::string s;
  for (const InputResult& r : results) s += problems_of(r);
  return s;
}

TEST_F(CaptureMerge, ACaptureSplitByDirectionReadsAsOne) {
  keep_alive_traffic();
  const std::string whole = write("whole.pcap", [](size_t, const Sent&) { return true; });
  // Different formats and link types: each packet is walked on its own.
  const std::string in = write("in.pcap", [](size_t, const Sent& s) { return from_client(s); });
  const std::string out = write("out.pcapng", [](size_t, const Sent& s) { return !from_client(s); }, Link::kSll, true);
  const std::vector<InputResult> reference = {replay::read_capture(whole, 0, options)};
  ASSERT_EQ(reference[0].records.size(), 120u) << problems_of(reference[0]);
  ASSERT_TRUE(reference[0].records[0].has_usage);
  const size_t clients = 3 * 2 + 40 * 3 + 3, origins = 3 + 40 * 3 + 3;  // handshakes, exchanges, closes
  for (const bool reversed : {false, true}) {
    const std::vector<InputResult> r = reversed ? read_all({out, in}) : read_all({in, out});
    ASSERT_EQ(r.size(), 2u);
    const InputResult& from_in = r[reversed ? 1 : 0];
    const InputResult& from_out = r[reversed ? 0 : 1];
    EXPECT_EQ(r[0].problem_count + r[1].problem_count, 0u) << problems_of(r);
    EXPECT_EQ(from_in.units_read, clients);
    EXPECT_EQ(from_out.units_read, origins);
    EXPECT_EQ(described(r), described(reference)) << reversed;
    // Every head is completed by a client packet: the records are in.pcap's.
    ASSERT_EQ(from_in.records.size(), 120u);
    EXPECT_TRUE(from_out.records.empty());
    const uint32_t input = reversed ? 8 : 7;
    std::set<uint64_t> connections;
    for (const RequestRecord& rec : from_in.records) {
      EXPECT_EQ(rec.input, input);
      EXPECT_EQ(rec.order, replay::record_order(input, rec.record_number));
      EXPECT_EQ(rec.head, get(rec.head.substr(4, rec.head.find(' ', 4) - 4)));
      connections.insert(rec.connection);
    }
    EXPECT_EQ(connections.size(), 3u);
    // The record number is the packet in in.pcap: the first request comes
    // after the three SYNs and the three ACKs there.
    EXPECT_EQ(from_in.records[0].record_number, 7u);
    EXPECT_EQ(from_in.records[0].head, get("/c0/0"));
  }
}

TEST_F(CaptureMerge, AConnectionContinuesIntoTheNextRingBufferFileGivenInEitherOrder) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  send(c.syn()), send(c.syn_ack()), send(c.ack());
  size_t cut = 0;
  for (int n = 0; n < 10; ++n) {
    const std::string request = get("/" + std::to_string(n));
    if (n == 5) {
      // The ring buffer turns over inside this head.
      send(c.client(request.substr(0, 12)));
      cut = sent.size();
      send(c.client(request.substr(12)));
    } else {
      send(c.client(request));
    }
    send(c.origin("HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: " + std::to_string(n) + "\r\nContent-Length: 2\r\n\r\nok"));
  }
  const std::string whole = write("whole.pcap", [](size_t, const Sent&) { return true; });
  const std::string a = write("ring-1.pcap", [cut](size_t i, const Sent&) { return i < cut; });
  const std::string b = write("ring-2.pcap", [cut](size_t i, const Sent&) { return i >= cut; });
  const std::vector<InputResult> reference = {replay::read_capture(whole, 0, options)};
  ASSERT_EQ(reference[0].records.size(), 10u) << problems_of(reference[0]);
  for (const bool reversed : {false, true}) {
    const std::vector<InputResult> r = reversed ? read_all({b, a}) : read_all({a, b});
    EXPECT_EQ(r[0].problem_count + r[1].problem_count, 0u) << problems_of(r);
    EXPECT_EQ(described(r), described(reference)) << reversed;
    const InputResult& first = r[reversed ? 1 : 0];
    const InputResult& second = r[reversed ? 0 : 1];
    ASSERT_EQ(first.records.size(), 5u);
    ASSERT_EQ(second.records.size(), 5u);
    EXPECT_EQ(second.records[0].head, get("/5"));
    EXPECT_EQ(second.records[0].record_number, 1u);  // the head's second segment, the file's first packet
    EXPECT_EQ(second.records[0].input, reversed ? 7u : 8u);
    EXPECT_EQ(second.records[0].connection, first.records[0].connection);
    EXPECT_EQ(first.units_read + second.units_read, sent.size());
  }
}

TEST_F(CaptureMerge, TheSameCaptureTwiceGivesEachRequestOnce) {
  keep_alive_traffic();
  const std::string once = write("once.pcap", [](size_t, const Sent&) { return true; });
  const std::string again = write("again.pcapng", [](size_t, const Sent&) { return true; }, Link::kEthernet, true);
  const std::vector<InputResult> reference = {replay::read_capture(once, 0, options)};
  const std::vector<InputResult> r = read_all({once, again});
  EXPECT_EQ(r[0].problem_count + r[1].problem_count, 0u) << problems_of(r);
  EXPECT_EQ(r[0].units_read, sent.size());
  EXPECT_EQ(r[1].units_read, sent.size());
  EXPECT_EQ(described(r), described(reference));
  EXPECT_EQ(r[0].records.size(), 120u);  // a packet met twice at once counts where it came first
  EXPECT_TRUE(r[1].records.empty());
}

TEST_F(CaptureMerge, ProblemsNameTheFileOfTheirPacket) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  send(c.syn()), send(c.syn_ack()), send(c.ack());
  send(c.client(get("/1")));
  send(c.origin("HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nok"));  // out.pcap's packet 2
  c.skip_client(10);
  send(c.client(get("/after-the-gap")));  // in.pcap's packet 4
  const std::string in = write("in.pcap", [](size_t, const Sent& s) { return from_client(s); });
  const std::string out = write("out.pcap", [](size_t, const Sent& s) { return !from_client(s); });
  const std::vector<InputResult> r = read_all({in, dir.path() + "/none.pcap", out});
  ASSERT_EQ(r.size(), 3u);
  ASSERT_EQ(r[0].problem_count, 1u) << problems_of(r);
  EXPECT_EQ(r[0].problems[0].where, in + ": packet 4");
  EXPECT_NE(r[0].problems[0].message.find("gap"), std::string::npos) << r[0].problems[0].message;
  EXPECT_TRUE(r[1].fatal);  // a file that cannot be read is fatal alone
  ASSERT_EQ(r[2].problem_count, 1u) << problems_of(r);
  EXPECT_EQ(r[2].problems[0].where, out + ": packet 2");
  EXPECT_NE(r[2].problems[0].message.find("bad_content_length"), std::string::npos) << r[2].problems[0].message;
  EXPECT_FALSE(r[0].fatal || r[2].fatal);
  EXPECT_EQ(r[0].records.size(), 1u);
}

}  // namespace
}  // namespace sluice::test
