// Deadlines on the flow engine (policy `deadlines:`): a head that
// does not finish in time is answered 408 and its connection closed, a
// connection that never sends a request or sits idle is closed, a stalled
// body is cut; a client that is making progress, or waiting on its origin,
// is left alone. The sweep is the worker's: EngineWorld::sweep().
#include <gtest/gtest.h>

#include "flow_harness.h"

namespace sluice::test {
namespace {

using dataplane::FrameAction;
using dataplane::Side;
namespace flag = dataplane::tcp_flag;

constexpr time::Nanos kSecond = time::kNanosPerSecond;
constexpr std::string_view kGet = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";

// Generous budgets: only deadlines end connections here.

constexpr std::string_view kNoDeadlines = R"(sluice: 1
name: none
service_ports: [80]
deadlines: { head: 0s, body: 0s, keep_alive: 0s, response: 0s }
buckets:
  all: { rate: 1000/min, burst: 1000 }
rules:
  - name: all
    key: client_ip
    bucket: all
)";

std::string answer_text(const EngineWorld& w, size_t from) {
  std::string text;
  for (const SentSegment& s : sent_to(w, Side::kClient, from)) text += s.payload();
  return text;
}

TEST(Deadline, AHeadNotCompleteInTimeIsAnswered408AndClosed) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  const uint32_t head_start = c.client_seq_;
  // A slowloris: a byte of the head every 3 s; bytes do not renew a head's deadline.
  for (char ch : std::string_view("GET /v1/mod")) {
    ASSERT_EQ(c.data(std::string(1, ch)).action, FrameAction::kDrop);  // held, never forwarded
    w.now += 3 * kSecond / 11;
  }
  w.now += 6 * kSecond;  // 9 s after the head's first byte
  const size_t before = w.sink.sent.size();
  w.sweep();
  EXPECT_EQ(w.sink.sent.size(), before) << "nothing before the deadline";
  w.now += 2 * kSecond;
  w.sweep();
  const std::string answer = answer_text(w, before);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 408 ")) << answer;
  EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kFin, before));
  // The origin is reset where the head began: it never saw a byte of it.
  const std::vector<SentSegment> to_origin = sent_to(w, Side::kOrigin, before);
  ASSERT_EQ(to_origin.size(), 1u);
  EXPECT_TRUE(to_origin[0].view.has(flag::kRst));
  EXPECT_EQ(to_origin[0].view.seq, head_start);
  EXPECT_EQ(w.counters.deadline_head.get(), 1u);
  EXPECT_EQ(w.counters.requests.get(), 0u);
  EXPECT_EQ(w.engine->contexts().free_count(), w.engine->contexts().size()) << "the context went back";
}

TEST(Deadline, A408AfterAnOutstandingResponseWaitsForIt) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  ASSERT_EQ(c.data("GET /slow").action, FrameAction::kDrop);  // pipelined, held
  w.now += 11 * kSecond;
  const size_t before = w.sink.sent.size();
  w.sweep();
  EXPECT_EQ(w.counters.deadline_head.get(), 1u);
  EXPECT_TRUE(answer_text(w, before).empty()) << "the first request's response comes first";
  const Fed response = c.respond(kOk);
  ASSERT_TRUE(response.forwarded());
  EXPECT_TRUE(answer_text(w, response.sent_before).starts_with("HTTP/1.1 408 "));
}

TEST(Deadline, AConnectionWithoutARequestIsClosedAfterTheHeadDeadline) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  w.now += 5 * kSecond;
  ASSERT_TRUE(c.client(flag::kAck, "").forwarded());  // acknowledgements do not count
  w.now += 6 * kSecond;
  const size_t before = w.sink.sent.size();
  w.sweep();
  EXPECT_EQ(w.counters.deadline_first_head.get(), 1u);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kFin, before));
  EXPECT_TRUE(answer_text(w, before).empty());
  EXPECT_TRUE(sent_with(w, Side::kOrigin, flag::kRst, before));
  // The client's late request gets the FIN again, and never reaches the origin.
  const Fed late = c.data(kGet);
  EXPECT_EQ(late.action, FrameAction::kDrop);
  EXPECT_EQ(w.counters.requests.get(), 0u);
}

TEST(Deadline, AnIdleKeepAliveConnectionIsClosedAndOneInUseIsNot) {
  EngineWorld w(kWidePolicy);
  Connection idle(w, false, 40001);
  Connection busy(w, false, 40002);
  for (Connection* c : {&idle, &busy}) {
    c->handshake();
    ASSERT_TRUE(c->data(kGet).forwarded());
    ASSERT_TRUE(c->respond(kOk).forwarded());
  }
  for (int i = 0; i < 7; ++i) {
    w.now += 10 * kSecond;
    ASSERT_TRUE(busy.data(kGet).forwarded());
    ASSERT_TRUE(busy.respond(kOk).forwarded());
    ASSERT_TRUE(idle.client(flag::kAck, "").forwarded());  // keep-alive probes renew nothing
    w.sweep();
  }
  EXPECT_EQ(w.counters.deadline_keep_alive.get(), 0u) << "70 s idle: within keep_alive (75 s)";
  w.now += 6 * kSecond;
  const size_t before = w.sink.sent.size();
  w.sweep();
  EXPECT_EQ(w.counters.deadline_keep_alive.get(), 1u);
  EXPECT_TRUE(sent_with(w, Side::kClient, flag::kFin, before));
  EXPECT_TRUE(busy.data(kGet).forwarded()) << "the busy connection goes on";
  EXPECT_EQ(idle.data(kGet).action, FrameAction::kDrop);
}

TEST(Deadline, AStalledBodyIsCutAndAMovingOneIsNot) {
  EngineWorld w(kWidePolicy);
  Connection moving(w, false, 40001);
  Connection stalled(w, false, 40002);
  const std::string head = "POST /upload HTTP/1.1\r\nHost: api.example\r\nContent-Length: 100\r\n\r\n";
  for (Connection* c : {&moving, &stalled}) {
    c->handshake();
    ASSERT_TRUE(c->data(head).forwarded());
  }
  for (int i = 0; i < 4; ++i) {
    w.now += 20 * kSecond;  // a byte every 20 s: slow, but within body (30 s) each time
    ASSERT_TRUE(moving.data("x").forwarded());
    w.sweep();
  }
  EXPECT_EQ(w.counters.deadline_body.get(), 1u) << "the stalled body, 80 s without a byte";
  EXPECT_EQ(w.counters.deadline_head.get(), 0u);
  EXPECT_TRUE(moving.data("y").forwarded());
  EXPECT_EQ(stalled.data("z").action, FrameAction::kDrop);
}

// A response its client does not read (no acknowledgement of the origin's
// bytes) is cut, both ends reset, once nothing new was read for
// deadlines.response (60 s by default), counted from when the client last
// had nothing left to read: the wait for a slow origin does not count, and
// a client that reads slowly, but reads, keeps its connection.
TEST(Deadline, AResponseItsClientDoesNotReadIsCutAndASlowReaderIsNot) {
  EngineWorld w(kWidePolicy);
  Connection reader(w, false, 40001), holder(w, false, 40002);
  for (Connection* c : {&reader, &holder}) {
    c->handshake();
    ASSERT_TRUE(c->data(kGet).forwarded());
  }
  w.now += 100 * kSecond;  // the origin takes its time
  w.sweep();
  for (Connection* c : {&reader, &holder}) {
    ASSERT_TRUE(c->respond("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + std::string(100, 'a')).forwarded());
  }
  for (int i = 0; i < 4; ++i) {
    w.now += 40 * kSecond;  // reads every 40 s: slow, but within 60 s each time
    ASSERT_TRUE(reader.client(flag::kAck, "").forwarded());
    ASSERT_TRUE(reader.respond(std::string(100, 'b')).forwarded());
    w.sweep();
  }
  EXPECT_EQ(w.counters.deadline_response.get(), 1u) << "the holder, 160 s without reading";
  EXPECT_EQ(w.counters.deadline_keep_alive.get() + w.counters.deadline_body.get(), 0u);
  EXPECT_TRUE(reader.respond(std::string(100, 'c')).forwarded());
  EXPECT_EQ(holder.data(kGet).action, FrameAction::kDrop) << "reset: nothing more goes on";
}

TEST(Deadline, AClientWaitingOnASlowOriginIsLeftAlone) {
  EngineWorld w(kWidePolicy);
  Connection c(w);
  c.handshake();
  ASSERT_TRUE(c.data(kGet).forwarded());
  w.now += 300 * kSecond;  // the origin takes five minutes
  w.sweep();
  EXPECT_EQ(w.counters.deadline_keep_alive.get() + w.counters.deadline_head.get() + w.counters.deadline_body.get(),
            0u);
  EXPECT_TRUE(c.respond(kOk).forwarded());
}

TEST(Deadline, ZeroTurnsEachOff) {
  EngineWorld w(kNoDeadlines);
  Connection silent(w, false, 40001);
  Connection slow(w, false, 40002);
  silent.handshake();
  slow.handshake();
  ASSERT_EQ(slow.data("GET /v1").action, FrameAction::kDrop);
  w.now += 500 * kSecond;
  w.sweep();
  EXPECT_EQ(w.counters.deadline_first_head.get() + w.counters.deadline_head.get(), 0u);
  const Fed rest = slow.data(" HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_TRUE(rest.forwarded());
  EXPECT_EQ(w.counters.requests.get(), 1u);
}

}  // namespace
}  // namespace sluice::test
