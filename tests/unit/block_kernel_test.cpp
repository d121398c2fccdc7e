// The SIMD kernels against the scalar one, byte value by byte value and
// position by position, and the head parser's result on every instruction
// set against the scalar build.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "head_harness.h"
#include "http/head_scan.h"

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

}  // namespace
}  // namespace sluice::http
