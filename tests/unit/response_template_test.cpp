// The templates answers and rate-limit fields are rendered from: numbers of
// every length written exactly, with room to spare (written unchecked) and
// with just enough (checked piece by piece), a buffer
// too small refused rather than overrun, and an answer that keeps the
// connection open says nothing of closing.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/response_template.h"

namespace sluice::policy {
namespace {

TEST(TextTemplate, NumbersOfEveryLengthAreWrittenExactly) {
  const auto t = TextTemplate::compile("L={limit};R={remaining};W={window}", nullptr);
  ASSERT_TRUE(t.has_value());
  std::vector<uint32_t> values = {0, 1, 42, 65535, 4294967295u};
  for (uint64_t p = 1; p <= 1000000000u; p *= 10) {  // either side of every power of ten
    for (const uint64_t v : {p - 1, p, p + 1, 2 * p, 9 * p}) {
      if (v <= 4294967295u) values.push_back(static_cast<uint32_t>(v));
    }
  }
  for (const uint32_t v : values) {
    TemplateValues tv;
    tv.limit = v;
    tv.remaining = v / 3;
    tv.window = 60;
    std::array<char, 128> out{};
    const size_t n = t->render(tv, out, 0);
    ASSERT_NE(n, SIZE_MAX) << v;
    const std::string want = "L=" + std::to_string(v) + ";R=" + std::to_string(v / 3) + ";W=60";
    EXPECT_EQ(std::string(out.data(), n), want) << v;
    // With exactly the room it needs (too little to skip the checks): the same.
    std::vector<char> exact(want.size());
    ASSERT_EQ(t->render(tv, exact, 0), want.size()) << v;
    EXPECT_EQ(std::string(exact.data(), exact.size()), want) << v;
  }
}

TEST(TextTemplate, AnOutputTooSmallIsRefusedNotOverrun) {
  const auto t = TextTemplate::compile("limit {limit}", nullptr);
  ASSERT_TRUE(t.has_value());
  TemplateValues tv;
  tv.limit = 12345;
  const std::string want = "limit 12345";
  for (size_t room = 0; room < want.size() + 4; ++room) {
    std::vector<char> out(room + 8, '#');  // guard bytes after the room given
    const size_t n = t->render(tv, std::span<char>(out.data(), room), 0);
    if (room < want.size()) {
      EXPECT_EQ(n, SIZE_MAX) << room;
    } else {
      ASSERT_EQ(n, want.size()) << room;
      EXPECT_EQ(std::string(out.data(), n), want);
    }
    for (size_t i = room; i < out.size(); ++i) ASSERT_EQ(out[i], '#') << "written past the room at " << i;
  }
}

TEST(ResponseTemplate, AKeptOpenAnswerSaysNothingOfClosing) {
  ResponseSpec spec;
  spec.status = 429;
  spec.headers = {{"Retry-After", "{retry_after}"}};
  spec.body = "slow down";
  const auto t = ResponseTemplate::compile(spec, nullptr);
  ASSERT_TRUE(t.has_value());
  TemplateValues tv;
  tv.retry_after = 7;
  std::array<char, 512> out{};
  const size_t closing = t->render(tv, {}, out, false);
  EXPECT_EQ(std::string(out.data(), closing),
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 9\r\nConnection: close\r\n\r\nslow down");
  const size_t open = t->render(tv, {}, out, true);
  EXPECT_EQ(std::string(out.data(), open),
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 9\r\n\r\nslow down");
}

}  // namespace
}  // namespace sluice::policy
