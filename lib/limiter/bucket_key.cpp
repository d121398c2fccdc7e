// See bucket_key.h. XXH3 is inlined here (XXH_INLINE_ALL): the inputs are a
// few dozen bytes and the call is on every request.
#include "limiter/bucket_key.h"

#include <sys/random.h>

#include <cstring>
#include <stdexcept>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sluice::limiter {

namespace {

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
  uint8_t buf[3 + sizeof d];
  buf[0] = static_cast<uint8_t>(bucket);
  buf[1] = static_cast<uint8_t>(bucket >> 8);
  buf[2] = 1;
  std::memcpy(buf + 3, &d, sizeof d);
  return finish(XXH3_128bits_withSecret(buf, sizeof buf, secret_.data(), kSecretSize), bucket);
}

}  // namespace sluice::limiter
