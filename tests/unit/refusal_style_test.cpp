// Refusals as RFC 9457 problem details (`refusal: { style: problem }`): the
// rate-limit fields draft's quota-exceeded type, the exhausted budget named
// in violated-policies, the same bytes whether framed at load or written by
// the general path, and the loader's refusals of what cannot go together.
#include <gtest/gtest.h>

#include "limiter_harness.h"

namespace sluice::test {
namespace {

using limiter::Verdict;

constexpr const char* kGet = "GET /x HTTP/1.1\r\nHost: a";

std::string with_problem(std::string t) {
  const size_t at = t.find("\nrefusal:\n");
  EXPECT_NE(at, std::string::npos);
  t.resize(at + 1);  // the profile's own refusal is its last section
  return t + "refusal:\n  style: problem\n";
}

TEST(RefusalStyle, AProblemRefusalNamesTheExhaustedBudget) {
  Limiter l("default.yaml", [](std::string t) {
    return with_problem(patched(std::move(t), "rate: 120/min, burst: 60", "rate: 60/min, burst: 2"));
  });
  EXPECT_EQ(l.count_admitted(2, kGet), 2);
  const Result r = l.send(kGet);
  ASSERT_EQ(r.verdict(), Verdict::kRefuse);
  EXPECT_EQ(r.status(), 429);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_EQ(r.body(),
            R"({"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded",)"
            R"("status":429,"violated-policies":["per-client"]})");
  // The refusal framed at load writes what the general path writes.
  EXPECT_EQ(r.written[0], r.written_general[0]);
  EXPECT_EQ(r.written[1], r.written_general[1]);
  EXPECT_EQ(std::to_string(r.body().size()), r.header("Content-Length"));
}

TEST(RefusalStyle, ARuleMayHaveAProblemRefusalOfItsOwnStatus) {
  Limiter l("default.yaml", [](std::string t) {
    t = patched(std::move(t), "rate: 120/min, burst: 60", "rate: 60/min, burst: 1");
    return patched(std::move(t), "    bucket: per-client\n", "    bucket: per-client\n    refusal: { style: problem, status: 503 }\n");
  });
  EXPECT_EQ(l.count_admitted(1, kGet), 1);
  const Result r = l.send(kGet);
  EXPECT_EQ(r.status(), 503);
  EXPECT_NE(r.body().find(R"("status":503,)"), std::string::npos) << r.body();
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
}

TEST(RefusalStyle, TheLoaderRefusesWhatCannotGoTogether) {
  const std::string base = "sluice: 1\nbuckets:\n  b: { rate: 10/s }\nrules: []\n";
  auto first_error = [&](const std::string& tail) {
    const policy::LoadResult r = policy::load_policy_text(base + tail, "p.yaml");
    return r.errors.empty() ? std::string() : r.errors[0].message;
  };
  EXPECT_EQ(first_error("refusal: { style: problem, body: 'x' }\n"),
            "refusal: style: problem writes the body; give a body or the style, not both");
  EXPECT_EQ(first_error("refusal: { style: xml }\n"),
            "refusal style must be plain (the body as given) or problem (RFC 9457 problem details), not 'xml'");
  EXPECT_NE(first_error("unauthorized: { style: problem }\n").find("unknown key 'style'"), std::string::npos);
  EXPECT_EQ(first_error("refusal: { style: plain, body: 'x' }\n"), "");
}

}  // namespace
}  // namespace sluice::test
