// The response path, whole conversations through the flow engine.
// TB16: an admitted response gets its request's RateLimit fields, inserted
// right after the status line, by rewriting the origin's segment; from then
// on the flow's origin sequence numbers are shifted towards the client and
// the client's acknowledgements back. DQ05: tokens the origin reports in a
// response are charged to the request's minute when the response ends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr std::string_view kGet = "GET /a HTTP/1.1\r\nHost: api\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
constexpr std::string_view kStatusLine = "HTTP/1.1 200 OK\r\n";

// The seed-style fields the small policy (2 a minute, burst 2) renders.
std::string fields(int remaining) {
  return "RateLimit-Limit: 2\r\nRateLimit-Remaining: " + std::to_string(remaining) +
         "\r\nRateLimit-Reset: " + std::to_string(30 * (2 - remaining)) + "\r\nRateLimit-Policy: 2;w=60\r\n";
}

std::string with_fields(std::string_view response, int remaining) {
  return std::string(kStatusLine) + fields(remaining) + std::string(response.substr(kStatusLine.size()));
}

TEST(FieldInsertion, TB16_AnAdmittedResponseGetsItsFieldsAfterTheStatusLine) {
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  const uint32_t response_seq = c.origin_seq_;
  const size_t before = w.sink.sent.size();
  const Fed r = c.respond(kOk);
  EXPECT_EQ(r.action, FrameAction::kDrop);  // written again, with the fields
  const auto out = sent_to(w, Side::kClient, before);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payload(), with_fields(kOk, 1));
  EXPECT_EQ(out[0].view.seq, response_seq);
  EXPECT_TRUE(out[0].view.has(flag::kPsh));
  EXPECT_EQ(out[0].view.ack, c.client_seq_);
  EXPECT_EQ(w.counters.fields_inserted.get(), 1u);
  const uint32_t n = static_cast<uint32_t>(fields(1).size());

  // The client acknowledges the edited stream; the origin hears of its own bytes.
  const Fed ack = c.client(flag::kAck, "", {}, response_seq + kOk.size() + n);
  ASSERT_TRUE(ack.forwarded());
  EXPECT_EQ(ack.view.ack, response_seq + kOk.size());
  // Every edit acknowledged, nothing outstanding: the context goes back.
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());

  // The next response on the connection follows the shifted stream and gets
  // its own values.
  ASSERT_TRUE(c.data(kGet).forwarded());
  const size_t before2 = w.sink.sent.size();
  const uint32_t second_seq = c.origin_seq_;
  EXPECT_EQ(c.respond(kOk).action, FrameAction::kDrop);
  const auto out2 = sent_to(w, Side::kClient, before2);
  ASSERT_EQ(out2.size(), 1u);
  EXPECT_EQ(out2[0].payload(), with_fields(kOk, 0));
  EXPECT_EQ(out2[0].view.seq, second_seq + n);
  const uint32_t n2 = static_cast<uint32_t>(fields(0).size());
  const Fed ack2 = c.client(flag::kAck, "", {}, second_seq + n + kOk.size() + n2);
  EXPECT_EQ(ack2.view.ack, second_seq + kOk.size());

  // A segment without an edit is shifted in place: a late 408 from the origin.
  const std::string_view late = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  const Fed f = c.respond(late);
  EXPECT_TRUE(f.forwarded());
  EXPECT_EQ(f.view.seq, second_seq + kOk.size() + n + n2);
  EXPECT_EQ(f.payload(), late);
}

TEST(FieldInsertion, ARetransmittedSegmentIsWrittenAgainTheSameWay) {
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  const uint32_t seq = c.origin_seq_;
  const size_t before = w.sink.sent.size();
  ASSERT_EQ(c.respond(kOk).action, FrameAction::kDrop);
  // Lost on the way to the client: the origin sends it again.
  ASSERT_EQ(c.origin(flag::kAck | flag::kPsh, kOk, seq).action, FrameAction::kDrop);
  const auto out = sent_to(w, Side::kClient, before);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].payload(), out[0].payload());
  EXPECT_EQ(out[1].view.seq, out[0].view.seq);
  EXPECT_EQ(w.counters.fields_inserted.get(), 1u);  // one edit, written twice
}

TEST(FieldInsertion, AnInsertionPastTheClientsMssIsSplit) {
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  w.snapshot->policy.syn_proxy = false;  // a client MSS under the SYN cookies' smallest (536)
  Connection c(w);
  c.handshake(100);  // with timestamps: 88 bytes of payload a segment
  ASSERT_TRUE(c.data(kGet).forwarded());
  const std::string body(40, 'b');
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + body;
  const uint32_t seq = c.origin_seq_;
  const size_t before = w.sink.sent.size();
  ASSERT_EQ(c.respond(response).action, FrameAction::kDrop);
  const auto out = sent_to(w, Side::kClient, before);
  ASSERT_GE(out.size(), 2u);
  std::string joined;
  uint32_t next = seq;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_LE(out[i].view.payload_len, 88u);
    EXPECT_EQ(out[i].view.seq, next);
    EXPECT_EQ(out[i].view.has(flag::kPsh), i + 1 == out.size()) << i;
    next += out[i].view.payload_len;
    joined += out[i].payload();
  }
  EXPECT_EQ(joined, with_fields(response, 1));
}

// The split's second half is lost: the client holds part of the inserted
// bytes and acknowledges no further; the origin, told it has its bytes up to
// the insertion, sends again from there, and that segment must carry the
// inserted bytes again or the client would wait for them for ever.
TEST(FieldInsertion, ARetransmissionFromTheInsertionPointCarriesTheInsertedBytesAgain) {
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  w.snapshot->policy.syn_proxy = false;  // a client MSS under the SYN cookies' smallest (536)
  Connection c(w);
  c.handshake(100);
  ASSERT_TRUE(c.data(kGet).forwarded());
  const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + std::string(40, 'b');
  const uint32_t seq = c.origin_seq_;
  const size_t before = w.sink.sent.size();
  ASSERT_EQ(c.respond(response).action, FrameAction::kDrop);
  const auto first = sent_to(w, Side::kClient, before);
  ASSERT_GE(first.size(), 2u);
  // Only the first piece arrived: its end is inside the inserted bytes.
  const uint32_t client_ack = first[0].view.seq + first[0].view.payload_len;
  const Fed ack = c.client(flag::kAck, "", {}, client_ack);
  const uint32_t at = seq + static_cast<uint32_t>(kStatusLine.size());
  EXPECT_EQ(ack.view.ack, at);  // the origin hears: everything before the insertion
  const size_t before2 = w.sink.sent.size();
  const std::string rest = response.substr(kStatusLine.size());
  ASSERT_EQ(c.origin(flag::kAck | flag::kPsh, rest, at).action, FrameAction::kDrop);
  const auto again = sent_to(w, Side::kClient, before2);
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(again[0].view.seq, at);  // the inserted bytes, from their first
  std::string joined;
  for (const SentSegment& sg : again) joined += sg.payload();
  EXPECT_EQ(joined, with_fields(response, 1).substr(kStatusLine.size()));
}

TEST(FieldInsertion, InterimResponsesAndPoliciesWithoutFieldsAreLeftAlone) {
  // DQ10-style: no fields, nothing edited.
  const std::string none = std::string(kSmallPolicy).replace(std::string(kSmallPolicy).find("header_style: seed"),
                                                               18, "header_style: none");
  EngineWorld quiet(none, EngineWorld::with_fields());
  Connection q(quiet);
  q.handshake();
  ASSERT_TRUE(q.data(kGet).forwarded());
  const Fed plain = q.respond(kOk);
  EXPECT_TRUE(plain.forwarded());
  EXPECT_EQ(plain.payload(), kOk);
  EXPECT_EQ(quiet.counters.fields_inserted.get(), 0u);

  // A 100 Continue first: the fields go into the final response only.
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  const Fed interim = c.respond("HTTP/1.1 100 Continue\r\n\r\n");
  EXPECT_TRUE(interim.forwarded());
  const size_t before = w.sink.sent.size();
  ASSERT_EQ(c.respond(kOk).action, FrameAction::kDrop);
  const auto out = sent_to(w, Side::kClient, before);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payload(), with_fields(kOk, 1));
}

TEST(FieldInsertion, TheAppliancesOwnAnswerFollowsTheShiftedStream) {
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  // Two admitted (the budget), each response with fields, then a refusal.
  uint32_t shift = 0;
  for (int remaining : {1, 0}) {
    ASSERT_TRUE(c.data(kGet).forwarded());
    ASSERT_EQ(c.respond(kOk).action, FrameAction::kDrop);
    shift += static_cast<uint32_t>(fields(remaining).size());
  }
  const uint32_t origin_next = c.origin_seq_;
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(c.data(kGet).action, FrameAction::kDrop);
  const auto out = sent_to(w, Side::kClient, before);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].payload().rfind("HTTP/1.1 429 ", 0), 0u);
  EXPECT_EQ(out[0].view.seq, origin_next + shift);  // right after what the client has
}

// What reached the client, segment by segment (forwarded or the engine's).
struct ToClient {
  uint32_t seq, ack;
  uint8_t flags;
  std::string payload;
  bool operator==(const ToClient&) const = default;
};

// One conversation with fields and a kept-open answer: responses, a
// retransmission, a response past a small MSS, a pipelined refusal.
std::vector<ToClient> conversation(uint32_t frame_room, uint16_t mss, int& grown) {
  std::string policy(kSmallPolicy);
  const std::string close = "after_answer: close";
  policy.replace(policy.find(close), close.size(), "after_answer: keep-alive");
  EngineWorld w(policy, EngineWorld::with_fields());
  w.frame_room = frame_room;
  if (mss < 536) w.snapshot->policy.syn_proxy = false;  // under the SYN cookies' smallest MSS
  Connection c(w);
  c.handshake(mss);
  std::vector<ToClient> out;
  grown = 0;
  auto record = [&](const Fed& f) {
    if (f.forwarded() && f.view.payload_len != 0) {
      grown += f.payload().find("RateLimit-Limit") != std::string::npos ? 1 : 0;
      out.push_back({f.view.seq, f.view.ack, f.view.flags, f.payload()});
    }
    for (size_t i = f.sent_before; i < w.sink.sent.size(); ++i) {
      const SentSegment& seg = w.sink.sent[i];
      if (seg.to == Side::kClient) out.push_back({seg.view.seq, seg.view.ack, seg.view.flags, seg.payload()});
    }
  };
  record(c.data(kGet));
  const uint32_t first = c.origin_seq_;
  record(c.respond(kOk));
  record(c.origin(flag::kAck | flag::kPsh, kOk, first));  // retransmitted
  const uint32_t n = static_cast<uint32_t>(fields(1).size());
  record(c.client(flag::kAck, "", {}, c.origin_seq_ + n));
  record(c.data(std::string(kGet) + std::string(kGet)));  // the budget's last, then a refusal
  record(c.respond(kOk));
  return out;
}

// Growing the origin's segment in place (ServiceFrame::room) sends the
// client exactly what writing it again does: the same bytes, sequence and
// acknowledgement numbers and flags, segment by segment; past the client's
// MSS (100 here) the segment is still written again, cut in two.
TEST(FieldInsertion, GrowingInPlaceSendsWhatWritingAgainSends) {
  for (const uint16_t mss : {uint16_t{1460}, uint16_t{100}}) {
    int in_place = 0;
    const std::vector<ToClient> rewritten = conversation(0, mss, in_place);
    EXPECT_EQ(in_place, 0);
    const std::vector<ToClient> grown = conversation(2048, mss, in_place);
    EXPECT_EQ(in_place, mss == 1460 ? 3 : 0) << "MSS " << mss;  // both responses and the retransmission
    ASSERT_FALSE(rewritten.empty());
    EXPECT_TRUE(grown == rewritten) << "MSS " << mss;
    bool answered = false;
    for (const ToClient& t : grown) answered = answered || t.payload.find("HTTP/1.1 429 ") != std::string::npos;
    EXPECT_TRUE(answered) << "MSS " << mss;
  }
}

// Between requests a flow keeps the fields its client has not acknowledged
// in a small hold, not its parse context; a retransmission then is written
// again the same way, and the client's acknowledgement frees the hold. With
// no hold free, the context stays instead: the same bytes either way.
TEST(FieldInsertion, BetweenRequestsUnacknowledgedFieldsWaitInAHoldNotAContext) {
  for (const size_t holds : {size_t{8}, size_t{0}}) {
    dataplane::EngineConfig config = EngineWorld::with_fields();
    config.edit_holds = holds;
    EngineWorld w(kSmallPolicy, config);
    Connection c(w);
    c.handshake();
    ASSERT_TRUE(c.data(kGet).forwarded());
    const uint32_t seq = c.origin_seq_;
    const size_t before = w.sink.sent.size();
    ASSERT_EQ(c.respond(kOk).action, FrameAction::kDrop);
    const auto first = sent_to(w, Side::kClient, before);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].payload(), with_fields(kOk, 1));
    const size_t contexts_free = holds != 0 ? w.engine->contexts().size() : w.engine->contexts().size() - 1;
    EXPECT_EQ(w.engine->contexts().free_count(), contexts_free) << holds << " holds";
    EXPECT_EQ(w.engine->holds().free_count(), holds != 0 ? holds - 1 : 0u);
    // The response again (its ACK lost): the same bytes at the same place.
    const size_t again_at = w.sink.sent.size();
    ASSERT_EQ(c.origin(flag::kAck | flag::kPsh, kOk, seq).action, FrameAction::kDrop);
    const auto again = sent_to(w, Side::kClient, again_at);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].payload(), first[0].payload());
    EXPECT_EQ(again[0].view.seq, first[0].view.seq);
    EXPECT_EQ(w.engine->contexts().free_count(), contexts_free);
    // Acknowledged: nothing held.
    ASSERT_TRUE(c.client(flag::kAck, "", {}, seq + static_cast<uint32_t>(first[0].payload().size())).forwarded());
    EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size());
    EXPECT_EQ(w.engine->holds().free_count(), holds);
  }
}

constexpr std::string_view kQuotaPolicy = R"(sluice: 1
name: quota
service_ports: [80]
header_style: none
usage:
  response_field: X-Pi-Usage-Tokens
buckets:
  deployment: { window: minute, requests: 100, tokens: 1000 }
rules:
  - name: deployment
    key: { header: X-Pi-Deployment }
    bucket: deployment
refusal:
  status: 429
  body: 'quota'
)";

constexpr std::string_view kDeploymentGet = "POST /v1/chat HTTP/1.1\r\nHost: api\r\nX-Pi-Deployment: d1\r\nContent-Length: 0\r\n\r\n";

// DQ05: under the quota the next request passes; a response reporting 1500
// tokens takes the minute past 1000, and the next request is refused (DQ07),
// while nothing was inserted into any response (DQ10) and the origin's own
// bytes pass unchanged.
TEST(ResponseUsage, DQ05_TokensReportedInAResponseAreChargedWhenItEnds) {
  EngineWorld w(kQuotaPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kDeploymentGet).forwarded());
  const std::string small = "HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 400\r\nContent-Length: 2\r\n\r\nok";
  const Fed first = c.respond(small);
  EXPECT_TRUE(first.forwarded());
  EXPECT_EQ(first.payload(), small);
  ASSERT_TRUE(c.data(kDeploymentGet).forwarded());  // 400 of 1000: admitted
  const std::string big = "HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 1100\r\nContent-Length: 2\r\n\r\nok";
  EXPECT_TRUE(c.respond(big).forwarded());
  EXPECT_EQ(w.counters.usage_reported.get(), 2u);
  EXPECT_TRUE(c.data(kDeploymentGet).payload_withheld());  // 1500 of 1000: refused
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.fields_inserted.get(), 0u);
}

// DQ05 from a chunked response's trailer, split across segments: charged
// when the response ends, not before.
TEST(ResponseUsage, DQ05_TokensInAChunkedTrailerAreChargedWhenTheResponseEnds) {
  EngineWorld w(kQuotaPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kDeploymentGet).forwarded());
  EXPECT_TRUE(c.respond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Pi-Usage-To").forwarded());
  EXPECT_EQ(w.counters.usage_reported.get(), 0u);
  EXPECT_TRUE(c.respond("kens: 1500\r\n\r\n").forwarded());
  EXPECT_EQ(w.counters.usage_reported.get(), 1u);
  EXPECT_TRUE(c.data(kDeploymentGet).payload_withheld());  // 1500 of 1000: refused
  EXPECT_EQ(w.counters.refused.get(), 1u);
}

// DQ09: the origin's own 429 passes through untouched, and its usage (none)
// charges nothing.
TEST(ResponseUsage, DQ09_AnOriginsOwn429PassesUntouched) {
  EngineWorld w(kQuotaPolicy, EngineWorld::with_fields());
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kDeploymentGet).forwarded());
  const std::string provider =
      "HTTP/1.1 429 Too Many Requests\r\nX-Pi-Provider: p\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\nno";
  const Fed f = c.respond(provider);
  EXPECT_TRUE(f.forwarded());
  EXPECT_EQ(f.payload(), provider);
  EXPECT_EQ(w.counters.usage_reported.get(), 0u);
  EXPECT_TRUE(c.data(kDeploymentGet).forwarded());
}

}  // namespace
}  // namespace sluice::test
