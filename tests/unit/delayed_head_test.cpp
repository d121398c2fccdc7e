// The data plane's side of a rule's delay: a head admitted late is held
// (acknowledged to the client, not a byte of it to the origin) until its
// time, then sent to the origin whole; nothing behind it goes first; a
// worker holds at most delay_slots at once, past which a request is
// refused as without delay; a flow reset meanwhile leaves nothing to send.
#include <gtest/gtest.h>

#include "flow_harness.h"

namespace sluice::test {
namespace {

namespace flag = dataplane::tcp_flag;
using dataplane::Side;

// One request every 500 ms per address, none back to back beyond the first;
// up to 3 waiting.
constexpr std::string_view kDelaying = R"(sluice: 1
name: delaying
service_ports: [80]
buckets:
  slow: { rate: 2/s, burst: 1 }
rules:
  - name: per-ip
    key: client_ip
    bucket: slow
    delay_max: 2s
    delay_per_key: 3
)";

constexpr std::string_view kGet = "GET /a HTTP/1.1\r\nHost: o\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
constexpr time::Nanos kMs = 1'000'000;

// Releases every delayed head due at w.now; how many went.
int release(EngineWorld& w) {
  int n = 0;
  while (w.engine->release_delayed(w.now, *w.out)) ++n;
  return n;
}

// The payload the engine wrote to the origin from its `from`-th segment on.
std::string to_origin(const EngineWorld& w, size_t from) {
  std::string s;
  for (const SentSegment& seg : sent_to(w, Side::kOrigin, from)) s += seg.payload();
  return s;
}

TEST(DelayedHead, IsHeldAcknowledgedAndSentWhenItsTimeComes) {
  EngineWorld w(kDelaying);
  Connection a(w, false, 40001), b(w, false, 40002);
  a.handshake();
  b.handshake();
  ASSERT_EQ(a.data(kGet).payload(), kGet);  // the one back to back
  const Fed held = b.data(kGet);
  EXPECT_TRUE(held.payload_withheld());
  EXPECT_EQ(w.counters.delayed.get(), 1u);
  EXPECT_EQ(w.counters.delay_us_total.get(), 500'000u);
  // The client is told its head arrived (in the origin's name).
  const std::vector<SentSegment> acks = sent_to(w, Side::kClient, held.sent_before);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].view.ack, b.client_seq_);
  // Not a byte before its time.
  const size_t before = w.sink.sent.size();
  w.now += 499 * kMs;
  EXPECT_EQ(release(w), 0);
  EXPECT_EQ(to_origin(w, before), "");
  w.now += kMs;
  EXPECT_EQ(release(w), 1);
  const std::vector<SentSegment> sent = sent_to(w, Side::kOrigin, before);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].payload(), kGet);
  EXPECT_EQ(sent[0].view.seq, b.client_seq_ - kGet.size());
  // Its response comes back as any other, and the flow goes on.
  EXPECT_TRUE(b.respond(kOk).forwarded());
  w.now += 500 * kMs;
  EXPECT_EQ(b.data(kGet).payload(), kGet);
}

TEST(DelayedHead, NothingBehindItGoesFirst) {
  EngineWorld w(kDelaying);
  Connection a(w, false, 40001);
  a.handshake();
  ASSERT_EQ(a.data(kGet).payload(), kGet);
  ASSERT_TRUE(a.respond(kOk).forwarded());
  // A pipelined pair: the first is delayed, so the second is cut off
  // unacknowledged (the client sends it again) and not judged.
  const std::string two = std::string(kGet) + std::string(kGet);
  const Fed f = a.client(flag::kAck | flag::kPsh, two);
  EXPECT_TRUE(f.payload_withheld());
  EXPECT_EQ(w.counters.requests.get(), 2u);
  const uint32_t second = a.client_seq_ - static_cast<uint32_t>(kGet.size());
  EXPECT_EQ(sent_to(w, Side::kClient, f.sent_before).back().view.ack, second);
  // Sent again while the first waits: dropped, still unjudged.
  const Fed again = a.client(flag::kAck | flag::kPsh, kGet, second);
  EXPECT_EQ(again.action, dataplane::FrameAction::kDrop);
  EXPECT_EQ(w.counters.requests.get(), 2u);
  // A FIN behind it too.
  EXPECT_EQ(a.client(flag::kAck | flag::kFin, "", second).action, dataplane::FrameAction::kDrop);
  w.now += 500 * kMs;
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(release(w), 1);
  EXPECT_EQ(to_origin(w, before), kGet);
  ASSERT_TRUE(a.respond(kOk).forwarded());
  // Now the second is judged: one interval later, it too waits.
  EXPECT_TRUE(a.client(flag::kAck | flag::kPsh, kGet, second).payload_withheld());
  EXPECT_EQ(w.counters.delayed.get(), 2u);
}

TEST(DelayedHead, AWorkerHoldsNoMoreThanItsSlots) {
  dataplane::EngineConfig c = EngineWorld::small_config();
  c.delay_slots = 1;
  EngineWorld w(kDelaying, c);
  Connection a(w, false, 40001), b(w, false, 40002), d(w, false, 40003);
  a.handshake();
  b.handshake();
  d.handshake();
  ASSERT_EQ(a.data(kGet).payload(), kGet);
  EXPECT_TRUE(b.data(kGet).payload_withheld());  // held: the one slot
  EXPECT_EQ(w.counters.delayed.get(), 1u);
  const Fed refused = d.data(kGet);
  EXPECT_TRUE(refused.payload_withheld());
  EXPECT_EQ(w.counters.refused.get(), 1u);
  EXPECT_EQ(w.counters.delay_full.get(), 1u);
  EXPECT_EQ(w.engine->delays().size(), 1u);
}

TEST(DelayedHead, AFlowResetWhileItWaitsSendsNothing) {
  EngineWorld w(kDelaying);
  Connection a(w, false, 40001);
  a.handshake();
  ASSERT_EQ(a.data(kGet).payload(), kGet);
  ASSERT_TRUE(a.respond(kOk).forwarded());
  EXPECT_TRUE(a.data(kGet).payload_withheld());
  (void)a.client(flag::kRst | flag::kAck, "", a.client_seq_);  // exactly in sequence
  w.now += 2000 * kMs;
  const size_t before = w.sink.sent.size();
  EXPECT_EQ(release(w), 1);  // taken out, stale
  EXPECT_EQ(to_origin(w, before), "");
  EXPECT_EQ(w.engine->delays().size(), 0u);
}

}  // namespace
}  // namespace sluice::test
