// Facts about the Linux interfaces sluiced runs on (--af-packet, --af-xdp),
// read before the EAL starts, so that a setting that would break forwarding
// is refused with the command that fixes it rather than found by a counter.
#pragma once

#include <string>

namespace sluice::sluiced {

// Receive offloads that merge segments before a packet socket sees them:
// the merged segment is longer than the link's MTU and carries the first
// segment's checksum, which the workers' receipt check then refuses.
struct MergingOffloads {
  bool gro = false;  // generic-receive-offload
  bool lro = false;  // large-receive-offload
  bool read = true;  // false: the interface did not say (no ethtool support): assumed off
};
[[nodiscard]] MergingOffloads merging_offloads(const std::string& ifname);

// The receive queues an interface has (its /sys/class/net/IF/queues/rx-N
// entries), or 0 where that cannot be read.
[[nodiscard]] unsigned receive_queues(const std::string& ifname);

}  // namespace sluice::sluiced
