// The data plane's hot path allocates nothing: a global operator new counts
// calls made inside the flow engine while it tracks handshakes, parses and
// admits requests (whole and split), frames responses, builds refusals, and
// counts them per rule and in the busiest keys, inserts the rate-limit
// fields into admitted responses, and answers refusals on kept-open
// connections.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "flow_harness.h"

#include "counting_allocator.h"

namespace sluice::test {
namespace {

// Writes the engine's segments into one fixed buffer.
class FixedSink final : public dataplane::PacketSink {
 public:
  std::span<uint8_t> allocate(dataplane::Side, size_t len) noexcept override {
    return len <= sizeof buf_ ? std::span<uint8_t>(buf_, len) : std::span<uint8_t>();
  }
  void send(dataplane::Side, size_t) noexcept override { ++sent; }
  size_t sent = 0;

 private:
  uint8_t buf_[65536];
};

TEST(EngineHotPath, TrackingParsingAndAnsweringAllocateNothing) {
  {  // the counter is live
    g_counting = true;
    int* volatile p = new int(1);  // volatile: the allocation cannot be elided
    delete p;
    g_counting = false;
    ASSERT_EQ(g_allocations.exchange(0), 1u);
  }
  EngineWorld w;
  FixedSink sink;
  w.out = &sink;
  w.before_engine = [] { g_counting = true; };
  w.after_engine = [] { g_counting = false; };
  constexpr std::string_view get = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\nUser-Agent: curl/7.88.1\r\n\r\n";
  constexpr std::string_view ok = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
  for (uint16_t port = 40000; port < 40010; ++port) {
    Connection c(w, port % 2 == 0, port);
    c.handshake();
    c.data(get.substr(0, 20));  // a head split in two
    c.data(get.substr(20));
    c.respond(ok);
    c.data(get);                // whole; refused once the budget of two is spent
    c.respond(ok);
  }
  EXPECT_GT(w.counters.admitted.get(), 0u);
  EXPECT_GT(w.counters.refused.get(), 0u);
  EXPECT_GT(sink.sent, 0u);
  // Counted per rule, and every refusal recorded in the busiest keys.
  EXPECT_EQ(w.counters.rules[0].admitted.get(), w.counters.admitted.get());
  EXPECT_EQ(w.counters.rules[0].refused.get(), w.counters.refused.get());
  uint64_t busy = 0;
  for (const dataplane::BusyKeys::Entry& e : w.counters.busy.snapshot()) busy += e.count;
  EXPECT_EQ(busy, w.counters.refused.get() + w.counters.admitted.get() / 16 * 16);

  // Keep-alive admissions, enough for the busiest keys to sample some (one in 16).
  std::string roomy_policy(kSmallPolicy);
  const std::string small_budget = "rate: 2/min, burst: 2";
  roomy_policy.replace(roomy_policy.find(small_budget), small_budget.size(), "rate: 1000/min, burst: 1000");
  EngineWorld roomy(roomy_policy);
  roomy.out = &sink;
  roomy.before_engine = [] { g_counting = true; };
  roomy.after_engine = [] { g_counting = false; };
  Connection c(roomy, false, 41000);
  c.handshake();
  for (int i = 0; i < 40; ++i) {
    c.data(get);
    c.respond(ok);
  }
  EXPECT_EQ(roomy.counters.rules[0].admitted.get(), 40u);
  const std::vector<dataplane::BusyKeys::Entry> sampled = roomy.counters.busy.snapshot();
  ASSERT_EQ(sampled.size(), 1u);
  EXPECT_EQ(sampled[0].count, 32u);

  EXPECT_EQ(g_allocations.load(), 0u);
}

// Inserting the fields into admitted responses, shifting the rest of
// the flow, splitting past the MSS and rewriting acknowledgements allocate
// nothing either.
TEST(EngineHotPath, InsertingFieldsAllocatesNothing) {
  g_allocations = 0;
  EngineWorld w(kSmallPolicy, EngineWorld::with_fields());
  FixedSink sink;
  w.out = &sink;
  w.before_engine = [] { g_counting = true; };
  w.after_engine = [] { g_counting = false; };
  constexpr std::string_view get = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 60\r\n\r\n" + std::string(60, 'x');
  for (uint16_t port = 42000; port < 42006; ++port) {
    Connection c(w, port % 2 == 0, port);
    c.handshake(port % 3 == 0 ? 100 : 1460);  // some split past the MSS
    c.data(get);
    const uint32_t seq = c.origin_seq_;
    c.respond(ok);
    c.origin(dataplane::tcp_flag::kAck | dataplane::tcp_flag::kPsh, ok, seq);  // retransmitted: written again
    c.client(dataplane::tcp_flag::kAck, "", {}, seq + static_cast<uint32_t>(ok.size()) + 200);
    c.data(get);
    c.respond(ok);
  }
  EXPECT_GT(w.counters.fields_inserted.get(), 0u);
  EXPECT_EQ(g_allocations.load(), 0u);
}

// A refusal that keeps the connection open (the request cut out,
// the answer spliced in, sent again when the client sends the request again,
// the next request renumbered) allocates nothing.
TEST(EngineHotPath, KeptOpenAnswersAllocateNothing) {
  g_allocations = 0;
  std::string keep_policy(kSmallPolicy);
  const std::string close = "after_answer: close";
  keep_policy.replace(keep_policy.find(close), close.size(), "after_answer: keep-alive");
  EngineWorld w(keep_policy, EngineWorld::with_fields());
  FixedSink sink;
  w.out = &sink;
  w.before_engine = [] { g_counting = true; };
  w.after_engine = [] { g_counting = false; };
  constexpr std::string_view get = "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
  constexpr std::string_view ok = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
  constexpr std::string_view two =
      "GET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: api.example\r\n\r\n";
  for (uint16_t port = 43000; port < 43006; ++port) {
    Connection c(w, port % 2 == 0, port);
    c.handshake(port % 3 == 0 ? 100 : 1460);
    c.data(get);
    c.respond(ok);
    const uint32_t refused = c.client_seq_;
    c.data(two);  // the budget's last, then a refusal, pipelined
    c.respond(ok);  // the answer spliced in after it
    c.client(dataplane::tcp_flag::kAck | dataplane::tcp_flag::kPsh, two, refused);  // sent again
    c.client(dataplane::tcp_flag::kAck, "", {}, c.origin_seq_ + 2000);
    c.data(get);
  }
  EXPECT_GT(w.counters.answers_kept_open.get(), 0u);
  EXPECT_GT(w.counters.kept_answers_resent.get(), 0u);
  EXPECT_EQ(g_allocations.load(), 0u);
}

}  // namespace
}  // namespace sluice::test
