// The flow owner (dataplane/rss_owner.h): the folded Toeplitz hash equals
// DPDK's reference implementation (rte_softrss, the bit-by-bit definition a
// NIC follows) on IPv4 and IPv6 address pairs, in both directions; the owner
// is the redirection table's entry for it; a client's flows share an owner.
#include <gtest/gtest.h>

#include <rte_thash.h>

#include <random>

#include "dataplane/rss_owner.h"

namespace sluice::dataplane {
namespace {

// What a NIC hashing on addresses computes for a segment from `src` to
// `dst`, in DPDK's tuple words.
uint32_t reference(const net::IpAddress& src, const net::IpAddress& dst) {
  uint32_t words[8];
  uint32_t n = 0;
  auto add_address = [&](const net::IpAddress& a) {
    const size_t from = a.is_v4() ? 12 : 0;
    for (size_t i = from; i < 16; i += 4) {
      words[n++] = uint32_t{a.bytes[i]} << 24 | uint32_t{a.bytes[i + 1]} << 16 | uint32_t{a.bytes[i + 2]} << 8 |
                   a.bytes[i + 3];
    }
  };
  add_address(src);
  add_address(dst);
  return rte_softrss(words, n, kSymmetricRssKey.data());
}

net::IpAddress random_v6(std::mt19937_64& rng) {
  std::array<uint8_t, 16> b{};
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  b[0] = 0x20;  // never the IPv4-mapped prefix
  return net::IpAddress::v6(b);
}

TEST(RssOwner, FoldedHashIsTheNicsToeplitzHashInBothDirections) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const bool v4 = i % 2 == 0;
    const net::IpAddress c = v4 ? net::IpAddress::v4(static_cast<uint32_t>(rng())) : random_v6(rng);
    const net::IpAddress o = v4 ? net::IpAddress::v4(static_cast<uint32_t>(rng())) : random_v6(rng);
    const auto cp = static_cast<uint16_t>(rng()), op = static_cast<uint16_t>(rng());
    const FlowKey key{c, o, cp, op};
    const uint32_t h = symmetric_toeplitz(key);
    ASSERT_EQ(h, reference(c, o)) << "client to origin, tuple " << i;
    ASSERT_EQ(h, reference(o, c)) << "origin to client, tuple " << i;
  }
}

TEST(RssOwner, OwnerIsTheTableEntryOfTheHashsLowBits) {
  const std::vector<uint16_t> table = RssOwner::even_table(128, 3);
  ASSERT_EQ(table.size(), 128u);
  EXPECT_EQ(table[0], 0);
  EXPECT_EQ(table[4], 1);
  EXPECT_EQ(table[127], 127 % 3);
  const RssOwner owner(table);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1000; ++i) {
    const FlowKey key{net::IpAddress::v4(static_cast<uint32_t>(rng())), net::IpAddress::v4(0xc6130050),
                      static_cast<uint16_t>(rng()), 80};
    ASSERT_EQ(owner.owner(key), table[symmetric_toeplitz(key) & 127]);
  }
}

// Consecutive client addresses: two queues should each get close to half
// (the symmetric key keeps 16 bits of the pair, enough to spread); every
// flow of one client has that client's owner, whatever its ports.
TEST(RssOwner, SpreadsClientsEvenlyAndKeepsEachClientsFlowsTogether) {
  const RssOwner owner(RssOwner::even_table(512, 2));
  size_t on_first = 0;
  for (uint32_t a = 0; a < 1024; ++a) {
    const FlowKey first{net::IpAddress::v4(0xc6120000 + a), net::IpAddress::v4(0xc6130050), 1024, 80};
    on_first += owner.owner(first) == 0;
    for (uint16_t p = 1025; p < 1040; ++p) {
      const FlowKey other{first.client, first.origin, p, static_cast<uint16_t>(p % 3 ? 80 : 443)};
      ASSERT_EQ(owner.owner(other), owner.owner(first)) << "client " << a << " port " << p;
      ASSERT_EQ(address_owner(other, 42, 3), address_owner(first, 42, 3)) << "client " << a << " port " << p;
    }
  }
  EXPECT_GT(on_first, 1024u * 45 / 100);
  EXPECT_LT(on_first, 1024u * 55 / 100);
}

// Without RSS: a keyed hash, spread over the workers, different per seed.
TEST(RssOwner, AddressOwnerSpreadsAndDependsOnTheSeed) {
  size_t count[3] = {0, 0, 0};
  size_t moved = 0;
  for (uint32_t a = 0; a < 3000; ++a) {
    const FlowKey key{net::IpAddress::v4(0xc6120000 + a), net::IpAddress::v4(0xc6130050), 1024, 80};
    const unsigned w = address_owner(key, 1, 3);
    ASSERT_LT(w, 3u);
    ++count[w];
    moved += w != address_owner(key, 2, 3);
  }
  for (size_t c : count) EXPECT_GT(c, 900u);
  EXPECT_GT(moved, 1500u);  // about two thirds
}

TEST(RssOwner, RefusesATableThatIsNotAPowerOfTwo) {
  const std::vector<uint16_t> table(100, 0);
  EXPECT_THROW(RssOwner{table}, std::invalid_argument);
  EXPECT_THROW(RssOwner{std::span<const uint16_t>{}}, std::invalid_argument);
}

}  // namespace
}  // namespace sluice::dataplane
