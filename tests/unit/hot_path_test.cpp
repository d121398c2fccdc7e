// The hot path allocates nothing: a global operator new that counts calls
// checks parse + decide, and the answer or fields written in HTTP/1, over
// every profile's typical requests, admitted, refused and answered.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "limiter_harness.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The replacement operator new allocates with malloc, so free is the match
// (GCC sees only the new-expression at inlined call sites and warns).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace sluice::test {
namespace {

TEST(HotPath, ParsingAndDecidingAllocateNothing) {
  struct Case {
    const char* profile;
    std::string request;
    bool strictest = false;  // ambiguous_paths: strictest (the default refuses an ambiguous path with 400)
  };
  const std::vector<Case> cases = {
      {"three-budgets.yaml", "GET /v1/x HTTP/1.1\r\nHost: a\r\n\r\n"},
      {"three-budgets.yaml", "GET /v1/x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\nOrigin: https://o\r\n\r\n"},
      {"three-budgets.yaml", "POST /vrx/r1/v1/tap HTTP/1.1\r\nHost: a\r\n\r\n"},
      {"route-families.yaml", "GET /api/claims HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer u\r\n\r\n"},
      {"route-families.yaml", "GET /api/claims HTTP/1.1\r\nHost: a\r\n\r\n"},  // 401
      {"deployment-quotas.yaml", "POST /v1/c HTTP/1.1\r\nHost: a\r\nX-Pi-Deployment: gpt-4o-mini-eu-1\r\n\r\n"},
      {"default.yaml", "GET /a/./b/../c%2Fd HTTP/1.1\r\nHost: a\r\n\r\n"},
      {"default.yaml", "GET /a/./b/../c%2Fd HTTP/1.1\r\nHost: a\r\n\r\n", true},
  };
  for (const Case& c : cases) {
    Limiter l(c.profile, [&](std::string t) {
      return c.strictest ? patched(std::move(t), "after_answer: keep-alive", "ambiguous_paths: strictest") : t;
    });
    l.start_run("r1");
    l.add_user("Bearer u", 1);
    // Everything the data plane holds per worker is set up before the loop.
    std::vector<http::FieldLine> store(l.policy().stream.head.max_fields);
    std::vector<char> spill(l.policy().stream.head.max_head_bytes);
    http::HeadParser parser(l.policy().fields, l.policy().stream.head, store, spill);
    auto scratch = std::make_unique<limiter::DecisionScratch>();
    limiter::ConnectionFacts conn;
    conn.peer = *net::parse_ip("198.18.0.1");
    int refused = 0;
    char answer[http::kMaxAnswerBytes];
    char fields[512];
    size_t written = 0;
    const uint64_t before = g_allocations.load();
    ASSERT_GT(before, 0u) << "the counting operator new is not in use";
    for (int i = 0; i < 2000; ++i) {
      parser.reset();
      if (parser.feed(c.request).status != http::HeadStatus::kComplete) FAIL() << c.request;
      const limiter::Decision d =
          limiter::decide(l.policy(), l.state(), http::limiter_request(parser.head(), conn), kStart, *scratch);
      refused += d.verdict == limiter::Verdict::kRefuse;
      // And written in HTTP/1, as the data plane does: an answer, or the
      // fields an admitted response gets.
      const bool keep = http::answer_keeps_connection(l.policy(), parser.head());
      written += http::write_answer(l.policy(), d, keep, answer) + http::write_ratelimit_fields(d.fields, fields);
    }
    EXPECT_EQ(g_allocations.load() - before, 0u) << c.profile << ": " << c.request;
    (void)refused;
    (void)written;
  }
}

}  // namespace
}  // namespace sluice::test
