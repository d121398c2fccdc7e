// Clients' shares of flows and contexts; see client_shares.h.
#include "client_shares.h"

#include <algorithm>
#include <bit>

#include <xxhash.h>

namespace sluice::dataplane {

ShareCaps default_share_caps(size_t flows, size_t contexts) noexcept {
  ShareCaps c;
  c.flows = static_cast<uint32_t>(std::max<size_t>(16, flows / 16));
  c.contexts = static_cast<uint32_t>(std::max<size_t>(4, contexts / 16));
  return c;
}

ClientShares::ClientShares(size_t clients, ShareCaps caps, uint64_t seed)
    : caps_(caps), seed_(seed), shares_(std::max<size_t>(clients, 1)) {
  free_.reserve(shares_.size());
  for (size_t i = shares_.size(); i-- > 0;) free_.push_back(static_cast<int32_t>(i));
  const size_t slots = std::bit_ceil(shares_.size() * 2);
  index_.assign(slots, kNoShare);
  mask_ = slots - 1;
}

uint64_t ClientShares::hash_of(const net::IpAddress& client) const noexcept {
  return XXH3_64bits_withSeed(client.bytes.data(), client.bytes.size(), seed_);
}

int32_t ClientShares::open_flow(const net::IpAddress& address) noexcept {
  const net::IpAddress client = address.is_v4() ? address : address.prefix(64);
  const uint64_t h = hash_of(client);
  size_t i = h & mask_;
  for (; index_[i] != kNoShare; i = (i + 1) & mask_) {
    Share& s = shares_[static_cast<size_t>(index_[i])];
    if (s.hash != h || !(s.client == client)) continue;
    if (s.flows >= caps_.flows) return kNoShare;
    ++s.flows;
    return index_[i];
  }
  if (free_.empty()) return kNoShare;
  const int32_t share = free_.back();
  free_.pop_back();
  shares_[static_cast<size_t>(share)] = Share{client, h, 1, 0};
  index_[i] = share;
  return share;
}

void ClientShares::close_flow(int32_t share) noexcept {
  if (share == kNoShare) return;
  Share& s = shares_[static_cast<size_t>(share)];
  if (--s.flows != 0) return;
  unindex(share);
  free_.push_back(share);
}

void ClientShares::unindex(int32_t share) noexcept {
  size_t i = shares_[static_cast<size_t>(share)].hash & mask_;
  while (index_[i] != share) i = (i + 1) & mask_;
  index_[i] = kNoShare;
  // Backward-shift deletion, as the flow table does: no tombstones.
  for (size_t j = (i + 1) & mask_; index_[j] != kNoShare; j = (j + 1) & mask_) {
    const size_t home = shares_[static_cast<size_t>(index_[j])].hash & mask_;
    const bool home_between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (home_between) continue;
    index_[i] = index_[j];
    index_[j] = kNoShare;
    i = j;
  }
}

bool ClientShares::take_context(int32_t share) noexcept {
  if (share == kNoShare) return true;
  Share& s = shares_[static_cast<size_t>(share)];
  if (s.contexts >= caps_.contexts) return false;
  ++s.contexts;
  return true;
}

void ClientShares::return_context(int32_t share) noexcept {
  if (share == kNoShare) return;
  --shares_[static_cast<size_t>(share)].contexts;
}

}  // namespace sluice::dataplane
