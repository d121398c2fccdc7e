// See bucket_key.h. XXH3 is inlined here (XXH_INLINE_ALL): the inputs are a
// few dozen bytes and the call is on every request.
#include "limiter/bucket_key.h"

#include <sys/random.h>

#include <bit>
#include <cstring>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sluice::limiter {

namespace {

// MurmurHash3's 64-bit finaliser: a bijection that spreads every input bit.
uint64_t mix64(uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

BucketKey finish(XXH128_hash_t h, uint16_t bucket) noexcept {
  return {h.low64 | (uint64_t{1} << 63), (h.high64 & ~uint64_t{0xffff}) | bucket};
}

}  // namespace

KeyHasher KeyHasher::random() {
  std::array<uint8_t, kSecretSize> secret;
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = getrandom(secret.data() + got, secret.size() - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed: cannot draw the bucket-key secret");
    got += static_cast<size_t>(n);
  }
  return KeyHasher(secret);
}

KeyHasher::KeyHasher(std::span<const uint8_t, kSecretSize> secret) noexcept {
  std::memcpy(secret_.data(), secret.data(), kSecretSize);
}

KeyHasher KeyHasher::from_material(std::span<const uint8_t> material) noexcept {
  std::array<uint8_t, kSecretSize> secret;
  (void)XXH3_generateSecret(secret.data(), secret.size(), material.data(), material.size());
  return KeyHasher(secret);
}

Digest KeyHasher::digest(std::span<const uint8_t> material) const noexcept {
  const XXH128_hash_t h = XXH3_128bits_withSecret(material.data(), material.size(), secret_.data(), kSecretSize);
  return {h.low64, h.high64};
}

BucketKey KeyHasher::key(uint16_t bucket, std::span<const uint8_t> material) const noexcept {
  // The bucket index is hashed in too, so one material gives unrelated keys
  // in different buckets. Short material is hashed in one pass from a stack
  // copy; long material (a long bearer token) is digested first.
  // A third byte tells raw material from a digest, so the two never collide.
  constexpr size_t kInline = 237;
  uint8_t buf[kInline + 3];
  buf[0] = static_cast<uint8_t>(bucket);
  buf[1] = static_cast<uint8_t>(bucket >> 8);
  buf[2] = 0;
  if (material.size() <= kInline) {
    if (!material.empty()) std::memcpy(buf + 3, material.data(), material.size());
    return finish(XXH3_128bits_withSecret(buf, material.size() + 3, secret_.data(), kSecretSize), bucket);
  }
  return key(bucket, digest(material));
}

BucketKey KeyHasher::key(uint16_t bucket, const Digest& d) const noexcept {
  // A digest is already a keyed hash of its material: mixed (bijectively)
  // with the bucket and this hasher's own secret it is the key, so a
  // credential is hashed once per request, not twice, and keys still differ
  // from the digests operators see (`sluicectl credential hash`).
  uint64_t s[2];
  std::memcpy(s, secret_.data(), sizeof s);
  const uint64_t b = uint64_t{bucket} * 0x9e3779b97f4a7c15ull;
  return finish({mix64(d.lo ^ s[0] ^ b), mix64(d.hi ^ s[1] ^ std::rotl(b, 32))}, bucket);
}

}  // namespace sluice::limiter
