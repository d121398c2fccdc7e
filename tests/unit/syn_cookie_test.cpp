// SYN cookies (dataplane/syn_cookie.h): a cookie comes back with the MSS and
// options it was offered with, for two minute counters and no longer, and
// for nothing but its own flow, client ISN and seed; forged ACKs pass at the
// rate the MAC's width promises.
#include "dataplane/syn_cookie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "net/ip_address.h"

namespace sluice::dataplane {
namespace {

using time::kNanosPerMinute;
using time::kNanosPerSecond;

constexpr std::array<uint8_t, 32> kSeed = [] {
  std::array<uint8_t, 32> s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xa5 ^ (i * 37));
  return s;
}();

// Some minute well after the epoch, 17.25 s into it.
constexpr time::Nanos kNow = 29'000'000 * kNanosPerMinute + 17'250'000'000;

FlowKey v4_key() {
  FlowKey k;
  k.client = net::IpAddress::v4(0xc6336401);  // 198.51.100.1
  k.origin = net::IpAddress::v4(0xcb00710a);  // 203.0.113.10
  k.client_port = 51234;
  k.origin_port = 443;
  return k;
}

FlowKey v6_key() {
  FlowKey k;
  k.client = *net::parse_ipv6("2001:db8::1");
  k.origin = *net::parse_ipv6("2001:db8:1::80");
  k.client_port = 40000;
  k.origin_port = 80;
  return k;
}

TcpOptions syn_options(uint16_t mss, bool timestamps, int wscale, bool sack, uint32_t tsval = 777) {
  TcpOptions o;
  o.mss = mss;
  o.has_timestamp = timestamps;
  o.tsval = timestamps ? tsval : 0;
  o.has_wscale = wscale >= 0;
  o.wscale = wscale >= 0 ? static_cast<uint8_t>(wscale) : 0;
  o.sack_permitted = sack;
  return o;
}

// The client's ACK to an offer: its options echo the SYN-ACK's TSval.
TcpOptions ack_options(const SynCookieOffer& offer, uint32_t client_tsval = 778) {
  TcpOptions o;
  o.has_timestamp = offer.timestamps;
  if (offer.timestamps) {
    o.tsval = client_tsval;
    o.tsecr = offer.tsval;
  }
  return o;
}

TEST(SynCookie, RoundTripsAndRoundsTheMssDownToTheTable) {
  const SynCookies cookies(kSeed);
  struct Case {
    FlowKey key;
    uint16_t client_mss;
    uint16_t expected;
  };
  const Case cases[] = {
      {v4_key(), 1460, 1460}, {v4_key(), 1400, 1300},  {v4_key(), 536, 536},  {v4_key(), 9000, 1460},
      {v4_key(), 1452, 1440}, {v4_key(), 1300, 1300},  {v4_key(), 0, 536},    {v4_key(), 500, 536},
      {v6_key(), 1460, 1440}, {v6_key(), 1400, 1220},  {v6_key(), 536, 1220}, {v6_key(), 9000, 8940},
      {v6_key(), 1420, 1420}, {v6_key(), 65535, 8940}, {v6_key(), 0, 1220},   {v6_key(), 8939, 1440},
  };
  for (const auto& c : cases) {
    for (const bool timestamps : {false, true}) {
      const uint32_t client_isn = 0x12345678;
      const auto offer = cookies.offer(c.key, client_isn, syn_options(c.client_mss, timestamps, 7, true), 9, kNow);
      EXPECT_EQ(offer.client_mss, c.expected) << c.client_mss;
      const auto grant = cookies.check(c.key, client_isn + 1, offer.isn + 1, ack_options(offer), kNow);
      ASSERT_TRUE(grant.has_value()) << c.client_mss << " " << c.key.client.to_string();
      EXPECT_EQ(grant->client_mss, c.expected);
      EXPECT_EQ(grant->client_isn, client_isn);
      EXPECT_EQ(grant->cookie_isn, offer.isn);
      EXPECT_EQ(grant->timestamps, timestamps);
    }
  }
}

// Data that overtook its handshake's ACK (delayed binding offers a window)
// is told from a segment of a connection nobody answered: every offset of
// the window passes, a random acknowledgement almost never does.
TEST(SynCookie, DataAfterACookieAckIsKnownWithoutTheAck) {
  const SynCookies cookies(kSeed);
  const uint32_t client_isn = 0xfffff000;  // the stream's numbers wrap inside the window
  const auto offer = cookies.offer(v4_key(), client_isn, syn_options(1460, true, 7, true), 9, kNow);
  for (const uint32_t off : {0u, 1u, 1448u, 20000u, 32767u}) {
    EXPECT_TRUE(cookies.may_follow(v4_key(), client_isn + 1 + off, offer.isn + 1, 32768, kNow)) << off;
    EXPECT_TRUE(cookies.may_follow(v4_key(), client_isn + 1 + off, offer.isn + 1, 32768, kNow + time::kNanosPerMinute));
  }
  EXPECT_FALSE(cookies.may_follow(v4_key(), client_isn + 1, offer.isn + 1, 32768, kNow + 3 * time::kNanosPerMinute))
      << "a cookie past its two minutes";
  int passed = 0;
  uint32_t x = 12345;
  for (int i = 0; i < 10000; ++i) {
    x = x * 1664525u + 1013904223u;  // any acknowledgement numbers, deterministically
    if (cookies.may_follow(v4_key(), client_isn + 1, x, 32768, kNow)) ++passed;
  }
  EXPECT_LE(passed, 5) << "about 1 in 16 000 expected (the minute bits alone let 3 in 256 through)";
  // A connection made with a cookie, then lost track of after a response:
  // its acknowledgement has moved past the cookie, so it is reset, not
  // taken for data ahead of its handshake's ACK.
  EXPECT_FALSE(cookies.may_follow(v4_key(), client_isn + 1 + 100, offer.isn + 1 + 300, 32768, kNow));
}

TEST(SynCookie, RoundTripsAcrossTheSequenceWrap) {
  const SynCookies cookies(kSeed);
  for (const uint32_t client_isn : {0u, 0xffffffffu, 0xfffffffeu, 0x80000000u}) {
    const auto offer = cookies.offer(v4_key(), client_isn, syn_options(1460, false, -1, false), -1, kNow);
    const auto grant = cookies.check(v4_key(), client_isn + 1, offer.isn + 1, ack_options(offer), kNow);
    ASSERT_TRUE(grant.has_value()) << client_isn;
    EXPECT_EQ(grant->client_isn, client_isn);
    EXPECT_EQ(grant->client_mss, 1460);
  }
}

TEST(SynCookie, TimestampsCarryTheClientsWindowScaleAndSack) {
  const SynCookies cookies(kSeed);
  for (const FlowKey& key : {v4_key(), v6_key()}) {
    for (int wscale = -1; wscale <= 14; ++wscale) {
      for (const bool sack : {false, true}) {
        const auto offer = cookies.offer(key, 1000, syn_options(1460, true, wscale, sack), 7, kNow);
        EXPECT_TRUE(offer.timestamps);
        EXPECT_EQ(offer.sack, sack);
        // The appliance announces its own shift only to a client that announced one.
        EXPECT_EQ(offer.wscale, wscale >= 0 ? 7 : -1) << wscale;
        const auto grant = cookies.check(key, 1001, offer.isn + 1, ack_options(offer), kNow);
        ASSERT_TRUE(grant.has_value());
        EXPECT_TRUE(grant->timestamps);
        EXPECT_EQ(grant->sack, sack);
        EXPECT_EQ(grant->client_wscale, wscale) << sack;
      }
    }
  }
}

TEST(SynCookie, AShiftAbove14IsReadAs14) {
  const SynCookies cookies(kSeed);
  const auto offer = cookies.offer(v4_key(), 1000, syn_options(1460, true, 15, false), 20, kNow);
  EXPECT_EQ(offer.wscale, 14);
  const auto grant = cookies.check(v4_key(), 1001, offer.isn + 1, ack_options(offer), kNow);
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->client_wscale, 14);
}

TEST(SynCookie, WithoutOurWindowScaleNeitherSideScales) {
  const SynCookies cookies(kSeed);
  const auto offer = cookies.offer(v4_key(), 1000, syn_options(1460, true, 8, true), -1, kNow);
  EXPECT_EQ(offer.wscale, -1);
  EXPECT_TRUE(offer.sack);
  const auto grant = cookies.check(v4_key(), 1001, offer.isn + 1, ack_options(offer), kNow);
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->client_wscale, -1);
  EXPECT_TRUE(grant->sack);
}

TEST(SynCookie, WithoutClientTimestampsTheOfferHasNoWindowScaleNorSack) {
  const SynCookies cookies(kSeed);
  const auto offer = cookies.offer(v4_key(), 1000, syn_options(1460, false, 7, true), 7, kNow);
  EXPECT_FALSE(offer.timestamps);
  EXPECT_FALSE(offer.sack);
  EXPECT_EQ(offer.wscale, -1);
  EXPECT_EQ(offer.tsval, 0u);
  EXPECT_EQ(offer.client_mss, 1460);
  const auto grant = cookies.check(v4_key(), 1001, offer.isn + 1, ack_options(offer), kNow);
  ASSERT_TRUE(grant.has_value());
  EXPECT_FALSE(grant->timestamps);
  EXPECT_FALSE(grant->sack);
  EXPECT_EQ(grant->client_wscale, -1);
  EXPECT_EQ(grant->client_mss, 1460);
}

// An ACK without the timestamp cannot return the options; the cookie still
// holds (as in Linux), and the connection runs without them.
TEST(SynCookie, AnAckWithoutTimestampsGetsNoOptions) {
  const SynCookies cookies(kSeed);
  const auto offer = cookies.offer(v4_key(), 1000, syn_options(1460, true, 7, true), 7, kNow);
  const auto grant = cookies.check(v4_key(), 1001, offer.isn + 1, TcpOptions{}, kNow);
  ASSERT_TRUE(grant.has_value());
  EXPECT_FALSE(grant->timestamps);
  EXPECT_FALSE(grant->sack);
  EXPECT_EQ(grant->client_wscale, -1);
  EXPECT_EQ(grant->client_mss, 1460);
}

TEST(SynCookie, TsvalNeverExceedsTheClockAndCarriesTheOptions) {
  const SynCookies cookies(kSeed);
  std::mt19937_64 rng(7);
  std::vector<time::Nanos> nows = {0, 1'000'000, 63'000'000, 64'000'000, kNow,
                                   // the millisecond clock's 2^32 wrap, either side
                                   (uint64_t{1} << 32) * 1'000'000 - 1'000'000, (uint64_t{1} << 32) * 1'000'000};
  for (int i = 0; i < 2000; ++i) nows.push_back(rng() >> 4);
  for (const time::Nanos now : nows) {
    const int wscale = static_cast<int>(rng() % 16) - 1;  // -1..14
    const bool sack = (rng() & 1) != 0;
    const auto offer = cookies.offer(v4_key(), 5, syn_options(1460, true, wscale, sack), 7, now);
    const uint32_t clock = static_cast<uint32_t>(now / 1'000'000);
    // At or before the clock, by less than the 64 ms the options take.
    EXPECT_LT(clock - offer.tsval, 64u) << now;
    const uint32_t options = (wscale >= 0 ? static_cast<uint32_t>(wscale) : 0xfu) | (sack ? 0x10u : 0u);
    EXPECT_EQ(offer.tsval & 0x3f, options) << now;
  }
}

TEST(SynCookie, TheSameSynInTheSameMinuteGetsTheSameCookie) {
  // A retransmitted SYN is answered alike without remembering the first.
  const SynCookies cookies(kSeed);
  const auto a = cookies.offer(v4_key(), 99, syn_options(1460, false, -1, false), -1, kNow);
  const auto b = cookies.offer(v4_key(), 99, syn_options(1460, false, -1, false), -1, kNow + 30 * kNanosPerSecond);
  EXPECT_EQ(a.isn, b.isn);
  const auto c = cookies.offer(v4_key(), 100, syn_options(1460, false, -1, false), -1, kNow);
  EXPECT_NE(a.isn, c.isn);
}

TEST(SynCookie, AcceptedInItsMinuteAndTheNextRefusedAfter) {
  const SynCookies cookies(kSeed);
  const time::Nanos minute_start = kNow / kNanosPerMinute * kNanosPerMinute;
  for (const time::Nanos issued : {minute_start, minute_start + 59 * kNanosPerSecond + 999'999'999}) {
    const auto offer = cookies.offer(v4_key(), 1000, syn_options(1440, false, -1, false), -1, issued);
    const auto at = [&](time::Nanos now) { return cookies.check(v4_key(), 1001, offer.isn + 1, TcpOptions{}, now); };
    EXPECT_TRUE(at(minute_start).has_value());
    EXPECT_TRUE(at(minute_start + kNanosPerMinute - 1).has_value());
    EXPECT_TRUE(at(minute_start + kNanosPerMinute).has_value());  // the previous minute's
    EXPECT_TRUE(at(minute_start + 2 * kNanosPerMinute - 1).has_value());
    EXPECT_FALSE(at(minute_start + 2 * kNanosPerMinute).has_value());  // two minutes back
    EXPECT_FALSE(at(minute_start + 3 * kNanosPerMinute).has_value());
    // Only 8 bits of the minute travel; a cookie 256 minutes old still fails.
    EXPECT_FALSE(at(minute_start + 256 * kNanosPerMinute).has_value());
    EXPECT_FALSE(at(minute_start + 257 * kNanosPerMinute).has_value());
    // A clock stepped back before the cookie's minute does not take it.
    EXPECT_FALSE(at(minute_start - 1).has_value());
  }
}

TEST(SynCookie, AFlippedBitRefuses) {
  const SynCookies cookies(kSeed);
  const auto offer = cookies.offer(v4_key(), 1000, syn_options(1300, false, -1, false), -1, kNow);
  for (unsigned bit = 0; bit < 32; ++bit) {
    EXPECT_FALSE(cookies.check(v4_key(), 1001, (offer.isn ^ (1u << bit)) + 1, TcpOptions{}, kNow).has_value()) << bit;
  }
}

// The MSS index is under the MAC (Linux adds it to the MAC instead): an
// acknowledgement or a client ISN 1 to 3 off, which would move the index to a
// neighbouring (perhaps larger) table MSS, is refused.
TEST(SynCookie, AnAckOneToThreeOffIsRefused) {
  const SynCookies cookies(kSeed);
  for (const FlowKey& key : {v4_key(), v6_key()}) {
    const auto& table = key.client.is_v4() ? SynCookies::kMssV4 : SynCookies::kMssV6;
    for (size_t index = 0; index < table.size(); ++index) {
      const auto offer = cookies.offer(key, 1000, syn_options(table[index], false, -1, false), -1, kNow);
      ASSERT_EQ(offer.client_mss, table[index]);
      ASSERT_TRUE(cookies.check(key, 1001, offer.isn + 1, TcpOptions{}, kNow).has_value());
      for (const int delta : {-3, -2, -1, 1, 2, 3}) {
        for (const bool in_ack : {true, false}) {
          const uint32_t ack = offer.isn + 1 + (in_ack ? static_cast<uint32_t>(delta) : 0);
          const uint32_t seq = 1001 - (in_ack ? 0 : static_cast<uint32_t>(delta));
          EXPECT_FALSE(cookies.check(key, seq, ack, TcpOptions{}, kNow).has_value()) << index << " " << delta;
        }
      }
    }
  }
}

TEST(SynCookie, AnotherFlowOrClientIsnRefuses) {
  const SynCookies cookies(kSeed);
  for (const FlowKey& key : {v4_key(), v6_key()}) {
    const auto offer = cookies.offer(key, 1000, syn_options(1460, true, 7, true), 7, kNow);
    const auto refused = [&](const FlowKey& k, uint32_t seq) {
      return !cookies.check(k, seq, offer.isn + 1, ack_options(offer), kNow).has_value();
    };
    ASSERT_FALSE(refused(key, 1001));
    FlowKey k = key;
    k.client_port ^= 1;
    EXPECT_TRUE(refused(k, 1001));
    k = key;
    k.origin_port = 8443;
    EXPECT_TRUE(refused(k, 1001));
    k = key;
    k.client.bytes[15] ^= 1;
    EXPECT_TRUE(refused(k, 1001));
    k = key;
    k.origin.bytes[15] ^= 0x80;
    EXPECT_TRUE(refused(k, 1001));
    k = key;
    std::swap(k.client, k.origin);
    std::swap(k.client_port, k.origin_port);
    EXPECT_TRUE(refused(k, 1001));
    // The client ISN is under the cookie: a segment further on does not open.
    for (const uint32_t seq : {997u, 1000u, 1002u, 1005u, 1001u + 1460u, 0u, 1001u + 0x01000000u})
      EXPECT_TRUE(refused(key, seq)) << seq;
  }
}

TEST(SynCookie, AnotherSeedRefuses) {
  const SynCookies cookies(kSeed);
  auto other_seed = kSeed;
  other_seed[31] ^= 1;  // only H2's key differs
  const SynCookies other(other_seed);
  auto third_seed = kSeed;
  third_seed[0] ^= 1;  // only H1's key differs
  const SynCookies third(third_seed);
  int refused = 0;
  for (uint32_t client_isn = 0; client_isn < 100; ++client_isn) {
    const auto offer = cookies.offer(v4_key(), client_isn, syn_options(1460, false, -1, false), -1, kNow);
    ASSERT_TRUE(cookies.check(v4_key(), client_isn + 1, offer.isn + 1, TcpOptions{}, kNow).has_value());
    refused += !other.check(v4_key(), client_isn + 1, offer.isn + 1, TcpOptions{}, kNow).has_value();
    refused += !third.check(v4_key(), client_isn + 1, offer.isn + 1, TcpOptions{}, kNow).has_value();
  }
  EXPECT_EQ(refused, 200);
}

// A blind forger: random acknowledgement numbers for a flow, with the right
// client ISN (it sent the SYN itself) or a random one. About 2^-29 of them
// pass; even a forger that somehow had the minute bits right would pass
// about 2^-22 of the time (4 MSS indices in a 24-bit MAC).
TEST(SynCookie, ForgedAcksAlmostNeverPass) {
  const SynCookies cookies(kSeed);
  std::mt19937 rng(2024);
  const FlowKey key = v4_key();
  const auto offer = cookies.offer(key, 1000, syn_options(1460, false, -1, false), -1, kNow);
  int passed_random = 0, passed_known_isn = 0, passed_known_minute = 0;
  constexpr int kTries = 100'000;
  for (int i = 0; i < kTries; ++i) {
    passed_random += cookies.check(key, rng(), rng(), TcpOptions{}, kNow).has_value();
    passed_known_isn += cookies.check(key, 1001, rng(), TcpOptions{}, kNow).has_value();
    const uint32_t forged = (offer.isn & 0xff000000u) | (rng() & 0x00ffffffu);
    if (forged != offer.isn)
      passed_known_minute += cookies.check(key, 1001, forged + 1, TcpOptions{}, kNow).has_value();
  }
  // Expected about 0.0002, 0.0002 and 0.024 passes.
  EXPECT_LE(passed_random, 2);
  EXPECT_LE(passed_known_isn, 2);
  EXPECT_LE(passed_known_minute, 3);
}

}  // namespace
}  // namespace sluice::dataplane
