// The templates answers and rate-limit fields are rendered from: numbers of
// every length written exactly, with room to spare (written unchecked) and
// with just enough (checked piece by piece), a buffer
// too small refused rather than overrun, an answer that keeps the
// connection open says nothing of closing, and a refusal framed at load
// writes the same bytes as the three templates it joins.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
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

// What the general path writes: the head, the style's fields, the tail.
std::string general(const ResponseTemplate& t, HeaderStyle style, const TemplateValues& v, bool keep_alive) {
  std::array<char, 1024> fields{};
  const size_t n = ratelimit_fields(style).render(v, fields, 0);
  const std::string_view f(fields.data(), n);
  std::array<char, 2048> out{};
  return std::string(out.data(), t.render(v, std::span<const std::string_view>(&f, 1), out, keep_alive));
}

TEST(FramedAnswer, WritesWhatTheHeadFieldsAndTailWriteForEveryStyleAndValue) {
  ResponseSpec spec;
  spec.status = 429;
  // Every placeholder, the bound ones too, in the policy's own fields.
  spec.headers = {{"Retry-After", "{retry_after}"},
                  {"X-Quota", "{limit} per {window} s in {policy}, {remaining} left, {reset} s"},
                  {"X-Trace", "{trace_id} for {origin}"}};
  spec.body = R"({"error":"rate_limited"})";
  const auto t = ResponseTemplate::compile(spec, nullptr);
  ASSERT_TRUE(t.has_value());
  std::mt19937_64 rng(5);
  for (HeaderStyle style : {HeaderStyle::kSeed, HeaderStyle::kIetf, HeaderStyle::kNone}) {
    for (int round = 0; round < 200; ++round) {
      const uint32_t limit = static_cast<uint32_t>(rng() >> (32 + rng() % 32));
      const uint32_t window = static_cast<uint32_t>(1 + rng() % 86400);
      const std::string name = "bucket-" + std::to_string(round);
      const FramedAnswer framed(*t, style, limit, window, name);
      TemplateValues v;
      v.limit = limit;
      v.window = window;
      v.policy = name;
      v.retry_after = static_cast<uint32_t>(rng() >> (32 + rng() % 32));
      v.remaining = static_cast<uint32_t>(rng() >> (32 + rng() % 32));
      v.reset = static_cast<uint32_t>(rng() >> (32 + rng() % 32));
      v.trace_id = rng();
      v.origin = round % 2 ? "https://app.example" : "";
      ASSERT_TRUE(framed.fits(style, v));
      for (bool keep_alive : {false, true}) {
        const std::string want = general(*t, style, v, keep_alive);
        std::array<char, 2048> out{};
        const size_t n = framed.render(v, out, keep_alive);
        ASSERT_EQ(std::string(out.data(), n), want) << "style " << static_cast<int>(style) << " round " << round;
        // Exactly as long as the answer: still written (checked piece by
        // piece); a byte less: refused, nothing overrun.
        std::vector<char> exact(want.size() + 1, '#');
        EXPECT_EQ(framed.render(v, std::span<char>(exact.data(), want.size()), keep_alive), want.size());
        EXPECT_EQ(exact.back(), '#');
        EXPECT_EQ(framed.render(v, std::span<char>(exact.data(), want.size() - 1), keep_alive), 0u);
        EXPECT_EQ(exact.back(), '#');
      }
    }
  }
}

TEST(FramedAnswer, FitsOnlyTheValuesItWasFramedFor) {
  ResponseSpec spec;
  spec.status = 429;
  const auto t = ResponseTemplate::compile(spec, nullptr);
  ASSERT_TRUE(t.has_value());
  const FramedAnswer framed(*t, HeaderStyle::kSeed, 60, 60, "bare");
  TemplateValues v;
  v.limit = 60;
  v.window = 60;
  v.policy = "bare";
  EXPECT_TRUE(framed.fits(HeaderStyle::kSeed, v));
  EXPECT_FALSE(framed.fits(HeaderStyle::kIetf, v));
  TemplateValues run = v;
  run.limit = 30;  // a live run's own budget
  EXPECT_FALSE(framed.fits(HeaderStyle::kSeed, run));
  TemplateValues other = v;
  other.policy = "credential";  // an overflow bucket's refusal
  EXPECT_FALSE(framed.fits(HeaderStyle::kSeed, other));
  TemplateValues window = v;
  window.window = 3600;
  EXPECT_FALSE(framed.fits(HeaderStyle::kSeed, window));
}

}  // namespace
}  // namespace sluice::policy
