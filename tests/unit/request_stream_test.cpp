// RequestStream: a connection's bytes cut into requests, with bodies skipped
// exactly, pipelining, and protocol switches.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "head_harness.h"
#include "http/request_stream.h"

namespace sluice::http {
namespace {

using test::run_stream;
using test::StreamRecord;

// The events of `in` fed whole, byte by byte and in random pieces must agree.
std::vector<StreamRecord> events_every_way(std::string_view in, const StreamConfig& config = {}) {
  const std::vector<StreamRecord> whole = run_stream(in, {}, config);
  std::vector<size_t> every;
  for (size_t i = 1; i < in.size(); ++i) every.push_back(i);
  EXPECT_EQ(run_stream(in, every, config), whole) << "byte by byte";
  std::mt19937 rng(static_cast<uint32_t>(in.size()));
  for (int round = 0; round < 20; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < in.size(); ++i) {
      if (rng() % 5 == 0) cuts.push_back(i);
    }
    EXPECT_EQ(run_stream(in, cuts, config), whole) << "random cuts, round " << round;
  }
  return whole;
}

std::vector<std::string> heads_of(const std::vector<StreamRecord>& events) {
  std::vector<std::string> out;
  for (const StreamRecord& e : events) {
    if (e.event == StreamEvent::kHead) out.push_back(e.request_line);
  }
  return out;
}

TEST(RequestStream, FindsEveryPipelinedRequest) {
  const std::string in =
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nGET /fake\r\n"
      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nGET\r\n0\r\n\r\n"
      "\r\n"  // a stray CRLF after a body, which clients send and servers ignore
      "DELETE /d?x=1 HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::vector<StreamRecord> events = events_every_way(in);
  EXPECT_EQ(heads_of(events), (std::vector<std::string>{"GET /a", "POST /b", "POST /c", "DELETE /d?x=1"}));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event, StreamEvent::kMessageEnd);
  EXPECT_EQ(events.back().offset, in.size());
}

TEST(RequestStream, ChunkedBodiesSplitAnywhere) {
  std::string body;
  for (int i = 1; i <= 40; ++i) {
    const int n = i % 9 + 1;
    body += std::to_string(n) + ";i=" + std::to_string(i) + "\r\n" + std::string(static_cast<size_t>(n), 'z') + "\r\n";
  }
  body += "0\r\nX-Usage-Tokens: 7\r\n\r\n";
  const std::string in = "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + body +
                         "GET /after HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::vector<StreamRecord> events = events_every_way(in);
  EXPECT_EQ(heads_of(events), (std::vector<std::string>{"POST /up", "GET /after"}));
}

TEST(RequestStream, ErrorsStopTheStream) {
  const std::string in = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost : h\r\n\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::vector<StreamRecord> events = events_every_way(in);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].event, StreamEvent::kError);
  EXPECT_EQ(events[2].error, ParseError::kWhitespaceBeforeColon);
}

TEST(RequestStream, BodyFramingErrorsStopTheStream) {
  const std::string in = "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n";
  const std::vector<StreamRecord> events = events_every_way(in);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].error, ParseError::kBadChunk);
}

TEST(RequestStream, UpgradeWaitsForTheOriginsAnswer) {
  const std::string in =
      "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
  const std::vector<StreamRecord> events = events_every_way(in + "\x81\x05hello");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].event, StreamEvent::kAwaitSwitch);
  EXPECT_EQ(events[2].offset, in.size());

  static const FieldSet fields;
  StreamConfig config;
  std::vector<FieldLine> store(100);
  std::vector<char> spill(16384);
  // Switched: everything after is bridged.
  RequestStream s(fields, config, store, spill);
  EXPECT_EQ(s.next(in).event, StreamEvent::kHead);
  EXPECT_EQ(s.next(std::string_view()).event, StreamEvent::kMessageEnd);
  EXPECT_EQ(s.next(std::string_view("\x81\x05hello")).event, StreamEvent::kAwaitSwitch);
  s.resolve_switch(true);
  EXPECT_EQ(s.next(std::string_view("GET / HTTP/1.1\r\n")).event, StreamEvent::kPassThrough);

  // Refused (the origin answered 200, not 101): the next request is parsed,
  // so an Upgrade header cannot be used to walk past the limiter.
  RequestStream r(fields, config, store, spill);
  EXPECT_EQ(r.next(in).event, StreamEvent::kHead);
  EXPECT_EQ(r.next(std::string_view()).event, StreamEvent::kMessageEnd);
  r.resolve_switch(false);
  const StreamStep next = r.next(std::string_view("GET /again HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(next.event, StreamEvent::kHead);
  EXPECT_EQ(r.head().path, "/again");
}

TEST(RequestStream, UpgradeCanBeDisallowed) {
  StreamConfig config;
  config.allow_upgrade = false;
  const std::vector<StreamRecord> events =
      events_every_way("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", config);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].error, ParseError::kUpgradeNotAllowed);
  EXPECT_EQ(status_for(ParseError::kUpgradeNotAllowed), 501);
}

TEST(RequestStream, UpgradeWithoutTheConnectionOptionIsAnOrdinaryRequest) {
  const std::vector<StreamRecord> events =
      events_every_way("GET /a HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(heads_of(events), (std::vector<std::string>{"GET /a", "GET /b"}));
}

TEST(RequestStream, ConnectIsRefusedUnlessAllowed) {
  const std::string in = "CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n";
  std::vector<StreamRecord> events = events_every_way(in);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].error, ParseError::kConnectNotAllowed);
  StreamConfig config;
  config.allow_connect = true;
  events = events_every_way(in + "\x16\x03\x01", config);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].event, StreamEvent::kAwaitSwitch);
}

TEST(RequestStream, Http2PriorKnowledge) {
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::vector<StreamRecord> events = events_every_way(preface);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].error, ParseError::kH2PriorKnowledgeNotAllowed);

  StreamConfig config;
  config.allow_h2_prior_knowledge = true;
  events = events_every_way(preface + "\x00\x00\x12\x04", config);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, StreamEvent::kPassThrough);
  EXPECT_EQ(events[0].offset, 24u);  // right after the whole preface, not its HTTP/1.1-shaped part

  // Only at the start of a connection.
  events = events_every_way("GET / HTTP/1.1\r\nHost: h\r\n\r\n" + preface, config);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].error, ParseError::kUnsupportedVersion);
}

// "PRI * HTTP/2.0\r\n\r\n" alone is not the HTTP/2 preface. An
// origin that reads HTTP/1.1 answers it and reads on; switching to pass-through
// there let whatever followed reach it unjudged.
TEST(RequestStream, H2PriorKnowledgeSwitchesOnlyOnTheWholePreface) {
  StreamConfig config;
  config.allow_h2_prior_knowledge = true;
  const std::string head = "PRI * HTTP/2.0\r\n\r\n";

  // Not yet: the head alone, or with part of the tail, waits for more.
  for (const std::string& in : std::vector<std::string>{head, head + "S", head + "SM\r\n\r"}) {
    const std::vector<StreamRecord> events = events_every_way(in, config);
    EXPECT_TRUE(events.empty()) << in.size() << " bytes";
  }

  // Anything but the exact tail is a 400, and nothing after it is passed.
  for (const std::string& tail : std::vector<std::string>{"GET /admin HTTP/1.1\r\nHost: h\r\n\r\n", "SM\r\n\r\r",
                                                          "sm\r\n\r\n", "SM\n\r\n", "\r\n", "PRI * HTTP/2.0\r\n\r\n"}) {
    const std::vector<StreamRecord> events = events_every_way(head + tail, config);
    ASSERT_EQ(events.size(), 1u) << tail;
    EXPECT_EQ(events[0].event, StreamEvent::kError) << tail;
    EXPECT_EQ(events[0].error, ParseError::kBadH2Preface) << tail;
  }
  EXPECT_EQ(status_for(ParseError::kBadH2Preface), 400);
  EXPECT_EQ(to_string(ParseError::kBadH2Preface), "bad_h2_preface");

  // The whole preface switches, exactly after its 24th byte, however cut.
  const std::vector<StreamRecord> events = events_every_way(head + "SM\r\n\r\n", config);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, StreamEvent::kPassThrough);
  EXPECT_EQ(events[0].offset, 24u);

  // Where the policy does not allow HTTP/2, the head-shaped part is refused
  // as before (505), whatever follows.
  for (const std::string& tail : std::vector<std::string>{"", "SM\r\n\r\n", "GET / HTTP/1.1\r\n"}) {
    const std::vector<StreamRecord> refused = events_every_way(head + tail);
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].error, ParseError::kH2PriorKnowledgeNotAllowed);
  }
}

// A CONNECT with Content-Length or Transfer-Encoding is refused
// before its head is handed on, even where CONNECT is allowed.
TEST(RequestStream, ConnectWithContentIsRefused) {
  StreamConfig config;
  config.allow_connect = true;
  const std::string connect = "CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n";
  for (const std::string& framing :
       std::vector<std::string>{"Content-Length: 34\r\n", "Content-Length: 0\r\n", "Transfer-Encoding: chunked\r\n"}) {
    const std::vector<StreamRecord> events =
        events_every_way(connect + framing + "\r\nGET /admin HTTP/1.1\r\nHost: h\r\n\r\n", config);
    ASSERT_EQ(events.size(), 1u) << framing;
    EXPECT_EQ(events[0].event, StreamEvent::kError) << framing;
    EXPECT_EQ(events[0].error, ParseError::kConnectWithContent) << framing;
  }
}

TEST(RequestStream, CountsCompletedRequests) {
  static const FieldSet fields;
  StreamConfig config;
  std::vector<FieldLine> store(100);
  std::vector<char> spill(16384);
  RequestStream s(fields, config, store, spill);
  std::string_view in = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
  while (!in.empty()) {
    const StreamStep step = s.next(in);
    ASSERT_NE(step.event, StreamEvent::kError);
    in.remove_prefix(step.consumed);
  }
  (void)s.next(std::string_view());
  EXPECT_EQ(s.completed(), 2u);
}

}  // namespace
}  // namespace sluice::http

namespace sluice::http {
namespace {

// The data plane reuses a stream for many connections (reset) and feeds a
// split head again from a copy (restart_head).
TEST(RequestStream, ResetAndRestartHeadStartClean) {
  static const FieldSet fields;
  static const StreamConfig config;
  std::vector<FieldLine> store(config.head.max_fields);
  std::vector<char> spill(config.head.max_head_bytes);
  RequestStream s(fields, config, store, spill);
  const std::string body_req = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab";
  ASSERT_EQ(s.next(body_req).event, StreamEvent::kHead);
  EXPECT_FALSE(s.idle());
  s.reset();
  EXPECT_TRUE(s.idle());
  const std::string get = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
  const StreamStep partial = s.next(std::string_view(get).substr(0, 10));
  EXPECT_EQ(partial.event, StreamEvent::kNeedMore);
  EXPECT_TRUE(s.head_in_progress());
  s.restart_head();
  EXPECT_TRUE(s.idle());
  const StreamStep whole = s.next(get);
  ASSERT_EQ(whole.event, StreamEvent::kHead);
  EXPECT_EQ(s.head().target, "/b");
  EXPECT_EQ(s.next({}).event, StreamEvent::kMessageEnd);
  EXPECT_EQ(s.completed(), 1u);
}

}  // namespace
}  // namespace sluice::http
