// The SIMD kernels against the scalar one, byte value by byte value and
// position by position; the head parser's result on every instruction set
// against the scalar build; and the response's bulk field-line scan on every
// instruction set against a plain line-by-line reading of the same rules.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "head_harness.h"
#include "http/head_scan.h"
#include "http/response_scan.h"
#include "http/token_chars.h"

namespace sluice::http {
namespace {

bool same(const BlockMasks& a, const BlockMasks& b) {
  return a.lf == b.lf && a.cr == b.cr && a.ctl == b.ctl && a.nontchar == b.nontchar && a.nonvchar == b.nonvchar && a.qmark == b.qmark &&
         a.colon == b.colon;
}

TEST(BlockKernel, ScalarClassesFollowTheRfcGrammar) {
  alignas(64) char block[64];
  const std::string_view sample = "GET /a?b HTTP/1.1\r\nX-y: \t\x7f\x80\"(),/:;<=>@[\\]{}|~^_`!#$%&'*+-.";
  std::memset(block, 'a', 64);
  std::memcpy(block, sample.data(), sample.size());
  const BlockMasks m = classify_block_scalar(block);
  for (size_t i = 0; i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(block[i]);
    const uint64_t bit = uint64_t{1} << i;
    EXPECT_EQ((m.lf & bit) != 0, c == '\n') << i;
    EXPECT_EQ((m.cr & bit) != 0, c == '\r') << i;
    EXPECT_EQ((m.qmark & bit) != 0, c == '?') << i;
    EXPECT_EQ((m.colon & bit) != 0, c == ':') << i;
    EXPECT_EQ((m.ctl & bit) != 0, (c < 0x20 && c != '\t') || c == 0x7f) << i;
    EXPECT_EQ((m.nonvchar & bit) != 0, c <= 0x20 || c >= 0x7f) << i;
    const bool token = std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    EXPECT_EQ((m.nontchar & bit) == 0, token && c < 0x80) << "byte " << int(c);
  }
}

TEST(BlockKernel, EverySimdKernelMatchesScalarOnEveryByteAtEveryPosition) {
  alignas(64) char block[64];
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    for (int value = 0; value < 256; ++value) {
      for (int pos = 0; pos < 64; ++pos) {
        std::memset(block, 'x', 64);
        block[pos] = static_cast<char>(value);
        ASSERT_TRUE(same(classify_block(isa, block), classify_block_scalar(block)))
            << to_string(isa) << " byte " << value << " at " << pos;
      }
    }
  }
}

TEST(BlockKernel, EverySimdKernelMatchesScalarOnRandomBlocks) {
  std::mt19937 rng(2026);
  alignas(64) char block[64];
  for (int round = 0; round < 20000; ++round) {
    for (char& c : block) c = static_cast<char>(rng());
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      ASSERT_TRUE(same(classify_block(isa, block), classify_block_scalar(block))) << to_string(isa);
    }
  }
}

// Every instruction set parses the same inputs to the same outcome, also for
// inputs built to put rule breaks on 64-byte block boundaries.
TEST(BlockKernel, ParsersAgreeAcrossInstructionSets) {
  std::vector<std::string> inputs;
  const std::string base = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer k\r\n";
  for (size_t pad = 0; pad < 130; ++pad) {
    const std::string filler(pad, 'v');
    inputs.push_back(base + "X-Pad: " + filler + "\r\n\r\n");
    inputs.push_back(base + "X-Pad: " + filler + "\r\r\n\r\n");
    inputs.push_back(base + "X-Pad: " + filler + "\n\r\n");
    inputs.push_back(base + "X-Pad: " + filler + std::string(1, '\0') + "\r\n\r\n");
    inputs.push_back(base + "X-" + filler + " : v\r\n\r\n");
    inputs.push_back("GET /" + filler + "?q" + filler + " HTTP/1.1\r\nHost: h\r\n\r\n");
    inputs.push_back("GET /" + filler + "\x01 HTTP/1.1\r\nHost: h\r\n\r\n");
  }
  for (const std::string& in : inputs) {
    test::HeadHarness scalar(Isa::kScalar);
    const test::HeadOutcome want = scalar.whole(in);
    for (Isa isa : kAllIsas) {
      if (!isa_supported(isa)) continue;
      test::HeadHarness other(isa);
      ASSERT_EQ(other.whole(in), want) << to_string(isa) << ": " << test::describe(other.whole(in)) << " vs "
                                       << test::describe(want);
      ASSERT_EQ(other.random_cuts(in, static_cast<uint32_t>(in.size())), want) << to_string(isa);
    }
  }
}

TEST(BlockKernel, BestIsaIsSupportedAndRespectsTheOverride) {
  EXPECT_TRUE(isa_supported(best_isa()));
  EXPECT_TRUE(isa_supported(Isa::kScalar));
}


// The bulk field-line scan's rules, read line by line: a name of token bytes,
// ':', a value without control bytes but the CR of its CRLF.
FieldLineScan lines_one_by_one(std::string_view s, uint32_t max_bytes, uint32_t max_lines, uint64_t lengths) {
  FieldLineScan r;
  size_t line = 0;
  for (;;) {
    size_t colon = line;
    while (colon < s.size() && is_tchar(static_cast<unsigned char>(s[colon]))) ++colon;
    if (colon == line || colon >= s.size() || s[colon] != ':') return r;
    size_t cr = colon + 1;
    while (cr < s.size() && !is_ctl(static_cast<unsigned char>(s[cr]))) ++cr;
    if (cr + 1 >= s.size() || s[cr] != '\r' || s[cr + 1] != '\n') return r;
    const size_t end = cr + 2;
    if (r.lines == max_lines || end > max_bytes) return r;
    const size_t name = colon - line;
    if (name < 64 && ((lengths >> name) & 1) != 0) {
      if (r.candidates == FieldLineScan::kMaxCandidates) return r;
      r.candidate[r.candidates++] = {static_cast<uint32_t>(line), static_cast<uint32_t>(colon),
                                     static_cast<uint32_t>(cr), r.lines};
    }
    ++r.lines;
    r.bytes = static_cast<uint32_t>(end);
    line = end;
  }
}

std::string describe(const FieldLineScan& r) {
  std::string out = std::to_string(r.bytes) + " bytes, " + std::to_string(r.lines) + " lines, candidates";
  for (size_t k = 0; k < r.candidates; ++k) {
    const FieldLineScan::Candidate& c = r.candidate[k];
    out += " [" + std::to_string(c.line) + " " + std::to_string(c.colon) + " " + std::to_string(c.cr) + " #" +
           std::to_string(c.index) + "]";
  }
  return out;
}

// Every supported instruction set's scan of `in`, as described.
std::vector<std::pair<Isa, std::string>> scans(std::string_view in, uint32_t max_bytes, uint32_t max_lines,
                                               uint64_t lengths) {
  std::vector<std::pair<Isa, std::string>> out;
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    out.emplace_back(isa, describe(field_line_scan_for(isa)(in.data(), in.size(), max_bytes, max_lines, lengths)));
  }
  return out;
}

constexpr uint64_t kFramingLengths = uint64_t{1} << 10 | uint64_t{1} << 14 | uint64_t{1} << 17;

TEST(FieldLineScan, TakesAResponsesFieldLinesAndPointsAtTheFramingOnes) {
  // The second line's CRLF straddles the first block boundary (CR at 63).
  const std::string first = "Date: Mon, 30 Nov 2026 12:00:00 GMT\r\n";
  const std::string filler = "X-Pad: " + std::string(63 - first.size() - 7, 'p') + "\r\n";
  const std::string in = first + filler + "Content-Length: 17\r\nServer: t\r\nConnection: \tclose \r\n\r\n{}";
  ASSERT_EQ(first.size() + filler.size() - 2, 63u);
  const size_t cl = first.size() + filler.size();
  const size_t conn = cl + 20 + 11;
  const std::string expected = std::to_string(conn + 21) + " bytes, 5 lines, candidates [" + std::to_string(cl) +
                               " " + std::to_string(cl + 14) + " " + std::to_string(cl + 18) + " #2] [" +
                               std::to_string(conn) + " " + std::to_string(conn + 10) + " " +
                               std::to_string(conn + 19) + " #4]";
  for (const auto& [isa, got] : scans(in, 65536, 256, kFramingLengths)) EXPECT_EQ(got, expected) << to_string(isa);
}

TEST(FieldLineScan, StopsBeforeTheFirstLineItCannotTake) {
  const std::string good = "A: b\r\n";
  struct Case {
    std::string rest;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"\r\n", "the empty line"},
      {" folded: x\r\n", "obs-fold"},
      {"No colon\r\n", "a space in the name"},
      {": empty name\r\n", "an empty name"},
      {"Bare: lf\n", "an LF without its CR"},
      {"Lone: cr\rX\r\n", "a CR without its LF"},
      {"Ctl: a\x01b\r\n", "a control byte in the value"},
      {"Del: a\x7f\r\n", "DEL in the value"},
      {"Cut: in the midd", "the bytes end mid-line"},
      {"Cut: at the CR\r", "the bytes end at the CR"},
      {"\xc3\xa9: x\r\n", "a byte above 0x7f in the name"},
  };
  for (const Case& c : cases) {
    for (const auto& [isa, got] : scans(good + c.rest, 65536, 256, 0)) {
      EXPECT_EQ(got, "6 bytes, 1 lines, candidates") << c.why << " on " << to_string(isa);
    }
  }
  // A value with HTAB and bytes above 0x7f (obs-text) is taken.
  for (const auto& [isa, got] : scans("V: a\tb\xc3\xa9\r\nW: \r\n", 65536, 256, 0)) {
    EXPECT_EQ(got, "15 bytes, 2 lines, candidates") << to_string(isa);
  }
  // The limits: no more lines, no more bytes than allowed.
  const std::string three = good + good + good;
  for (const auto& [isa, got] : scans(three, 65536, 2, 0)) EXPECT_EQ(got, "12 bytes, 2 lines, candidates");
  for (const auto& [isa, got] : scans(three, 17, 256, 0)) EXPECT_EQ(got, "12 bytes, 2 lines, candidates");
  for (const auto& [isa, got] : scans(three, 18, 256, 0)) EXPECT_EQ(got, "18 bytes, 3 lines, candidates");
  // A ninth candidate ends the scan before its line.
  std::string nine;
  for (int k = 0; k < 9; ++k) nine += "Connection: x\r\n";
  for (const auto& [isa, got] : scans(nine, 65536, 256, kFramingLengths)) {
    EXPECT_EQ(got.substr(0, got.find(',', got.find("lines"))), "120 bytes, 8 lines") << to_string(isa);
  }
}

TEST(FieldLineScan, EveryInstructionSetReadsRandomHeadsAsTheLineByLineReference) {
  std::mt19937 rng(20261206);
  const std::string tchars = "abcXYZ019-_!#$%&'*+.^`|~";
  const std::string others = std::string("\r\n\t :\x01\x7f\x80\xff\"(),/;<=>?@[]{}", 23);
  auto pick = [&](const std::string& from) { return from[rng() % from.size()]; };
  for (int round = 0; round < 4000; ++round) {
    std::string in;
    const int lines = static_cast<int>(rng() % 12);
    for (int l = 0; l < lines; ++l) {
      // Names of every length around the framing ones and across 64.
      const size_t name = rng() % 4 == 0 ? (rng() % 2 ? 10 : 14 + rng() % 4) : 1 + rng() % 70;
      for (size_t k = 0; k < name; ++k) in += pick(tchars);
      in += ':';
      const size_t value = rng() % 4 == 0 ? 50 + rng() % 150 : rng() % 30;
      for (size_t k = 0; k < value; ++k) in += rng() % 16 == 0 ? '\t' : static_cast<char>(' ' + rng() % 95);
      in += "\r\n";
    }
    in += "\r\nbody";
    // Now and then a byte that breaks a rule, anywhere; now and then cut short.
    if (rng() % 3 == 0 && !in.empty()) in[rng() % in.size()] = pick(others);
    if (rng() % 4 == 0) in.resize(rng() % (in.size() + 1));
    const uint32_t max_bytes = rng() % 4 == 0 ? static_cast<uint32_t>(rng() % (in.size() + 8)) : 65536;
    const uint32_t max_lines = rng() % 4 == 0 ? static_cast<uint32_t>(rng() % 10) : 256;
    const uint64_t lengths = rng() % 2 ? kFramingLengths : uint64_t{rng()} << 32 | rng();
    const std::string expected = describe(lines_one_by_one(in, max_bytes, max_lines, lengths));
    for (const auto& [isa, got] : scans(in, max_bytes, max_lines, lengths)) {
      ASSERT_EQ(got, expected) << to_string(isa) << " round " << round << ": " << testing::PrintToString(in);
    }
  }
}

}  // namespace
}  // namespace sluice::http
