// TB05's canonical credential against the rule read byte by byte: random
// values of spaces, tabs, capitals, other letters and high bytes, every
// length to past a few words, and an output too small.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "limiter/credential.h"

namespace sluice::limiter {
namespace {

// The rule as credential.h states it, one byte at a time.
std::string reference(std::string v, size_t room) {
  auto ows = [](char c) { return c == ' ' || c == '\t'; };
  while (!v.empty() && ows(v.front())) v.erase(v.begin());
  while (!v.empty() && ows(v.back())) v.pop_back();
  if (v.empty() || v.size() > room) return {};
  size_t space = 0;
  while (space < v.size() && !ows(v[space])) ++space;
  if (space == v.size()) return v;
  std::string out;
  for (size_t i = 0; i < space; ++i) out += (v[i] >= 'A' && v[i] <= 'Z') ? static_cast<char>(v[i] | 0x20) : v[i];
  size_t t = space;
  while (t < v.size() && ows(v[t])) ++t;
  return out + ' ' + v.substr(t);
}

TEST(Credential, TB05_CanonicalFormMatchesTheByteByByteRule) {
  static const char kAlphabet[] = {' ', '\t', 'A', 'Z', 'a', 'z', '@', '[', '`', '{', '-', '0', '\x80', '\xc1', '\xda', '\xa0', '\x89',
                                   'B', 'e', 'R'};
  std::mt19937 rng(3);
  std::vector<char> out(64, '#');
  for (int round = 0; round < 200000; ++round) {
    std::string v(rng() % 41, ' ');
    for (char& c : v) c = kAlphabet[rng() % sizeof kAlphabet];
    const size_t room = round % 7 == 0 ? rng() % 41 : out.size();
    const std::string want = reference(v, room);
    const std::string_view got = normalize_credential(v, std::span<char>(out.data(), room));
    ASSERT_EQ(std::string(got), want) << "value '" << v << "' room " << room;
  }
}

TEST(Credential, TB05_RespellingsOfOneCredentialAreOneForm) {
  std::vector<char> out(256);
  for (const char* v : {"Bearer key-one", "bearer key-one", "BEARER   key-one", "\tBeArEr\t \tkey-one  ",
                        "bEARER key-one"}) {
    EXPECT_EQ(normalize_credential(v, out), "bearer key-one") << v;
  }
  EXPECT_EQ(normalize_credential("Bearer KEY-One", out), "bearer KEY-One") << "the token is kept exactly";
  EXPECT_EQ(normalize_credential("VeryLongSchemeNameOver16 tok", out), "verylongschemenameover16 tok");
}

}  // namespace
}  // namespace sluice::limiter
