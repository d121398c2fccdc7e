// A TCP flow as the appliance names it: client and origin endpoints, the
// same whichever direction a segment travels, so both directions hash alike
// and land on the same worker and the same flow-table slot.
#pragma once

#include <cstdint>
#include <cstring>

#include <xxhash.h>

#include "net/ip_address.h"

namespace sluice::dataplane {

struct FlowKey {
  net::IpAddress client;
  net::IpAddress origin;
  uint16_t client_port = 0;
  uint16_t origin_port = 0;

  bool operator==(const FlowKey&) const = default;
};

// Symmetric by construction: the key is already ordered client-first. Keyed
// by `seed` (sluiced draws one at start, the same for every worker, since
// the hash names a flow's owner): clients that could predict it could pick
// ports that all land on one probe run of the flow table, and make every
// lookup walk it.
[[nodiscard]] inline uint64_t flow_hash(const FlowKey& k, uint64_t seed = 0) noexcept {
  uint8_t material[36];
  std::memcpy(material, k.client.bytes.data(), 16);
  std::memcpy(material + 16, k.origin.bytes.data(), 16);
  std::memcpy(material + 32, &k.client_port, 2);
  std::memcpy(material + 34, &k.origin_port, 2);
  return XXH3_64bits_withSeed(material, sizeof material, seed);
}

// The worker that owns a flow: the high half of its hash, so the owner and the
// slot in the owner's table (low bits) are independent.
[[nodiscard]] inline unsigned flow_owner(uint64_t hash, unsigned workers) noexcept {
  return static_cast<unsigned>((hash >> 32) % workers);
}

}  // namespace sluice::dataplane
