// libFuzzer target for the head parser and the request stream, with
// differential properties: the outcome agrees with a plain byte-by-byte
// reading of the grammar (tests/support/reference_parser.h), the same bytes
// fed in one piece, byte by byte, or in random pieces give the same outcome,
// and every instruction set's build agrees with the scalar one. Any disagreement aborts, which libFuzzer reports
// as a crash with the input that caused it.
#include <cstdio>
#include <cstdlib>

#include "head_harness.h"
#include "net/proxy_header.h"
#include "reference_parser.h"

using namespace sluice;

namespace {

[[noreturn]] void disagree(const char* what, const test::HeadOutcome& a, const test::HeadOutcome& b) {
  std::fprintf(stderr, "disagreement (%s): %s vs %s\n", what, test::describe(a).c_str(), test::describe(b).c_str());
  std::abort();
}

void check_invariants(const test::HeadOutcome& o, size_t size) {
  if (o.status == http::HeadStatus::kComplete) {
    if (o.consumed > size || o.head_bytes != o.consumed || o.error != http::ParseError::kNone) std::abort();
  }
  if (o.status == http::HeadStatus::kError && http::status_for(o.error) == 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 20000) return 0;
  // The first byte picks the random cuts; the rest is the connection's bytes.
  const uint32_t seed = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);

  // Odd seeds run with tight limits, so the 431 paths meet every other path.
  static const http::HeadLimits tight{256, 8};
  const bool small = seed & 1;
  static test::HeadHarness scalar_default(http::Isa::kScalar), scalar_tight(http::Isa::kScalar, tight);
  test::HeadHarness& scalar = small ? scalar_tight : scalar_default;
  const test::HeadOutcome want = scalar.whole(in);
  check_invariants(want, in.size());
  if (const auto ref = test::reference_parse(in, small ? tight : http::HeadLimits{}); ref != want) {
    disagree("reference parser", want, ref);
  }
  if (const auto o = scalar.random_cuts(in, seed); o != want) disagree("scalar random cuts", o, want);
  if (in.size() <= 4096) {
    if (const auto o = scalar.bytewise(in); o != want) disagree("scalar byte by byte", o, want);
  }

  static test::HeadHarness sse42(http::Isa::kSse42), avx2(http::Isa::kAvx2), avx512(http::Isa::kAvx512);
  static test::HeadHarness sse42_tight(http::Isa::kSse42, tight), avx2_tight(http::Isa::kAvx2, tight),
      avx512_tight(http::Isa::kAvx512, tight);
  for (test::HeadHarness* h : small ? std::initializer_list<test::HeadHarness*>{&sse42_tight, &avx2_tight, &avx512_tight}
                                    : std::initializer_list<test::HeadHarness*>{&sse42, &avx2, &avx512}) {
    if (h->parser().isa() == http::Isa::kScalar) continue;  // not on this CPU
    if (const auto o = h->whole(in); o != want) disagree(to_string(h->parser().isa()).data(), o, want);
    if (const auto o = h->random_cuts(in, seed + 1); o != want) disagree("simd random cuts", o, want);
  }

  // The stream over the same bytes: pipelined requests, bodies, switches.
  http::StreamConfig config;
  config.allow_connect = seed & 2;
  config.allow_h2_prior_knowledge = seed & 4;
  const auto whole = test::run_stream(in, {}, config);
  std::vector<size_t> cuts;
  for (size_t i = 1, step = seed % 13 + 1; i < in.size(); i += step) cuts.push_back(i);
  if (test::run_stream(in, cuts, config) != whole) {
    std::fprintf(stderr, "stream disagreement with cuts every %u bytes\n", seed % 13 + 1);
    std::abort();
  }

  // The PROXY protocol header reader over the same bytes: a header it
  // takes fits the bytes and reads the same alone, and every shorter
  // beginning of it is incomplete, never anything else.
  const net::ProxyHeader ph = net::read_proxy_header({in.data(), in.size()});
  using PS = net::ProxyHeader::Status;
  if (ph.status == PS::kRelayed || ph.status == PS::kLocal) {
    if (ph.length == 0 || ph.length > in.size() || ph.length > net::kMaxProxyHeader) std::abort();
    const net::ProxyHeader alone = net::read_proxy_header({in.data(), ph.length});
    if (alone.status != ph.status || alone.length != ph.length || alone.source != ph.source) std::abort();
    for (size_t n = 1; n < ph.length; n += seed % 7 + 1) {
      if (net::read_proxy_header({in.data(), n}).status != PS::kIncomplete) std::abort();
    }
  }
  if (ph.status == PS::kIncomplete && in.size() > net::kMaxProxyHeader) std::abort();
  return 0;
}
