// Which worker owns a flow. Every flow between the same two addresses has
// the same owner, so a client's buckets stay in one core's cache (two
// workers charging one bucket pass its cache line back and forth: measured,
// that alone held two workers to 1.2-1.3x one) and its share of flows and
// parse contexts is counted by one worker, not granted once per worker.
//
// Where both ports spread frames over the workers' receive queues with
// symmetric RSS on the addresses, the owner is the queue the NIC picks
// (RssOwner), so a worker owns what it receives; a frame is handed to
// another worker only when the NIC hashed it some other way (a tag or
// extension header it does not parse, a device that also hashes the ports):
// ownership never rests on the NIC being right, only the hand-off rate does.
// Without RSS (AF_PACKET), address_owner() names it by a keyed hash.
//
// The RSS key is one 16-bit pattern repeated (Woo and Park), so the Toeplitz
// hash of a tuple depends only on the XOR of its big-endian 16-bit words:
// swapping source and destination (whole words) changes nothing, and the hash
// is two table lookups rather than a loop over 64 or 256 input bits. A public
// key makes the owner predictable, as every NIC's RSS is; an attacker chooses
// a worker only by choosing the addresses it sends from.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "flow_key.h"

namespace sluice::dataplane {

inline constexpr std::array<uint8_t, 40> kSymmetricRssKey = {
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
};

// The Toeplitz hash, under kSymmetricRssKey, of the flow's IPv4 or IPv6
// addresses, as a NIC computes it for RSS on addresses (source address, then
// destination address; either direction).
[[nodiscard]] uint32_t symmetric_toeplitz(const FlowKey& key) noexcept;

// The owner among `workers` where no NIC picks it: the addresses hashed
// with `seed` (the same for every worker), so clients cannot predict it.
[[nodiscard]] inline unsigned address_owner(const FlowKey& key, uint64_t seed, unsigned workers) noexcept {
  uint8_t material[32];
  std::memcpy(material, key.client.bytes.data(), 16);
  std::memcpy(material + 16, key.origin.bytes.data(), 16);
  return static_cast<unsigned>((XXH3_64bits_withSeed(material, sizeof material, seed) >> 32) % workers);
}

class RssOwner {
 public:
  // The most entries a redirection table has here (a port with a larger one
  // repeats this many).
  static constexpr size_t kMaxEntries = 512;

  // `table`: the redirection table both ports were given, entry i naming the
  // queue (worker) for hashes whose low bits are i; its size is a power of
  // two, at most kMaxEntries.
  explicit RssOwner(std::span<const uint16_t> table);

  // Entry i names queue i % queues: flows spread evenly.
  [[nodiscard]] static std::vector<uint16_t> even_table(size_t entries, unsigned queues);

  [[nodiscard]] unsigned owner(const FlowKey& key) const noexcept { return table_[symmetric_toeplitz(key) & mask_]; }
  [[nodiscard]] std::span<const uint16_t> table() const noexcept { return {table_.data(), mask_ + 1}; }

 private:
  std::array<uint16_t, kMaxEntries> table_{};
  uint32_t mask_ = 0;
};

}  // namespace sluice::dataplane
