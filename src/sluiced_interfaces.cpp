// See sluiced_interfaces.h. The offloads are read with the ethtool ioctl
// (SIOCETHTOOL: ETHTOOL_GGRO, ETHTOOL_GFLAGS), as `ethtool -k` reads them.
#include "sluiced_interfaces.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>
#include <filesystem>

#include "control/unique_fd.h"

namespace sluice::sluiced {

namespace {

// One ethtool "get" of a 32-bit value; false where the interface has no
// answer for it.
bool ethtool_get(int fd, const std::string& ifname, uint32_t cmd, uint32_t& value) {
  struct ethtool_value ev {};
  ev.cmd = cmd;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  ifr.ifr_data = reinterpret_cast<char*>(&ev);
  if (::ioctl(fd, SIOCETHTOOL, &ifr) != 0) return false;
  value = ev.data;
  return true;
}

}  // namespace

MergingOffloads merging_offloads(const std::string& ifname) {
  MergingOffloads m;
  const control::UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  uint32_t gro = 0, flags = 0;
  if (fd.fd < 0 || !ethtool_get(fd.fd, ifname, ETHTOOL_GGRO, gro)) {
    m.read = false;
    return m;
  }
  m.gro = gro != 0;
  m.lro = ethtool_get(fd.fd, ifname, ETHTOOL_GFLAGS, flags) && (flags & ETH_FLAG_LRO) != 0;
  return m;
}

unsigned receive_queues(const std::string& ifname) {
  std::error_code ec;
  unsigned n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net/" + ifname + "/queues", ec)) {
    n += entry.path().filename().string().starts_with("rx-");
  }
  return ec ? 0 : n;
}

}  // namespace sluice::sluiced
