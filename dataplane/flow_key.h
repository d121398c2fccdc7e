// A TCP flow as the appliance names it: client and origin endpoints, the
// same whichever direction a segment travels, so both directions hash alike
// and land on the same flow-table slot (and, by their addresses, on the same
// worker: rss_owner.h).
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
// by `seed` (sluiced draws one at start): clients that could predict it
// could pick ports that all land on one probe run of the flow table, and
// make every lookup walk it.
[[nodiscard]] inline uint64_t flow_hash(const FlowKey& k, uint64_t seed = 0) noexcept {
  uint8_t material[36];
  std::memcpy(material, k.client.bytes.data(), 16);
  std::memcpy(material + 16, k.origin.bytes.data(), 16);
  std::memcpy(material + 32, &k.client_port, 2);
  std::memcpy(material + 34, &k.origin_port, 2);
  return XXH3_64bits_withSeed(material, sizeof material, seed);
}

}  // namespace sluice::dataplane
