// The flow engine on whole TCP conversations: what reaches the origin, what
// the appliance sends in the flow's name, and that every request is charged
// exactly once whatever the network does to its segments.
#include <gtest/gtest.h>

#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

inline constexpr std::string_view kGet = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
inline constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

// Uses up the small policy's budget of two on `conn`'s address.
void spend_budget(EngineWorld& w) {
  for (uint16_t port = 41000; port < 41002; ++port) {
    Connection c(w, false, port);
    c.handshake();
    ASSERT_TRUE(c.data(kGet).forwarded());
    ASSERT_TRUE(c.respond(kOk).forwarded());
  }
}

TEST(FlowEngine, AdmittedRequestIsForwardedUnchanged) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const Fed f = c.data(kGet);
  EXPECT_EQ(f.action, FrameAction::kForward);
  EXPECT_EQ(f.payload(), kGet);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(f.bytes.data(), f.view));
  EXPECT_EQ(w.counters.admitted.get(), 1u);
  EXPECT_TRUE(w.sink.sent.empty());
}

TEST(FlowEngine, RefusalAnswersClientAndResetsOrigin) {
  EngineWorld w;
  spend_budget(w);
  Connection c(w);
  c.handshake(1460);
  const uint32_t request_seq = c.client_seq_;
  const Fed f = c.data(kGet);
  EXPECT_EQ(f.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.refused.get(), 1u);

  const auto to_client = sent_to(w, Side::kClient);
  ASSERT_EQ(to_client.size(), 1u);
  const SentSegment& a = to_client[0];
  EXPECT_EQ(a.view.seq, c.origin_seq_);                      // right after the origin's last byte
  EXPECT_EQ(a.view.ack, request_seq + kGet.size());          // the whole request consumed
  EXPECT_TRUE(a.view.has(flag::kFin));
  EXPECT_TRUE(a.view.has(flag::kAck));
  EXPECT_TRUE(dataplane::tcp_checksum_ok(a.bytes.data(), a.view));
  EXPECT_TRUE(dataplane::ipv4_checksum_ok(a.bytes.data(), a.view));
  EXPECT_TRUE(a.view.options.has_timestamp);
  EXPECT_EQ(a.view.options.tsecr, c.client_ts_);             // echoes the client's latest TSval
  EXPECT_EQ(a.view.sport, 80);
  EXPECT_EQ(a.view.src, *net::parse_ip("198.18.0.20"));
  const std::string body = a.payload();
  EXPECT_EQ(body.rfind("HTTP/1.1 429 ", 0), 0u) << body;
  EXPECT_NE(body.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(body.find("slow down"), std::string::npos);

  const auto to_origin = sent_to(w, Side::kOrigin);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, request_seq);             // exactly what the origin expects next (RFC 5961)
  EXPECT_TRUE(dataplane::tcp_checksum_ok(to_origin[0].bytes.data(), to_origin[0].view));
}

TEST(FlowEngine, RetransmittedRefusedRequestGetsTheSameAnswerUncharged) {
  EngineWorld w;
  spend_budget(w);
  Connection c(w);
  c.handshake();
  const uint32_t request_seq = c.client_seq_;
  ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  const std::string first = sent_to(w, Side::kClient)[0].payload();
  const size_t before = w.sink.sent.size();
  const Fed again = c.client(flag::kAck | flag::kPsh, kGet, request_seq);
  EXPECT_EQ(again.action, FrameAction::kDrop);
  const auto resent = sent_to(w, Side::kClient, before);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].payload(), first);
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 3u);  // two from spend_budget, one here
  EXPECT_EQ(w.counters.answers_resent.get(), 1u);
}

TEST(FlowEngine, AnswerIsSplitAtTheClientsMss) {
  EngineWorld w;
  spend_budget(w);
  w.snapshot->policy.syn_proxy = false;  // a client MSS under the SYN cookies' smallest (536)
  Connection c(w);
  c.handshake(48);  // 48 - 12 bytes of timestamp option: 36 bytes per segment
  ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  const auto to_client = sent_to(w, Side::kClient);
  ASSERT_GT(to_client.size(), 2u);
  std::string whole;
  uint32_t next = to_client[0].view.seq;
  for (size_t i = 0; i < to_client.size(); ++i) {
    EXPECT_LE(to_client[i].view.payload_len, 36u);
    EXPECT_EQ(to_client[i].view.seq, next);
    EXPECT_EQ(to_client[i].view.has(flag::kFin), i + 1 == to_client.size());
    next += to_client[i].view.payload_len;
    whole += to_client[i].payload();
  }
  EXPECT_EQ(whole.rfind("HTTP/1.1 429 ", 0), 0u);
  EXPECT_NE(whole.find("slow down"), std::string::npos);
}

TEST(FlowEngine, HeadSplitAcrossSegmentsIsHeldThenForwardedWhole) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  std::string at_origin;
  for (size_t i = 0; i < kGet.size(); i += 7) {
    const size_t before = w.sink.sent.size();
    const Fed f = c.data(kGet.substr(i, 7));
    const bool last = i + 7 >= kGet.size();
    EXPECT_EQ(f.action, last ? FrameAction::kForward : FrameAction::kDrop) << i;
    if (!last) {
      // Held, and acknowledged to the client in the origin's name.
      const auto acks = sent_to(w, Side::kClient, before);
      ASSERT_EQ(acks.size(), 1u);
      EXPECT_EQ(acks[0].view.ack, seq + i + 7);
      EXPECT_EQ(acks[0].view.payload_len, 0u);
    } else {
      for (const SentSegment& s : sent_to(w, Side::kOrigin, before)) {
        EXPECT_EQ(s.view.seq, seq + at_origin.size());
        EXPECT_TRUE(dataplane::tcp_checksum_ok(s.bytes.data(), s.view));
        at_origin += s.payload();
      }
      EXPECT_EQ(f.view.seq, seq + at_origin.size());
      at_origin += f.payload();
    }
  }
  EXPECT_EQ(at_origin, kGet);
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.admitted.get(), 1u);
}

TEST(FlowEngine, SplitRefusedHeadNeverReachesTheOrigin) {
  EngineWorld w;
  spend_budget(w);
  Connection c(w);
  c.handshake();
  const uint32_t request_seq = c.client_seq_;
  EXPECT_EQ(c.data(kGet.substr(0, 10)).action, FrameAction::kDrop);
  EXPECT_EQ(c.data(kGet.substr(10, 10)).action, FrameAction::kDrop);
  EXPECT_EQ(c.data(kGet.substr(20)).action, FrameAction::kDrop);
  const auto to_origin = sent_to(w, Side::kOrigin);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, request_seq);  // the origin got none of it
  const auto to_client = sent_to(w, Side::kClient);
  ASSERT_EQ(to_client.size(), 3u);  // two ACKs of held bytes, then the answer
  EXPECT_EQ(to_client[2].view.ack, request_seq + kGet.size());
  EXPECT_EQ(to_client[2].payload().rfind("HTTP/1.1 429 ", 0), 0u);
}

TEST(FlowEngine, RetransmittedHeldBytesStayHeld) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  EXPECT_EQ(c.data(kGet.substr(0, 10)).action, FrameAction::kDrop);
  const Fed again = c.client(flag::kAck | flag::kPsh, kGet.substr(0, 10), seq);
  EXPECT_EQ(again.action, FrameAction::kDrop);
  EXPECT_TRUE(c.data(kGet.substr(10)).forwarded());
  EXPECT_EQ(w.counters.requests.get(), 1u);
}

// An overlap: a held head's first part, then a longer segment at the
// same sequence number whose first bytes differ ("/tight" where "/loose" was
// judged). Were the second copy forwarded, the origin would serve the path
// nobody judged, past its budget; the origin gets the judged bytes and the
// decision is on them.
TEST(FlowEngine, AnOverlapWithOtherBytesCannotChangeAHeldHead) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kTight).forwarded());  // /tight's one request an hour
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const size_t before = w.sink.sent.size();
  const uint32_t seq = c.client_seq_;
  StreamView origin(seq);
  const std::string_view first = kLoose.substr(0, 18);  // "GET /loose HTTP/1."
  origin.add(c.client(flag::kAck | flag::kPsh, first, seq));
  const Fed second = c.client(flag::kAck | flag::kPsh, kTight, seq);
  c.client_seq_ = seq + static_cast<uint32_t>(kTight.size());
  origin.add(second);
  origin.add_sent(w, Side::kOrigin, before);
  EXPECT_EQ(origin.contiguous(), kLoose);
  EXPECT_EQ(w.counters.overlaps_trimmed.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 2u);
  EXPECT_EQ(w.counters.refused.get(), 0u);
}

// The same without a held head: a whole request, then a segment that repeats
// its bytes differently and adds a new request. Only the new request goes on,
// numbered where it begins.
TEST(FlowEngine, AnOverlapWithOtherBytesCarriesOnlyItsNewBytes) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  ASSERT_TRUE(c.data(kLoose).forwarded());
  const std::string both = std::string(kTight) + std::string(kLoose);
  const Fed f = c.client(flag::kAck | flag::kPsh, both, seq);
  ASSERT_TRUE(f.forwarded());
  EXPECT_EQ(f.view.seq, seq + kLoose.size());
  EXPECT_EQ(f.payload(), kLoose);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(f.bytes.data(), f.view));
  EXPECT_TRUE(dataplane::ipv4_checksum_ok(f.bytes.data(), f.view));
  EXPECT_EQ(w.counters.requests.get(), 2u);
  EXPECT_EQ(w.counters.overlaps_trimmed.get(), 1u);
}

// The origin may drop a forwarded segment the appliance judged (a
// bad checksum, PAWS, an option it refuses, a full window); the client then
// sends the bytes again, as it likes. The repeat carries the judged head, its
// checksum redone; once the origin has acknowledged the head, the record
// forgets it and a repeat goes on as it came (the origin keeps its copy).
TEST(FlowEngine, ARepeatOfAJudgedHeadCarriesTheJudgedBytes) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kTight).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const uint32_t seq = c.client_seq_;
  ASSERT_TRUE(c.data(kLoose).forwarded());  // judged, forwarded, and (say) dropped by the origin
  const Fed again = c.client(flag::kAck | flag::kPsh, kTight, seq);
  ASSERT_TRUE(again.forwarded());
  EXPECT_EQ(again.payload(), kLoose);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(again.bytes.data(), again.view));
  EXPECT_EQ(w.counters.repeats_rewritten.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 2u);
  // The origin acknowledges it (and answers): a repeat now changes nothing
  // the origin executes, and goes on untouched.
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const Fed late = c.client(flag::kAck | flag::kPsh, kTight, seq);
  ASSERT_TRUE(late.forwarded());
  EXPECT_EQ(late.payload(), kTight);
  EXPECT_EQ(w.counters.repeats_rewritten.get(), 1u);
}

// A chunked body's size lines say where the next request begins: a repeat
// of a forwarded chunked body with other framing ("0\r\n\r\nGET ...", a
// request smuggled past the limiter if the origin had dropped the first
// copy) carries the judged body instead.
TEST(FlowEngine, ARepeatOfAChunkedBodyCarriesTheJudgedFraming) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data("POST /loose HTTP/1.1\r\nHost: api\r\nTransfer-Encoding: chunked\r\n\r\n").forwarded());
  const uint32_t seq = c.client_seq_;
  const std::string_view body = "5\r\nhello\r\n0\r\n\r\n";
  ASSERT_TRUE(c.data(body).forwarded());
  const std::string_view other = "0\r\n\r\nGET /tight";
  ASSERT_EQ(other.size(), body.size());
  const Fed again = c.client(flag::kAck | flag::kPsh, other, seq);
  ASSERT_TRUE(again.forwarded());
  EXPECT_EQ(again.payload(), body);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(again.bytes.data(), again.view));
  EXPECT_EQ(w.counters.repeats_rewritten.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 1u);
}

// Service-port segments inside VLAN tags (802.1Q, and QinQ's two)
// are judged like untagged ones, and what the appliance writes in the flow's
// name (the 429 to the client, the RST to the origin) carries the same tags.
TEST(FlowEngine, SegmentsInsideVlanTagsAreJudgedAndAnsweredInTheirTags) {
  for (int tags = 1; tags <= 2; ++tags) {
    EngineWorld w;  // kSmallPolicy: 2 a minute, refusals close
    Connection c(w);
    c.set_vlan_tags(tags);
    c.handshake();
    const Fed first = c.data(kGet);
    ASSERT_TRUE(first.forwarded()) << tags;
    EXPECT_EQ(first.view.vlan_tags, tags);
    ASSERT_TRUE(c.respond(kOk).forwarded());
    ASSERT_TRUE(c.data(kGet).forwarded());
    ASSERT_TRUE(c.respond(kOk).forwarded());
    const size_t before = w.sink.sent.size();
    EXPECT_TRUE(c.data(kGet).payload_withheld()) << tags;
    EXPECT_EQ(w.counters.refused.get(), 1u);
    const auto to_client = sent_to(w, Side::kClient, before);
    ASSERT_FALSE(to_client.empty());
    EXPECT_EQ(to_client[0].payload().rfind("HTTP/1.1 429 ", 0), 0u);
    EXPECT_EQ(to_client[0].view.vlan_tags, tags);
    EXPECT_EQ(to_client[0].view.l3_offset, 14 + 4 * tags);
    const auto to_origin = sent_to(w, Side::kOrigin, before);
    ASSERT_FALSE(to_origin.empty());
    EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
    EXPECT_EQ(to_origin[0].view.vlan_tags, tags);
  }
}

// With URG set, the origin's stack takes the byte before the
// urgent pointer out of the stream its server reads ("GET /v1X/..." judged,
// "GET /v1/..." served). The appliance sends such a segment on as ordinary
// data: URG and the pointer cleared, checksum redone.
TEST(FlowEngine, UrgentDataGoesOnAsOrdinaryData) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  const Fed f = c.client(flag::kAck | flag::kPsh | flag::kUrg, kLoose);
  ASSERT_TRUE(f.forwarded());
  EXPECT_FALSE(f.view.has(flag::kUrg));
  EXPECT_EQ(dataplane::load16(f.bytes.data() + f.view.l4_offset + 18), 0u);
  EXPECT_TRUE(dataplane::tcp_checksum_ok(f.bytes.data(), f.view));
  EXPECT_EQ(f.payload(), kLoose);
  EXPECT_EQ(w.counters.urgent_cleared.get(), 1u);
}

TEST(FlowEngine, EarlierRequestInTheSegmentGoesOnWhenTheNextHeadIsHeld) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const std::string first_and_part = std::string(kGet) + std::string(kGet.substr(0, 12));
  const Fed f = c.data(first_and_part);
  ASSERT_TRUE(f.forwarded());
  EXPECT_EQ(f.payload(), kGet);
  EXPECT_TRUE(c.respond(kOk).forwarded());
  EXPECT_TRUE(c.data(kGet.substr(12)).forwarded());
  EXPECT_EQ(w.counters.requests.get(), 2u);
}

// The acknowledgement of held bytes covers every byte before them too: sent
// before the origin has those, it would leave a forwarded request the origin
// lost (after the appliance) unrepeated for good. So it waits for the
// origin's acknowledgement; a repeat meanwhile sends the part before the held
// head on again (found by flow_engine_fuzz, a segment lost after the engine).
TEST(FlowEngine, HeldBytesAreAcknowledgedOnceTheOriginHasWhatComesBefore) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  const std::string first_and_part = std::string(kGet) + std::string(kGet.substr(0, 12));
  size_t before = w.sink.sent.size();
  const Fed f = c.data(first_and_part);  // forwarded (kGet), then lost on the way to the origin
  ASSERT_TRUE(f.forwarded());
  EXPECT_EQ(f.payload(), kGet);
  EXPECT_TRUE(sent_to(w, Side::kClient, before).empty()) << "no acknowledgement past what the origin has";
  // The client sends it all again: the lost request goes on again, the held part does not.
  before = w.sink.sent.size();
  const Fed again = c.client(flag::kAck | flag::kPsh, first_and_part, seq);
  ASSERT_TRUE(again.forwarded());
  EXPECT_EQ(again.payload(), kGet);
  EXPECT_TRUE(sent_to(w, Side::kClient, before).empty());
  // The origin acknowledges it: now the held bytes are acknowledged.
  before = w.sink.sent.size();
  ASSERT_TRUE(c.origin(flag::kAck, "", std::nullopt, seq + static_cast<uint32_t>(kGet.size())).forwarded());
  const auto acks = sent_to(w, Side::kClient, before);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.ack, seq + first_and_part.size());
  // And the head, completed, is judged once.
  EXPECT_TRUE(c.data(kGet.substr(12)).forwarded());
  EXPECT_EQ(w.counters.requests.get(), 2u);
}

TEST(FlowEngine, RetransmittedAdmittedBytesAreForwardedNotCharged) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  ASSERT_TRUE(c.data(kGet).forwarded());
  const Fed again = c.client(flag::kAck | flag::kPsh, kGet, seq);
  EXPECT_TRUE(again.forwarded());
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.retransmits.get(), 1u);
}

TEST(FlowEngine, SegmentAheadOfTheStreamIsDroppedForRetransmission) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  const Fed ahead = c.client(flag::kAck | flag::kPsh, kGet.substr(10), seq + 10);
  EXPECT_EQ(ahead.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.requests.get(), 0u);
  // The sender fills the gap (held: the head is not complete), then
  // retransmits the rest: one request.
  EXPECT_EQ(c.client(flag::kAck | flag::kPsh, kGet.substr(0, 10), seq).action, FrameAction::kDrop);
  EXPECT_TRUE(c.client(flag::kAck | flag::kPsh, kGet.substr(10), seq + 10).forwarded());
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.out_of_order.get(), 1u);
}

TEST(FlowEngine, PipelinedRefusalWaitsForEarlierResponse) {
  EngineWorld w;
  Connection warm(w, false, 41000);
  warm.handshake();
  ASSERT_TRUE(warm.data(kGet).forwarded());  // one of two spent
  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  std::string two = std::string(kGet) + std::string(kGet);
  const Fed f = c.data(two);
  // The first request goes on, the second is cut off.
  ASSERT_EQ(f.action, FrameAction::kForward);
  EXPECT_EQ(f.payload(), kGet);
  EXPECT_FALSE(f.view.has(flag::kFin));
  EXPECT_TRUE(dataplane::tcp_checksum_ok(f.bytes.data(), f.view));
  EXPECT_TRUE(sent_to(w, Side::kClient).empty()) << "the 429 must wait for the first response";
  // The first response, in two pieces; the answer follows the last one.
  EXPECT_TRUE(c.respond(kOk.substr(0, 20)).forwarded());
  EXPECT_TRUE(sent_to(w, Side::kClient).empty());
  EXPECT_TRUE(c.respond(kOk.substr(20)).forwarded());
  const auto to_client = sent_to(w, Side::kClient);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0].view.seq, c.origin_seq_);
  EXPECT_EQ(to_client[0].view.ack, seq + two.size());
  const auto to_origin = sent_to(w, Side::kOrigin);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_EQ(to_origin[0].view.seq, seq + kGet.size());
}

TEST(FlowEngine, ClientFinAfterAnswerIsAcknowledged) {
  EngineWorld w;
  spend_budget(w);
  Connection c(w);
  c.handshake();
  ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  const SentSegment answer = sent_to(w, Side::kClient)[0];
  const size_t before = w.sink.sent.size();
  const Fed fin = c.client(flag::kFin | flag::kAck, "", {}, answer.view.seq + answer.view.payload_len + 1);
  EXPECT_EQ(fin.action, FrameAction::kDrop);
  const auto acks = sent_to(w, Side::kClient, before);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.ack, c.client_seq_ + 1);
  EXPECT_EQ(acks[0].view.seq, answer.view.seq + answer.view.payload_len + 1);
}

TEST(FlowEngine, ChallengeAckFromOriginGetsAnExactReset) {
  EngineWorld w;
  spend_budget(w);
  Connection c(w);
  c.handshake();
  ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  const size_t before = w.sink.sent.size();
  // The origin had not received everything and answers the RST with an ACK.
  const Fed challenge = c.origin(flag::kAck, "", {}, c.client_seq_ - 5);
  EXPECT_EQ(challenge.action, FrameAction::kDrop);
  const auto rst = sent_to(w, Side::kOrigin, before);
  ASSERT_EQ(rst.size(), 1u);
  EXPECT_TRUE(rst[0].view.has(flag::kRst));
  EXPECT_EQ(rst[0].view.seq, c.client_seq_ - 5);
}

TEST(FlowEngine, MalformedHeadIsAnswered400) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  const Fed f = c.data("GET /x HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n");
  EXPECT_EQ(f.action, FrameAction::kDrop);
  const auto to_client = sent_to(w, Side::kClient);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0].payload().rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(w.counters.parse_errors.get(), 1u);
}

TEST(FlowEngine, Ipv6RefusalHasValidChecksums) {
  EngineWorld w;
  for (uint16_t port = 42000; port < 42002; ++port) {
    Connection warm(w, true, port);
    warm.handshake();
    ASSERT_TRUE(warm.data(kGet).forwarded());
  }
  Connection c(w, true);
  c.handshake();
  ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  ASSERT_EQ(w.sink.sent.size(), 2u);
  for (const SentSegment& s : w.sink.sent) {
    EXPECT_EQ(s.view.ip_version, 6);
    EXPECT_TRUE(dataplane::tcp_checksum_ok(s.bytes.data(), s.view));
  }
}

// (Adoption, off by default, is flow_adoption_test.cpp's.)
TEST(FlowEngine, PayloadWithoutHandshakeIsNeverParsed) {
  EngineWorld w(kSmallPolicy);  // adoption off: the default
  Connection c(w);
  const Fed f = c.data(kGet);  // no handshake seen
  EXPECT_EQ(f.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.requests.get(), 0u);
  EXPECT_EQ(w.counters.untracked_reset.get(), 1u);
  ASSERT_EQ(w.sink.sent.size(), 2u);  // a RST each way
  for (const SentSegment& s : w.sink.sent) EXPECT_TRUE(s.view.has(flag::kRst));
}

TEST(FlowEngine, KeepAliveRequestsEachCharged) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_TRUE(c.respond(kOk).forwarded());
  EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_TRUE(c.respond(kOk).forwarded());
  EXPECT_EQ(c.data(kGet).action, FrameAction::kDrop);  // the third: over the budget of two
  EXPECT_EQ(w.counters.admitted.get(), 2u);
  EXPECT_EQ(w.counters.refused.get(), 1u);
  // The answer went out: the refused flow holds no context while it waits for the client's FIN.
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());
}

TEST(FlowEngine, IdleKeepAliveConnectionHoldsNoContext) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size() - 1);
  EXPECT_TRUE(c.respond(kOk).forwarded());
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());
}

TEST(FlowEngine, UpgradeSwitchesToPassThrough) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  EXPECT_TRUE(c.data("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").forwarded());
  EXPECT_TRUE(c.respond("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").forwarded());
  // Frames after the switch are bridged unparsed, even ones that look like requests.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_EQ(w.counters.requests.get(), 1u);
  EXPECT_EQ(w.counters.pass_through.get(), 1u);
}

// A response the appliance cannot frame (here obs-fold, as
// an origin that reflects a request field into its response can be made to
// send) ends the connection instead of switching it to pass-through, where
// every later request on it went to the origin unjudged. The client keeps
// the responses before that segment, then gets a FIN; the origin gets a RST;
// later requests on the connection reach nobody and are not charged.
TEST(FlowEngine, AnUnframableResponseEndsTheConnectionNotPassThrough) {
  EngineWorld w(kKeepPolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kLoose).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  ASSERT_TRUE(c.data(kLoose).forwarded());
  const uint32_t cut_at = c.origin_seq_;
  const size_t before = w.sink.sent.size();
  const Fed bad = c.respond("HTTP/1.1 200 OK\r\nX-Reflected: a\r\n b\r\nContent-Length: 0\r\n\r\n");
  EXPECT_FALSE(bad.forwarded());
  EXPECT_EQ(w.counters.response_errors.get(), 1u);
  const auto to_client = sent_to(w, dataplane::Side::kClient, before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_TRUE(to_client[0].view.has(dataplane::tcp_flag::kFin));
  EXPECT_EQ(to_client[0].view.payload_len, 0u);
  EXPECT_EQ(to_client[0].view.seq, cut_at);
  const auto to_origin = sent_to(w, dataplane::Side::kOrigin, before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(dataplane::tcp_flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, c.client_seq_);
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());

  // Requests after it, even many, reach nobody and are not charged.
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(c.data(kTight).forwarded());
  EXPECT_EQ(w.counters.requests.get(), 2u);
  EXPECT_EQ(w.counters.pass_through.get(), 0u);
  // The client's FIN is acknowledged past the appliance's.
  const size_t at_fin = w.sink.sent.size();
  EXPECT_FALSE(c.client(dataplane::tcp_flag::kFin | dataplane::tcp_flag::kAck, "").forwarded());
  const auto ack = sent_to(w, dataplane::Side::kClient, at_fin);
  ASSERT_FALSE(ack.empty());
  EXPECT_EQ(ack.back().view.seq, cut_at + 1);
  EXPECT_EQ(ack.back().view.ack, c.client_seq_ + 1);
}

// The same on a connection that was waiting to answer a refused request: the
// 429 would answer the wrong request in the client's eyes, so the connection
// ends without it.
TEST(FlowEngine, AnUnframableResponseBeforeARefusalEndsTheConnectionWithoutTheAnswer) {
  EngineWorld w;  // kSmallPolicy: 2 a minute, refusals close
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(std::string(kGet) + std::string(kGet)).forwarded());
  const Fed third = c.data(kGet);
  EXPECT_TRUE(third.payload_withheld());
  ASSERT_TRUE(c.respond(kOk).forwarded());
  const size_t before = w.sink.sent.size();
  EXPECT_FALSE(c.respond("HTTP/1.1 200 OK\r\nX-Reflected: a\r\n b\r\n\r\n").forwarded());
  for (const SentSegment& s : sent_to(w, dataplane::Side::kClient, before)) {
    EXPECT_EQ(s.view.payload_len, 0u) << s.payload();
    EXPECT_TRUE(s.view.has(dataplane::tcp_flag::kFin));
  }
  EXPECT_EQ(w.counters.answers_sent.get(), 0u);
  EXPECT_EQ(w.counters.answers_abandoned.get(), 1u);
}

// A FIN cut off with the rest of a segment (here by back-pressure, past 32
// unanswered requests) was not sent: the client's side is still open, so the
// flow stays parsed, and the rest, sent again, is judged like any bytes. Were
// the FIN counted, a flow whose origin had closed first would end up closed,
// and the client's next bytes bridged unjudged.
TEST(FlowEngine, AFinCutOffWithTheRestOfASegmentDoesNotCloseTheFlow) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.origin(flag::kAck | flag::kFin, "").forwarded());  // the origin closes its side first
  std::string many;
  for (int i = 0; i < 33; ++i) many += kGet;
  const uint32_t start = c.client_seq_;
  const Fed f = c.client(flag::kAck | flag::kPsh | flag::kFin, many);
  ASSERT_TRUE(f.forwarded());
  EXPECT_EQ(f.view.payload_len, 32 * kGet.size());
  EXPECT_FALSE(f.view.has(flag::kFin));
  EXPECT_EQ(w.counters.requests.get(), 32u);

  // The 33rd again, with the FIN: still held back (32 are unanswered), not bridged.
  const Fed again = c.client(flag::kAck | flag::kPsh | flag::kFin, kGet, start + 32 * static_cast<uint32_t>(kGet.size()));
  EXPECT_TRUE(again.payload_withheld());
  EXPECT_EQ(w.counters.requests.get(), 32u);
  EXPECT_EQ(w.counters.backpressure.get(), 2u);
}

TEST(FlowEngine, FullFlowTableDropsNewSyns) {
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.flows = 16;  // 14 usable (7/8)
  EngineWorld w(kSmallPolicy, config);
  w.snapshot->policy.syn_proxy = false;  // with it, SYNs take no flow (syn_proxy_test.cpp)
  for (uint16_t p = 0; p < 14; ++p) {
    Connection c(w, false, static_cast<uint16_t>(43000 + p));
    EXPECT_TRUE(c.client(flag::kSyn, "", 7).forwarded());
  }
  Connection extra(w, false, 44000);
  EXPECT_EQ(extra.client(flag::kSyn, "", 7).action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.flow_table_full.get(), 1u);
}

TEST(FlowEngine, IdleFlowsExpire) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  EXPECT_EQ(w.engine->flows().size(), 1u);
  w.now += 601 * time::kNanosPerSecond;
  w.sweep();
  EXPECT_EQ(w.engine->flows().size(), 0u);
  EXPECT_EQ(w.counters.flows_expired.get(), 1u);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

TEST(FlowEngine, ClosedFlowsLeaveSoon) {
  EngineWorld w;
  Connection c(w);
  c.handshake();
  EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_TRUE(c.respond(kOk).forwarded());
  EXPECT_TRUE(c.client(flag::kFin | flag::kAck, "").forwarded());
  EXPECT_TRUE(c.origin(flag::kFin | flag::kAck, "").forwarded());
  w.now += 6 * time::kNanosPerSecond;  // past the closed timeout, far from the idle one
  w.sweep();
  EXPECT_EQ(w.engine->flows().size(), 0u);
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

TEST(FlowEngine, OverwrittenAnswerIsReplacedByAReset) {
  dataplane::EngineConfig config = EngineWorld::small_config();
  config.flows = 512;
  config.answer_bytes = 8192;  // the smallest store: ~50 answers
  EngineWorld w(kSmallPolicy, config);
  spend_budget(w);
  Connection first(w, false, 30000);
  first.handshake();
  const uint32_t seq = first.client_seq_;
  ASSERT_EQ(first.data(kGet).action, FrameAction::kDrop);
  for (uint16_t p = 30001; p < 30200; ++p) {
    Connection c(w, false, p);
    c.handshake();
    ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  }
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(first.client(flag::kAck | flag::kPsh, kGet, seq).action, FrameAction::kDrop);
  const auto sent = sent_to(w, Side::kClient, before);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].view.has(flag::kRst));
  EXPECT_EQ(w.counters.answers_lost.get(), 1u);
  EXPECT_EQ(w.counters.refused.get(), 200u);  // still charged once each
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// A SYN replayed on a live connection (the same one, or with a new sequence
// number) must not take the connection out of the limiter.
TEST(FlowEngine, SynOnALiveConnectionChangesNothing) {
  for (const bool proxy : {false, true}) {
  EngineWorld w;
  w.snapshot->policy.syn_proxy = proxy;
  Connection c(w);
  c.handshake();
  EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_TRUE(c.respond(kOk).forwarded());
  // Bridged (the origin answers with a challenge ACK), or with the SYN
  // proxy dropped (the origin never saw the client's SYN at all).
  EXPECT_EQ(c.client(flag::kSyn, "", c.client_seq_ - 1 - kGet.size()).forwarded(), !proxy);  // the original SYN again
  EXPECT_EQ(c.client(flag::kSyn, "", 12345).forwarded(), !proxy);                          // a new sequence number
  EXPECT_TRUE(c.data(kGet).forwarded());
  EXPECT_TRUE(c.respond(kOk).forwarded());
  EXPECT_EQ(c.data(kGet).action, FrameAction::kDrop);  // still limited: the third of a budget of two
  EXPECT_EQ(w.counters.requests.get(), 3u);
  }
}

// A late, older origin segment must not move the timestamp the answer
// carries backwards (the client's PAWS check would drop the answer).
TEST(FlowEngine, AnswerTimestampNeverGoesBackwards) {
  EngineWorld w;
  spend_budget(w);
  Connection c(w);
  c.handshake();
  c.origin_ts_ += 1000;
  EXPECT_TRUE(c.respond("").forwarded());  // a pure ACK with a newer timestamp
  const uint32_t newest = c.origin_ts_;
  c.origin_ts_ -= 500;  // then an old segment arrives late
  (void)c.origin(flag::kAck, "", c.origin_seq_ - 1);
  ASSERT_EQ(c.data(kGet).action, FrameAction::kDrop);
  const auto to_client = sent_to(w, Side::kClient);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0].view.options.tsval, newest);
}

// Three rules: one that answers 404 itself, one for /v1/models with a budget
// of three, and one for the rest with a budget of a thousand.
inline constexpr std::string_view kRulesPolicy = R"(sluice: 1
name: per-rule
service_ports: [80]
header_style: seed
buckets:
  gone: { rate: 1000/min, burst: 1000 }
  models: { rate: 3/min, burst: 3 }
  rest: { rate: 1000/min, burst: 1000 }
rules:
  - name: gone
    path: "/v0/*"
    key: client_ip
    bucket: gone
    answer: 404
  - name: models
    path: /v1/models
    key: client_ip
    bucket: models
  - name: rest
    key: client_ip
    bucket: rest
refusal:
  status: 429
  body: 'slow down'
not_found:
  status: 404
  body: 'gone'
)";

TEST(FlowEngine, DecisionsAreCountedPerRule) {
  EngineWorld w(kRulesPolicy);
  constexpr std::string_view other = "GET /v1/other HTTP/1.1\r\nHost: api.example\r\n\r\n";
  {
    Connection c(w, false, 43000);
    c.handshake();
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(c.data(other).forwarded());
      ASSERT_TRUE(c.respond(kOk).forwarded());
    }
  }
  uint16_t port = 43001;
  for (int i = 0; i < 3; ++i) {
    Connection c(w, false, port++);
    c.handshake();
    ASSERT_TRUE(c.data(kGet).forwarded());
  }
  for (int i = 0; i < 2; ++i) {
    Connection c(w, false, port++);
    c.handshake();
    ASSERT_TRUE(c.data(kGet).payload_withheld());
  }
  {
    Connection c(w, false, port++);
    c.handshake();
    ASSERT_TRUE(c.data("GET /v0/old HTTP/1.1\r\nHost: api.example\r\n\r\n").payload_withheld());
  }

  const auto& rules = w.counters.rules;
  EXPECT_EQ(rules[0].admitted.get(), 0u);
  EXPECT_EQ(rules[0].refused.get(), 0u);
  EXPECT_EQ(rules[0].answered.get(), 1u);
  EXPECT_EQ(rules[1].admitted.get(), 3u);
  EXPECT_EQ(rules[1].refused.get(), 2u);
  EXPECT_EQ(rules[1].answered.get(), 0u);
  EXPECT_EQ(rules[2].admitted.get(), 20u);
  EXPECT_EQ(rules[2].refused.get(), 0u);
  for (size_t i = 3; i < dataplane::kRuleCounters; ++i) {
    EXPECT_EQ(rules[i].admitted.get() + rules[i].refused.get() + rules[i].answered.get(), 0u) << i;
  }
  EXPECT_EQ(w.counters.admitted.get(), 23u);
  EXPECT_EQ(w.counters.refused.get(), 2u);

  // Busiest keys: every refusal, and one admission in 16 weighted 16 (the
  // 16th admission was the rest rule's; the 23 so far reached no 32nd).
  const std::vector<dataplane::BusyKeys::Entry> busy = w.counters.busy.snapshot();
  ASSERT_EQ(busy.size(), 2u);
  const net::IpAddress client = *net::parse_ip("198.18.0.10");
  EXPECT_EQ(busy[0].rule, 2);
  EXPECT_EQ(busy[0].count, 16u);
  EXPECT_EQ(busy[1].rule, 1);
  EXPECT_EQ(busy[1].count, 2u);
  for (const dataplane::BusyKeys::Entry& e : busy) {
    EXPECT_EQ(e.error, 0u);
    EXPECT_EQ(e.label.kind, limiter::KeyLabel::Kind::kClientIp);
    ASSERT_EQ(e.label.len, 16);
    EXPECT_TRUE(std::equal(client.bytes.begin(), client.bytes.end(), e.label.bytes.begin()));
  }
  EXPECT_NE(busy[0].label.key_hash, busy[1].label.key_hash);  // two buckets
}

// A decision counts in its rule's counter slot (which the policy publisher
// keeps per rule name across reloads; policy_publisher_test).
TEST(FlowEngine, ADecisionCountsInItsRulesCounterSlot) {
  EngineWorld w(kKeepPolicy);
  w.snapshot->policy.rules[1].counter_slot = 9;  // "loose", as a publisher may have placed it
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kLoose).forwarded());
  EXPECT_EQ(w.counters.rules[9].admitted.get(), 1u);
  EXPECT_EQ(w.counters.rules[1].admitted.get(), 0u);
}

}  // namespace
}  // namespace sluice::test

// Policy reloads: what a worker reports of the generations its parse contexts
// may still use (the control plane frees a retired snapshot only below it),
// and which policy decides a request parsed across a swap.
namespace sluice::test {
namespace {

// Calls oldest_generation() for exactly one full cycle over the pool
// (starting at a cycle boundary) with `generation` as every pass's, and
// returns what the last call reported.
uint64_t full_cycle(dataplane::ContextPool& pool, uint64_t generation, size_t step) {
  uint64_t reported = 0;
  for (size_t seen = 0; seen < pool.size(); seen += step) reported = pool.oldest_generation(generation, step);
  return reported;
}

// Ten contexts looked at four per call: a full cycle takes three calls.
constexpr size_t kPoolSize = 10;
constexpr size_t kStep = 4;

dataplane::ContextPool small_pool(const EngineWorld& w) {
  return dataplane::ContextPool(kPoolSize, w.snapshot->policy.stream.head.max_head_bytes,
                                w.snapshot->policy.stream.head.max_fields);
}

TEST(ContextPoolGenerations, NothingIsKnownBeforeAFullCycle) {
  EngineWorld w;
  dataplane::ContextPool pool = small_pool(w);
  // 0 frees nothing: a worker that has not looked at all its contexts yet
  // must not let the control plane free a snapshot one of them may hold.
  EXPECT_EQ(pool.oldest_generation(7, kStep), 0u);
  EXPECT_EQ(pool.oldest_generation(7, kStep), 0u);
  EXPECT_EQ(pool.oldest_generation(7, kStep), 7u);  // the third call ends the cycle
}

TEST(ContextPoolGenerations, WithNothingHeldTheBoundIsTheLowestPassGeneration) {
  EngineWorld w;
  dataplane::ContextPool pool = small_pool(w);
  // A reload lands in the middle of the cycle: its first pass still read
  // generation 5, so 5 is what the cycle vouches for, not 6.
  EXPECT_EQ(pool.oldest_generation(5, kStep), 0u);
  EXPECT_EQ(pool.oldest_generation(6, kStep), 0u);
  EXPECT_EQ(pool.oldest_generation(6, kStep), 5u);
  EXPECT_EQ(full_cycle(pool, 6, kStep), 6u);
}

TEST(ContextPoolGenerations, AHeldContextKeepsItsGenerationUntilACycleAfterItsRelease) {
  EngineWorld w;
  dataplane::ContextPool pool = small_pool(w);
  const http::Http1Policy& policy = w.snapshot->policy;
  EXPECT_EQ(full_cycle(pool, 3, kStep), 3u);
  // Held in the last slot a cycle looks at, so the bound depends on the scan
  // reaching it and not only on the pass generations.
  std::vector<int32_t> taken;
  for (size_t i = 0; i < kPoolSize; ++i) taken.push_back(pool.acquire());
  const int32_t last = taken.back();
  ASSERT_EQ(last, static_cast<int32_t>(kPoolSize - 1));
  for (int32_t i : taken) {
    if (i != last) pool.release(i);
  }
  pool.start(last, policy, 3);
  EXPECT_EQ(pool.at(last).generation, 3u);
  EXPECT_EQ(pool.at(last).policy, &policy);

  // Reloads to 4 and then 5: the passes move on, the held request does not.
  EXPECT_EQ(full_cycle(pool, 4, kStep), 3u);
  EXPECT_EQ(full_cycle(pool, 5, kStep), 3u);
  EXPECT_EQ(full_cycle(pool, 5, kStep), 3u);

  // Released at a cycle boundary: the next full cycle sees it free.
  pool.release(last);
  EXPECT_EQ(pool.oldest_generation(5, kStep), 3u);  // a partial cycle reports the last full one
  EXPECT_EQ(pool.oldest_generation(5, kStep), 3u);
  EXPECT_EQ(pool.oldest_generation(5, kStep), 5u);
}

TEST(ContextPoolGenerations, AReleaseAfterItsSlotWasScannedCountsFromTheNextCycle) {
  EngineWorld w;
  dataplane::ContextPool pool = small_pool(w);
  const int32_t first = pool.acquire();
  ASSERT_EQ(first, 0);  // the slot the first call of a cycle looks at
  pool.start(first, w.snapshot->policy, 3);
  EXPECT_EQ(full_cycle(pool, 5, kStep), 3u);
  // The cycle in progress saw it held; released afterwards, that cycle must
  // still report 3 (it cannot tell), and only the one after it 5.
  EXPECT_EQ(pool.oldest_generation(5, kStep), 3u);
  pool.release(first);
  EXPECT_EQ(pool.oldest_generation(5, kStep), 3u);
  EXPECT_EQ(pool.oldest_generation(5, kStep), 3u);  // end of the cycle that saw it
  EXPECT_EQ(full_cycle(pool, 5, kStep), 5u);
}

TEST(ContextPoolGenerations, AContextStartedBehindTheScanIsCoveredByItsPassGeneration) {
  EngineWorld w;
  dataplane::ContextPool pool = small_pool(w);
  EXPECT_EQ(full_cycle(pool, 5, kStep), 5u);
  // First pass of a cycle (generation 5): slots 0-3 are looked at, all free.
  EXPECT_EQ(pool.oldest_generation(5, kStep), 5u);
  // The next pass, still under 5, starts a context in slot 0, which this
  // cycle has already looked at; then a reload to 6.
  const int32_t i = pool.acquire();
  ASSERT_EQ(i, 0);
  pool.start(i, w.snapshot->policy, 5);
  EXPECT_EQ(pool.oldest_generation(5, kStep), 5u);
  // Only the pass generations vouch for slot 0 in this cycle (the scan saw
  // it free): the bound is 5, not the 6 of the pass that ends the cycle.
  EXPECT_EQ(pool.oldest_generation(6, kStep), 5u);
  // Later cycles see the context itself.
  EXPECT_EQ(full_cycle(pool, 6, kStep), 5u);
  EXPECT_EQ(full_cycle(pool, 7, kStep), 5u);
  pool.release(i);
  EXPECT_EQ(full_cycle(pool, 7, kStep), 7u);
}

TEST(ContextPoolGenerations, AContextRestartedUnderANewGenerationIsReportedUnderIt) {
  EngineWorld w;
  dataplane::ContextPool pool = small_pool(w);
  const int32_t i = pool.acquire();
  pool.start(i, w.snapshot->policy, 3);
  pool.release(i);
  // The same policy object under another generation (a retired snapshot's
  // successor allocated at the same address) is a different policy.
  ASSERT_EQ(pool.acquire(), i);
  pool.start(i, w.snapshot->policy, 4);
  EXPECT_EQ(pool.at(i).generation, 4u);
  EXPECT_EQ(full_cycle(pool, 6, kStep), 4u);
}

// Policy A (generation 3): /v1/models has a budget of one.
inline constexpr std::string_view kPolicyA = R"(sluice: 1
name: policy-a
service_ports: [80]
header_style: seed
after_answer: close
buckets:
  models: { rate: 1/min, burst: 1 }
rules:
  - name: models
    path: /v1/models
    key: client_ip
    bucket: models
refusal:
  status: 429
  body: 'slow down'
)";

// Policy B (generation 4): no rule for /v1/models, which is forwarded as is;
// another field set (it requires a header A does not know).
inline constexpr std::string_view kPolicyB = R"(sluice: 1
name: policy-b
service_ports: [80]
header_style: seed
after_answer: close
buckets:
  gone: { rate: 1000/min, burst: 1000 }
rules:
  - name: gone
    path: "/v0/*"
    require: [X-Tenant]
    key: client_ip
    bucket: gone
    answer: 404
refusal:
  status: 429
  body: 'slow down'
not_found:
  status: 404
  body: 'gone'
)";

// A snapshot of `text` compiled with the world's hasher, as a reload makes one.
std::unique_ptr<dataplane::PolicySnapshot> compiled_snapshot(const EngineWorld& w, std::string_view text,
                                                             uint64_t generation) {
  policy::LoadResult loaded = policy::load_policy_text(text, "reloaded.yaml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << e.to_string();
  std::vector<policy::PolicyError> errors;
  auto compiled = http::compile_http1_policy(*loaded.policy, *w.hasher, errors);
  for (const auto& e : errors) ADD_FAILURE() << e.to_string();
  auto s = std::make_unique<dataplane::PolicySnapshot>();
  s->policy = std::move(*compiled);
  for (uint16_t p : s->policy.source.service_ports) s->service_ports.set(p);
  s->generation = generation;
  return s;
}

// Three times the contexts the engine looks at per loop pass: a full cycle
// takes three passes.
dataplane::EngineConfig three_pass_config() {
  dataplane::EngineConfig c = EngineWorld::small_config();
  c.contexts = 3 * dataplane::FlowEngine::kContextsScannedPerPass;
  return c;
}
constexpr int kPassesPerCycle = 3;

uint64_t engine_cycle(EngineWorld& w, uint64_t pass_generation) {
  uint64_t reported = 0;
  for (int i = 0; i < kPassesPerCycle; ++i) reported = w.engine->policy_generation_in_use(pass_generation);
  return reported;
}

TEST(PolicySwap, AHeadSplitAcrossTheSwapIsDecidedByThePolicyItStartedUnder) {
  EngineWorld w(kPolicyA, three_pass_config());
  w.snapshot->generation = 3;
  std::unique_ptr<dataplane::PolicySnapshot> next = compiled_snapshot(w, kPolicyB, 4);
  EXPECT_EQ(engine_cycle(w, 3), 3u);

  Connection c(w);
  c.handshake();
  const uint32_t seq = c.client_seq_;
  ASSERT_EQ(c.data(kGet.substr(0, 20)).action, FrameAction::kDrop);  // held under A

  // The reload: every later segment comes with B.
  std::unique_ptr<dataplane::PolicySnapshot> retired = std::exchange(w.snapshot, std::move(next));
  EXPECT_EQ(engine_cycle(w, 4), 3u) << "the held head still needs A";

  const size_t before = w.sink.sent.size();
  const Fed rest = c.data(kGet.substr(20));
  // A admits it (B has no rule for the path and would forward it uncounted).
  ASSERT_TRUE(rest.forwarded());
  EXPECT_EQ(w.counters.admitted.get(), 1u);
  EXPECT_EQ(w.counters.forwarded.get(), 0u);
  EXPECT_EQ(w.counters.rules[0].admitted.get(), 1u);
  std::string at_origin;
  for (const SentSegment& s : sent_to(w, Side::kOrigin, before)) at_origin += s.payload();
  at_origin += rest.payload();
  EXPECT_EQ(at_origin, kGet);
  EXPECT_EQ(rest.view.seq, seq + 20);

  // Admitted, its response outstanding: the context is still held, but the
  // request is over on the client's side, so the context moved to B at its
  // end; a full cycle later the worker no longer needs A.
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size() - 1);
  EXPECT_EQ(w.engine->policy_generation_in_use(4), 3u);  // a partial cycle reports the last full one
  EXPECT_EQ(w.engine->policy_generation_in_use(4), 3u);
  EXPECT_EQ(w.engine->policy_generation_in_use(4), 4u);

  // The response ends the request: the context goes back to the pool.
  ASSERT_TRUE(c.respond(kOk).forwarded());
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());
  EXPECT_EQ(engine_cycle(w, 4), 4u);
  // What collect(4) then does: A is freed. Nothing may touch it from here
  // (the context that held it is the one the next request gets back; under
  // ASan a stray read of A fails this test).
  retired.reset();

  // The next request on the keep-alive connection takes a fresh context,
  // started under B: forwarded as B says (under A, whose budget of one is
  // spent, it would be refused).
  const Fed second = c.data(kGet);
  EXPECT_TRUE(second.forwarded());
  EXPECT_EQ(second.payload(), kGet);
  EXPECT_EQ(w.counters.forwarded.get(), 1u);
  EXPECT_EQ(w.counters.refused.get(), 0u);
  EXPECT_EQ(w.counters.admitted.get(), 1u);
  EXPECT_EQ(engine_cycle(w, 4), 4u);
}

TEST(PolicySwap, ASplitHeadRefusedByItsPolicyIsRefusedAfterTheSwap) {
  EngineWorld w(kPolicyA, three_pass_config());
  w.snapshot->generation = 3;
  std::unique_ptr<dataplane::PolicySnapshot> next = compiled_snapshot(w, kPolicyB, 4);
  {
    Connection spend(w, false, 41000);  // A's budget of one, spent
    spend.handshake();
    ASSERT_TRUE(spend.data(kGet).forwarded());
    ASSERT_TRUE(spend.respond(kOk).forwarded());
  }
  Connection c(w);
  c.handshake();
  const uint32_t request_seq = c.client_seq_;
  ASSERT_EQ(c.data(kGet.substr(0, 30)).action, FrameAction::kDrop);
  const std::unique_ptr<dataplane::PolicySnapshot> retired = std::exchange(w.snapshot, std::move(next));
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(c.data(kGet.substr(30)).action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.forwarded.get(), 0u);
  const auto to_client = sent_to(w, Side::kClient, before);
  ASSERT_EQ(to_client.size(), 1u);
  EXPECT_EQ(to_client[0].payload().rfind("HTTP/1.1 429 ", 0), 0u) << to_client[0].payload();
  // None of the refused request reached the origin: only the RST.
  const auto to_origin = sent_to(w, Side::kOrigin, before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, request_seq);
  // The answer went out and the context with it: A is no longer needed.
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());
  EXPECT_EQ(engine_cycle(w, 4), 4u);
}

// A request pipelined behind one still unanswered starts a new message of
// the same context: between the two, the context moves to the current policy
// (its response stream kept), so pipelining neither keeps a client on a
// replaced policy nor keeps that policy alive.
TEST(PolicySwap, APipelinedRequestAfterAReloadIsDecidedByTheNewPolicy) {
  EngineWorld w(kPolicyA, three_pass_config());
  w.snapshot->generation = 3;
  std::unique_ptr<dataplane::PolicySnapshot> next = compiled_snapshot(w, kPolicyB, 4);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());  // admitted under A, its response outstanding
  const std::unique_ptr<dataplane::PolicySnapshot> retired = std::exchange(w.snapshot, std::move(next));
  EXPECT_TRUE(c.data(kGet).forwarded());  // B: no rule for it (A would refuse: over its budget of one)
  EXPECT_EQ(w.counters.refused.get(), 0u);
  EXPECT_EQ(w.counters.forwarded.get(), 1u);
  EXPECT_EQ(engine_cycle(w, 4), 4u);  // nothing in flight refers to A any more
  // Both responses still reach the client, in order.
  ASSERT_TRUE(c.respond(kOk).forwarded());
  ASSERT_TRUE(c.respond(kOk).forwarded());
}

}  // namespace
}  // namespace sluice::test
