// Each client's share of a worker's flows and parse contexts. Without it a
// few addresses can hold every flow or context the worker has (3000
// connections from 10 addresses, each trickling a head, took all 2048
// contexts and starved everyone else); with it a client past its share
// waits (its SYN or segment is dropped, TCP sends it again) while the
// others are served. The caps are per worker and generous, so that a crowd
// behind one NAT still fits: by default a sixteenth of the flows and of the
// contexts per address.
//
// A client is its address, or for IPv6 its /64: one host can hold a whole
// /64, so counting its addresses one by one would give it a share each.
//
// The table is sized for one client per flow (a share exists only while its
// client has a flow), so it never fills before the flow table does. Its
// hash is keyed by a secret seed: an attacker choosing addresses cannot
// line its clients up on one probe run.
//
// Owns: the shares. Only its worker touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "net/ip_address.h"

namespace sluice::dataplane {

struct ShareCaps {
  uint32_t flows = 4096;    // flows one client may hold on this worker
  uint32_t contexts = 128;  // parse contexts one client may hold on this worker
};

// The defaults for a worker of `flows` flows and `contexts` contexts: a
// sixteenth of each, and at least 16 flows and 4 contexts.
[[nodiscard]] ShareCaps default_share_caps(size_t flows, size_t contexts) noexcept;

class ClientShares {
 public:
  static constexpr int32_t kNoShare = -1;

  ClientShares(size_t clients, ShareCaps caps, uint64_t seed);

  // The share a new flow of `client` counts in, or kNoShare when the client
  // already holds its cap of flows (or, never with the sizing above, no
  // share is free).
  [[nodiscard]] int32_t open_flow(const net::IpAddress& client) noexcept;
  // A flow of the share is gone; the share goes with its last flow.
  void close_flow(int32_t share) noexcept;
  // A context for a flow of `share`; false when the client holds its cap.
  [[nodiscard]] bool take_context(int32_t share) noexcept;
  void return_context(int32_t share) noexcept;

  [[nodiscard]] uint32_t flows_of(int32_t share) const noexcept { return shares_[static_cast<size_t>(share)].flows; }
  [[nodiscard]] uint32_t contexts_of(int32_t share) const noexcept {
    return shares_[static_cast<size_t>(share)].contexts;
  }
  [[nodiscard]] size_t clients() const noexcept { return shares_.size() - free_.size(); }
  [[nodiscard]] const ShareCaps& caps() const noexcept { return caps_; }

 private:
  struct Share {
    net::IpAddress client;  // the address, or the /64 of an IPv6 one
    uint64_t hash = 0;
    uint32_t flows = 0;
    uint32_t contexts = 0;
  };
  [[nodiscard]] uint64_t hash_of(const net::IpAddress& client) const noexcept;
  void unindex(int32_t share) noexcept;

  ShareCaps caps_;
  uint64_t seed_;
  std::vector<Share> shares_;
  std::vector<int32_t> free_;   // reserved at construction: push and pop never allocate
  std::vector<int32_t> index_;  // open addressing, linear probing: a share, or kNoShare
  size_t mask_ = 0;
};

}  // namespace sluice::dataplane
