// What each origin's TCP can do, as its SYN-ACKs show it: MSS, window scale,
// SACK, timestamps. The SYN proxy answers a client's SYN before the origin
// is asked, so it promises the client what this table says the origin does,
// and never more: a client promised timestamps the origin then refuses
// could not be carried. Until an origin has answered once, the defaults
// (Linux's: MSS 1460 or 1440, window scale 7, SACK, timestamps) stand in.
//
// A handful of origins sit behind one appliance: a small array searched in
// order, the oldest entry replaced when it is full. Only its worker
// touches it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "net/ip_address.h"

namespace sluice::dataplane {

struct OriginProfile {
  uint16_t mss = 1460;
  int8_t wscale = 7;  // -1: no window scaling
  bool sack = true;
  bool timestamps = true;
};

class OriginProfiles {
 public:
  static constexpr size_t kOrigins = 64;

  [[nodiscard]] OriginProfile lookup(const net::IpAddress& origin) const noexcept {
    for (size_t i = 0; i < count_; ++i) {
      if (entries_[i].origin == origin) return entries_[i].profile;
    }
    OriginProfile d;
    if (!origin.is_v4()) d.mss = 1440;
    return d;
  }

  void learn(const net::IpAddress& origin, const OriginProfile& p) noexcept {
    for (size_t i = 0; i < count_; ++i) {
      if (entries_[i].origin == origin) {
        entries_[i].profile = p;
        return;
      }
    }
    const size_t i = count_ < kOrigins ? count_++ : next_++ % kOrigins;
    entries_[i] = {origin, p};
  }

 private:
  struct Entry {
    net::IpAddress origin;
    OriginProfile profile;
  };
  std::array<Entry, kOrigins> entries_{};
  size_t count_ = 0;
  size_t next_ = 0;
};

}  // namespace sluice::dataplane
