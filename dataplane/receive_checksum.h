// Whether a received segment's checksums are right: the port's verdict where
// it verified them (receive checksum offload sets RTE_MBUF_F_RX_*_CKSUM_GOOD
// or _BAD), the sum in software where it did not (AF_PACKET, AF_XDP) or could
// not tell (_UNKNOWN, and _NONE: data intact but the field not filled in,
// which the appliance cannot forward as it is).
#pragma once

#include <rte_mbuf_core.h>

#include <cstdint>

#include "checksum.h"
#include "frame.h"

namespace sluice::dataplane {

// `ol_flags` is the mbuf's offload flags; `frame` and `v` the segment.
[[nodiscard]] inline bool received_checksums_right(uint64_t ol_flags, const uint8_t* frame,
                                                   const FrameView& v) noexcept {
  const uint64_t l4 = ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
  const uint64_t ip = ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD || (v.ip_version == 4 && ip == RTE_MBUF_F_RX_IP_CKSUM_BAD)) return false;
  if (v.ip_version == 4 && ip != RTE_MBUF_F_RX_IP_CKSUM_GOOD && !ipv4_checksum_ok(frame, v)) return false;
  return l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD || tcp_checksum_ok(frame, v);
}

}  // namespace sluice::dataplane
