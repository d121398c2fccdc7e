// The data plane's side of a rule's `concurrency`: a forwarded request
// holds its slot until its response ends, and a connection reset (or
// otherwise given up) with a request in flight gives its slot back.
#include <gtest/gtest.h>

#include "flow_harness.h"

namespace sluice::test {
namespace {

namespace flag = dataplane::tcp_flag;

constexpr std::string_view kOneAtATime = R"(sluice: 1
name: one-at-a-time
service_ports: [80]
header_style: ietf
buckets:
  plenty: { rate: 1000/min, burst: 1000 }
rules:
  - name: per-ip
    key: client_ip
    bucket: plenty
    concurrency: 1
)";

constexpr std::string_view kGet = "GET /a HTTP/1.1\r\nHost: o\r\n\r\n";
constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

TEST(InFlightRelease, AResponsesEndGivesTheSlotBack) {
  EngineWorld w(kOneAtATime);
  Connection a(w, false, 40001), b(w, false, 40002);
  a.handshake();
  b.handshake();
  ASSERT_FALSE(a.data(kGet).payload_withheld());
  EXPECT_TRUE(b.data(kGet).payload_withheld());  // the one slot is a's
  EXPECT_EQ(w.counters.in_flight_refused.get(), 1u);
  // Half of a's response: still in flight.
  EXPECT_TRUE(a.respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no").forwarded());
  EXPECT_TRUE(b.data(kGet).payload_withheld());
  EXPECT_TRUE(a.respond("k").forwarded());  // the end
  const Fed next = b.data(kGet);
  EXPECT_FALSE(next.payload_withheld());
  EXPECT_EQ(next.payload(), kGet);
}

TEST(InFlightRelease, AResetWithARequestInFlightGivesTheSlotBack) {
  EngineWorld w(kOneAtATime);
  Connection a(w, false, 40001), b(w, false, 40002);
  a.handshake();
  b.handshake();
  ASSERT_FALSE(a.data(kGet).payload_withheld());
  EXPECT_TRUE(b.data(kGet).payload_withheld());
  (void)a.client(flag::kRst | flag::kAck, "", a.client_seq_);  // the client gives up, exactly in sequence
  const Fed next = b.data(kGet);
  EXPECT_FALSE(next.payload_withheld());
  EXPECT_EQ(next.payload(), kGet);
}

}  // namespace
}  // namespace sluice::test
