// SYN cookies: see syn_cookie.h for the design and what it gives up.
#include "dataplane/syn_cookie.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

namespace sluice::dataplane {
namespace {

constexpr unsigned kCookieBits = 24;  // the MAC; the 8 above hold the minute
constexpr uint32_t kCookieMask = (uint32_t{1} << kCookieBits) - 1;
// This minute and the previous one: a cookie lives 60 to 120 s.
constexpr uint32_t kMaxAgeMinutes = 2;
// The MSS index is the MAC's two low bits, and H2 covers it: Linux adds the
// index to the MAC instead, so there an ACK 1 to 3 off passes with a
// neighbouring MSS (larger than the client announced, too).
constexpr uint32_t kIndexMask = 3;

[[nodiscard]] constexpr uint32_t mac(uint32_t h2, uint32_t index) noexcept {
  return (h2 & kCookieMask & ~kIndexMask) | index;
}

// The SYN-ACK's TSval low bits, as Linux lays them out so a capture reads
// the same: | ECN (5) | SACK (4) | client wscale (3..0) |. 0xF is no valid
// shift (14 is the largest), so it says "no window scaling". ECN is never
// set: the appliance does not negotiate it.
constexpr unsigned kTsBits = 6;
constexpr uint32_t kTsMask = (uint32_t{1} << kTsBits) - 1;
constexpr uint32_t kTsWscaleMask = 0xF;
constexpr uint32_t kTsSack = 1u << 4;
constexpr uint8_t kMaxWscale = 14;  // RFC 7323 2.3: a larger shift is read as 14

static_assert(crypto_shorthash_siphash24_KEYBYTES == 16);
static_assert(crypto_shorthash_siphash24_BYTES == 8);

[[nodiscard]] uint32_t minute_of(time::Nanos now) noexcept {
  // Only the low 8 bits travel in the cookie; H2 takes all 32, so a cookie
  // 256 minutes old does not come back to life.
  return static_cast<uint32_t>(now / time::kNanosPerMinute);
}

[[nodiscard]] const std::array<uint16_t, 4>& mss_table(const FlowKey& key) noexcept {
  return key.client.is_v4() ? SynCookies::kMssV4 : SynCookies::kMssV6;
}

// The largest entry not above the client's MSS; below them all (or absent,
// 0), the smallest, as Linux does: 536 is every IPv4 host's default and 1220
// every IPv6 path's minimum, so the client can take it.
[[nodiscard]] uint32_t mss_index(const std::array<uint16_t, 4>& table, uint16_t mss) noexcept {
  uint32_t i = table.size() - 1;
  while (i > 0 && table[i] > mss) --i;
  return i;
}

// The timestamp clock: milliseconds of the caller's time, modulo 2^32 as on
// the wire.
[[nodiscard]] uint32_t ts_clock(time::Nanos now) noexcept {
  return static_cast<uint32_t>(now / 1'000'000);
}

}  // namespace

SynCookies::SynCookies(std::span<const uint8_t, 32> seed) noexcept {
  // SipHash keeps no state in libsodium, but libsodium asks every user to
  // initialise it before calling anything; done once here, off the hot path.
  // Its only failure is the random source, which a keyed hash does not use.
  [[maybe_unused]] const int sodium_ready = sodium_init();
  std::memcpy(keys_[0].data(), seed.data(), 16);
  std::memcpy(keys_[1].data(), seed.data() + 16, 16);
}

uint32_t SynCookies::keyed_hash(const FlowKey& key, uint32_t minute, int which, uint32_t mss_index) const noexcept {
  // Both addresses are 16 bytes (IPv4 mapped), so one layout serves both
  // families; the mapping prefix also keeps an IPv4 flow from hashing like
  // an IPv6 one.
  uint8_t material[41];
  std::memcpy(material, key.client.bytes.data(), 16);
  std::memcpy(material + 16, key.origin.bytes.data(), 16);
  std::memcpy(material + 32, &key.client_port, 2);
  std::memcpy(material + 34, &key.origin_port, 2);
  std::memcpy(material + 36, &minute, 4);
  material[40] = static_cast<uint8_t>(mss_index);
  uint8_t out[crypto_shorthash_siphash24_BYTES];
  crypto_shorthash_siphash24(out, material, sizeof material, keys_[static_cast<size_t>(which)].data());
  uint32_t h;
  std::memcpy(&h, out, sizeof h);
  return h;
}

SynCookieOffer SynCookies::offer(const FlowKey& key, uint32_t client_isn, const TcpOptions& syn, int8_t our_wscale,
                                 time::Nanos now) const noexcept {
  const auto& table = mss_table(key);
  const uint32_t index = mss_index(table, syn.mss);
  const uint32_t minute = minute_of(now);

  SynCookieOffer o;
  o.isn = keyed_hash(key, 0, 0) + client_isn + (minute << kCookieBits) + mac(keyed_hash(key, minute, 1, index), index);
  o.client_mss = table[index];
  if (!syn.has_timestamp) return o;  // nowhere to keep window scale or SACK: offer neither

  o.timestamps = true;
  o.sack = syn.sack_permitted;
  const bool scaling = syn.has_wscale && our_wscale >= 0;
  uint32_t options = o.sack ? kTsSack : 0;
  if (scaling) {
    o.wscale = static_cast<int8_t>(std::min<int>(our_wscale, kMaxWscale));
    options |= std::min(syn.wscale, kMaxWscale);
  } else {
    options |= kTsWscaleMask;
  }
  // Later TSvals come from the same clock and must not run backwards (the
  // client's PAWS would drop them), so the options go into a value at or
  // just before the clock, never after it.
  const uint32_t clock = ts_clock(now);
  uint32_t ts = (clock & ~kTsMask) | options;
  if (ts > clock) ts -= uint32_t{1} << kTsBits;  // wraps below 0 as the wire's clock does
  o.tsval = ts;
  return o;
}

std::optional<SynCookieGrant> SynCookies::check(const FlowKey& key, uint32_t seq, uint32_t ack, const TcpOptions& opts,
                                                time::Nanos now) const noexcept {
  const uint32_t client_isn = seq - 1;
  const uint32_t cookie = ack - 1;
  const uint32_t minute = minute_of(now);

  const uint32_t rest = cookie - (keyed_hash(key, 0, 0) + client_isn);
  const uint32_t age = (minute - (rest >> kCookieBits)) & (~uint32_t{0} >> kCookieBits);
  if (age >= kMaxAgeMinutes) return std::nullopt;
  const uint32_t index = rest & kIndexMask;
  if (mac(keyed_hash(key, minute - age, 1, index), index) != (rest & kCookieMask)) return std::nullopt;
  const auto& table = mss_table(key);

  SynCookieGrant g;
  g.client_mss = table[index];
  g.client_isn = client_isn;
  g.cookie_isn = cookie;
  // No timestamp on the ACK: whatever the SYN-ACK offered cannot be read
  // back, so the connection runs without the options (as Linux's
  // tcp_clear_options). TSecr is the client's echo and not under the MAC:
  // a client that alters it only spoils its own connection.
  if (!opts.has_timestamp) return g;
  g.timestamps = true;
  const uint32_t options = opts.tsecr & kTsMask;
  g.sack = (options & kTsSack) != 0;
  const uint32_t ws = options & kTsWscaleMask;
  g.client_wscale = ws == kTsWscaleMask ? int8_t{-1} : static_cast<int8_t>(ws);
  return g;
}

bool SynCookies::may_follow(const FlowKey& key, uint32_t seq, uint32_t ack, uint32_t window,
                            time::Nanos now) const noexcept {
  // A segment `off` bytes into the stream, its handshake's ACK still on
  // the way, acknowledges the cookie itself: `rest` reads as the cookie's
  // own (minute bits and MAC) less `off`.
  const uint32_t rest = (ack - 1) - (keyed_hash(key, 0, 0) + (seq - 1));
  const uint32_t minute = minute_of(now);
  for (uint32_t age = 0; age < kMaxAgeMinutes; ++age) {
    const uint32_t issued = minute - age;
    const uint32_t top = issued << kCookieBits;
    // The minute bits first, of either end of the window: most segments of
    // connections nobody answered stop here, at one hash.
    if (((rest ^ top) >> kCookieBits) != 0 && (((rest + window) ^ top) >> kCookieBits) != 0) continue;
    // Then the MAC, for each MSS index: only a cookie this codec issued
    // lies within `window` above `rest`. The minute bits alone let about 3
    // in 256 lost connections' segments through, to be dropped for good
    // rather than reset.
    for (uint32_t index = 0; index <= kIndexMask; ++index) {
      const uint32_t cookie_rest = top + mac(keyed_hash(key, issued, 1, index), index);
      if (cookie_rest - rest <= window) return true;
    }
  }
  return false;
}

}  // namespace sluice::dataplane
