// Request heads exactly as real clients wrote them (tests/data/heads, see its
// README): each parses the same whole and cut at every byte, yields the
// fields the limiter needs, and frames its body so the stream ends exactly
// where the client's request ended.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "head_harness.h"
#include "reference_parser.h"

namespace sluice::http {
namespace {

std::string load(const std::string& name) {
  std::ifstream f(std::string(SLUICE_TEST_DATA_DIR) + "/heads/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Capture {
  const char* file;
  const char* method;
  const char* path;
  size_t head_bytes;  // 0: the whole file
  BodyKind body;
  bool authorization;
  bool origin;
};

const Capture kCaptures[] = {
    {"curl_get.http", "GET", "/v1/models", 0, BodyKind::kNone, false, false},
    {"curl_post_json.http", "POST", "/v1/chat/completions", 198, BodyKind::kLength, true, false},
    {"curl_chunked_post.http", "POST", "/v1/chat/completions", 158, BodyKind::kChunked, false, false},
    {"chromium_get.http", "GET", "/index.html", 0, BodyKind::kNone, false, false},
    {"chromium_get_cookie.http", "GET", "/dashboard", 0, BodyKind::kNone, false, false},
    {"chromium_preflight.http", "OPTIONS", "/v1/things", 0, BodyKind::kNone, false, true},
    {"chromium_fetch_cors.http", "GET", "/v1/things", 0, BodyKind::kNone, true, true},
    {"python_requests_get.http", "GET", "/v1/models", 0, BodyKind::kNone, false, false},
    {"python_requests_post.http", "POST", "/v1/chat/completions", 265, BodyKind::kLength, true, false},
    {"go_get.http", "GET", "/v1/models", 0, BodyKind::kNone, false, false},
    {"go_post.http", "POST", "/v1/chat/completions", 215, BodyKind::kLength, true, false},
    {"openai_sdk_post.http", "POST", "/v1/chat/completions", 561, BodyKind::kLength, true, false},
};

class RealClient : public ::testing::TestWithParam<Capture> {};

TEST_P(RealClient, ParsesTheSameInEveryCut) {
  const Capture& c = GetParam();
  const std::string bytes = load(c.file);
  ASSERT_FALSE(bytes.empty());
  const size_t head_bytes = c.head_bytes ? c.head_bytes : bytes.size();

  test::HeadHarness h;
  const test::HeadOutcome whole = h.whole(bytes);
  ASSERT_EQ(whole.status, HeadStatus::kComplete) << to_string(whole.error);
  EXPECT_EQ(whole.consumed, head_bytes);
  EXPECT_EQ(whole.method, c.method);
  EXPECT_EQ(whole.path, c.path);
  EXPECT_EQ(whole.body, static_cast<int>(c.body));
  EXPECT_EQ(whole.tracked[id_of(KnownField::kAuthorization)].second != 0, c.authorization);
  EXPECT_EQ(whole.tracked[id_of(KnownField::kOrigin)].second != 0, c.origin);
  EXPECT_EQ(whole.tracked[id_of(KnownField::kHost)].first.substr(0, 10), "127.0.0.1:");
  EXPECT_TRUE(whole.keep_alive);
  if (c.body == BodyKind::kLength) {
    EXPECT_EQ(whole.content_length, bytes.size() - head_bytes);
  }

  EXPECT_EQ(test::reference_parse(bytes), whole);
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    ASSERT_EQ(h.run(bytes, {cut}), whole) << "cut at " << cut;
  }
  EXPECT_EQ(h.bytewise(bytes), whole);
  for (uint32_t seed = 0; seed < 50; ++seed) ASSERT_EQ(h.random_cuts(bytes, seed), whole) << "seed " << seed;
}

TEST_P(RealClient, TheStreamEndsWhereTheRequestEnds) {
  const std::string bytes = load(GetParam().file);
  std::vector<size_t> every;
  for (size_t i = 1; i < bytes.size(); ++i) every.push_back(i);
  for (const auto& cuts : {std::vector<size_t>{}, every}) {
    const std::vector<test::StreamRecord> events = test::run_stream(bytes, cuts);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].event, StreamEvent::kHead);
    EXPECT_EQ(events[1].event, StreamEvent::kMessageEnd);
    EXPECT_EQ(events[1].offset, bytes.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Captures, RealClient, ::testing::ValuesIn(kCaptures),
                         [](const ::testing::TestParamInfo<Capture>& param) {
                           std::string name = param.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

TEST(RealClients, AllOfThemPipelinedOnOneConnection) {
  std::string all;
  for (const Capture& c : kCaptures) all += load(c.file);
  std::mt19937 rng(9112);
  for (int round = 0; round < 30; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < all.size(); ++i) {
      if (rng() % 40 == 0) cuts.push_back(i);
    }
    const std::vector<test::StreamRecord> events = test::run_stream(all, cuts);
    size_t heads = 0;
    for (const auto& e : events) heads += e.event == StreamEvent::kHead;
    ASSERT_EQ(heads, std::size(kCaptures));
    EXPECT_EQ(events.back().offset, all.size());
  }
}

}  // namespace
}  // namespace sluice::http
