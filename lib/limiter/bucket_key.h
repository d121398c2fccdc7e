// Bucket keys: a keyed 128-bit XXH3 of the key material (a client address, a
// run token...) and the bucket it belongs to, with a secret drawn at process
// start (or kept in the state directory), so no credential byte is ever
// stored and no client can aim two keys at one bucket. A credential's digest
// (already a keyed XXH3) is mixed with the bucket and the secret instead of
// hashed again. 111 bits of hash survive; the low 16
// bits of k1 carry the bucket index, so the table knows each slot's algorithm
// and idle rule without another word.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace sluice::limiter {

struct BucketKey {
  uint64_t k0;  // never 0 (bit 63 is always set): 0 marks a free slot
  uint64_t k1;  // low 16 bits: bucket index

  [[nodiscard]] uint16_t bucket() const noexcept { return static_cast<uint16_t>(k1); }
  bool operator==(const BucketKey&) const = default;
};

// A keyed 128-bit digest of a credential or other secret-bearing material.
struct Digest {
  uint64_t lo, hi;
  bool operator==(const Digest&) const = default;
};

class KeyHasher {
 public:
  static constexpr size_t kSecretSize = 192;

  // A secret from the kernel's random source (getrandom); the one the
  // appliance uses.
  [[nodiscard]] static KeyHasher random();
  // A fixed secret, for tests and for digests that must be the same across
  // restarts (the credential file the control plane loads).
  explicit KeyHasher(std::span<const uint8_t, kSecretSize> secret) noexcept;
  // A secret spread from `material` of any length (at least 16 bytes, say),
  // XXH3's own way: for a secret several boxes share, kept in a file
  // (the cluster section's `secret_file`).
  [[nodiscard]] static KeyHasher from_material(std::span<const uint8_t> material) noexcept;

  [[nodiscard]] BucketKey key(uint16_t bucket, std::span<const uint8_t> material) const noexcept;
  [[nodiscard]] BucketKey key(uint16_t bucket, const Digest& d) const noexcept;
  [[nodiscard]] Digest digest(std::span<const uint8_t> material) const noexcept;

 private:
  alignas(64) std::array<uint8_t, kSecretSize> secret_;
};

}  // namespace sluice::limiter
