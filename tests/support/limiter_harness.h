// Test support: a limiter built from a shipped profile (config/*.yaml), a
// manual clock, and requests written as HTTP text, parsed by the real head
// parser and decided by the real decide(). What the seed rules are tested
// through.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <fstream>
#include <functional>
#include <sstream>

#include "http/head_parser.h"
#include "http/http1_policy.h"
#include "http/limiter_answer.h"
#include "http/limiter_request.h"
#include "limiter/credential.h"
#include "limiter/decide.h"
#include "net/ip_address.h"
#include "policy/policy_loader.h"

namespace sluice::test {

inline constexpr time::Nanos kSecond = time::kNanosPerSecond;
inline constexpr time::Nanos kMinute = time::kNanosPerMinute;
// 2027-01-15T08:00:00Z: a whole minute, so calendar windows start here.
inline constexpr time::Nanos kStart = 1'768'464'000ull * kSecond;

inline std::string config_path(const std::string& name) { return std::string(SLUICE_CONFIG_DIR) + "/" + name; }

inline const limiter::KeyHasher& test_hasher(uint8_t salt) {
  static std::array<std::unique_ptr<limiter::KeyHasher>, 2> hashers;
  auto& h = hashers[salt & 1];
  if (!h) {
    std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + salt);
    h = std::make_unique<limiter::KeyHasher>(secret);
  }
  return *h;
}

// A request and what the limiter made of it.
struct Result {
  limiter::Decision decision;
  std::string response;  // the answer as the data plane writes it in HTTP/1 (http::write_answer), if any
  std::string fields;    // an admission's rate-limit fields, as field lines
  bool keep_alive = false;  // the answer leaves the connection open (http::answer_keeps_connection)
  // The answer for each ending (closing, kept open), written while the
  // request's bytes (an Origin the answer quotes) are alive: as the data
  // plane writes it, and through the general path with no framed refusal.
  std::string written[2], written_general[2];

  [[nodiscard]] limiter::Verdict verdict() const { return decision.verdict; }
  [[nodiscard]] uint16_t status() const { return decision.status; }
  // A header of the response (or, for an admission, of the added fields); empty if absent.
  [[nodiscard]] std::string header(std::string_view name) const {
    const std::string& text = response.empty() ? fields : response;
    std::string lower_name(name);
    for (char& c : lower_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t eol = text.find("\r\n", pos);
      if (eol == std::string::npos || eol == pos) break;
      const std::string line = text.substr(pos, eol - pos);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string n = line.substr(0, colon);
        for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (n == lower_name) {
          size_t v = colon + 1;
          while (v < line.size() && line[v] == ' ') ++v;
          return line.substr(v);
        }
      }
      pos = eol + 2;
    }
    return {};
  }
  [[nodiscard]] bool has_header(std::string_view name) const {
    const std::string& text = response.empty() ? fields : response;
    std::string needle = "\r\n" + std::string(name) + ":";
    return ("\r\n" + text).find(needle) != std::string::npos;
  }
  [[nodiscard]] std::string body() const {
    const size_t p = response.find("\r\n\r\n");
    return p == std::string::npos ? std::string() : response.substr(p + 4);
  }
};

inline std::string read_config(const std::string& name) {
  std::ifstream f(config_path(name), std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Replaces `from` (which must occur) by `to` in a profile's text.
inline std::string patched(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "patch target not found: " << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

class Limiter {
 public:
  // A shipped profile (config/NAME), optionally with its text rewritten.
  explicit Limiter(const std::string& profile, const std::function<std::string(std::string)>& patch = nullptr,
                   size_t capacity = 1 << 16) {
    std::string text = read_config(profile);
    if (patch) text = patch(std::move(text));
    load(text, profile, capacity);
  }

  void load(const std::string& text, const std::string& name, size_t capacity) {
    auto loaded = policy::load_policy_text(text, name);
    for (const auto& e : loaded.errors) ADD_FAILURE() << e.to_string();
    ASSERT_TRUE(loaded.policy);
    std::vector<policy::PolicyError> errors;
    auto compiled = http::compile_http1_policy(*loaded.policy, test_hasher(2), errors);
    for (const auto& e : errors) ADD_FAILURE() << e.to_string();
    ASSERT_TRUE(compiled);
    policy_ = std::make_unique<http::Http1Policy>(std::move(*compiled));
    buckets_ = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = capacity, .regions = 4, .max_probe = 64,
        .bucket_kinds = static_cast<uint16_t>(policy_->buckets.size()), .words = 2});
    records_ = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 1 << 12, .regions = 4, .max_probe = 64, .bucket_kinds = 1,
        .words = std::max(2u, policy_->max_slots)});
    state_ = std::make_unique<limiter::LimiterState>(limiter::LimiterState{
        *buckets_, *records_, runs_, users_, test_hasher(1), test_hasher(2)});
  }

  http::Http1Policy& policy() { return *policy_; }
  limiter::BucketTable& buckets() { return *buckets_; }
  limiter::BucketTable& records() { return *records_; }
  limiter::LimiterState& state() { return *state_; }

  // Sends `head` (request line and fields, without the final CRLF) from
  // `peer` at the current clock.
  Result send(const std::string& head, const std::string& peer = "198.18.0.10") {
    if (!policy_) {
      ADD_FAILURE() << "no policy loaded";
      return {};
    }
    const std::string text = head + "\r\n\r\n";
    std::vector<http::FieldLine> store(policy_->stream.head.max_fields);
    std::vector<char> spill(policy_->stream.head.max_head_bytes);
    http::HeadParser parser(policy_->fields, policy_->stream.head, store, spill);
    const http::FeedResult r = parser.feed(text);
    Result out;
    if (r.status != http::HeadStatus::kComplete) {
      EXPECT_EQ(r.status, http::HeadStatus::kError) << "incomplete head: " << head;
      out.decision = http::answer_parse_error(*policy_, r.error);
    } else {
      limiter::ConnectionFacts conn;
      conn.peer = *net::parse_ip(peer);
      conn.destination = *net::parse_ip("198.19.0.1");
      conn.destination_port = 80;
      out.decision = limiter::decide(*policy_, *state_, http::limiter_request(parser.head(), conn), now, *scratch_);
      out.keep_alive = out.decision.answer.response != nullptr && http::answer_keeps_connection(*policy_, parser.head());
    }
    out.response = written(out.decision, out.keep_alive);
    limiter::Decision general = out.decision;
    general.answer.framed = nullptr;
    for (bool keep_alive : {false, true}) {
      out.written[keep_alive] = written(out.decision, keep_alive);
      out.written_general[keep_alive] = written(general, keep_alive);
    }
    char fields[512];
    const size_t n = out.decision.verdict == limiter::Verdict::kAdmit ? http::write_ratelimit_fields(out.decision.fields, fields) : 0;
    EXPECT_NE(n, SIZE_MAX) << "the admitted fields fit 512 bytes";
    out.fields = std::string(fields, n == SIZE_MAX ? 0 : n);
    return out;
  }

  // A decision's answer in HTTP/1, as the data plane writes it; empty if it
  // answers nothing.
  std::string written(const limiter::Decision& d, bool keep_alive) {
    char text[http::kMaxAnswerBytes];
    return std::string(text, http::write_answer(*policy_, d, keep_alive, text));
  }

  // Sends the same request `n` times; returns how many were admitted (or
  // otherwise not refused).
  int count_admitted(int n, const std::string& head, const std::string& peer = "198.18.0.10") {
    int admitted = 0;
    for (int i = 0; i < n; ++i) admitted += send(head, peer).verdict() != limiter::Verdict::kRefuse;
    return admitted;
  }

  void start_run(const std::string& token, uint64_t value = 0) {
    EXPECT_NE(runs_.put(digest(token), value), limiter::DigestMap::Put::kFull);
  }
  void end_run(const std::string& token) { runs_.erase(digest(token)); }
  void add_user(const std::string& authorization, uint64_t user) {
    char buf[4096];
    const std::string_view norm = limiter::normalize_credential(authorization, buf);
    EXPECT_NE(users_.put(digest(std::string(norm)), user), limiter::DigestMap::Put::kFull);
  }
  limiter::Digest digest(const std::string& s) const {
    return test_hasher(2).digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }

  time::Nanos now = kStart;
  limiter::DecisionScratch& scratch() { return *scratch_; }

 private:
  std::unique_ptr<http::Http1Policy> policy_;
  std::unique_ptr<limiter::BucketTable> buckets_, records_;
  limiter::DigestMap runs_{1024};
  limiter::DigestMap users_{1024};
  std::unique_ptr<limiter::LimiterState> state_;
  std::unique_ptr<limiter::DecisionScratch> scratch_ = std::make_unique<limiter::DecisionScratch>();
};

}  // namespace sluice::test
