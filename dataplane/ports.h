// EAL ports for the appliance: the client-side and origin-side port, each
// with one receive and one transmit queue per worker, symmetric RSS where the
// device has it, promiscuous, started. Errors come back as one line each
// (the program prints them and exits with a distinct code), never as a crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

struct rte_mempool;

namespace sluice::dataplane {

struct PortInfo {
  uint16_t id = 0;
  std::string name;     // e.g. net_af_packet0, 0000:3b:00.0
  std::string driver;
  std::string mac;
  bool link_up = false;
  uint32_t speed_mbps = 0;
  bool rss = false;     // symmetric RSS configured (false: one queue, or the device has none)
  bool rx_checksum = false;  // the device verifies TCP checksums on receipt (else the workers sum them)
};

struct PortSetup {
  uint16_t queues = 1;
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
};

// Configures and starts `port`. Returns an empty string on success, or what
// went wrong.
[[nodiscard]] std::string start_port(uint16_t port, const PortSetup& setup, rte_mempool* pool, PortInfo& info);

void stop_port(uint16_t port) noexcept;

// Gives the started ports (all with symmetric RSS over `queues` queues) one
// redirection table: entry i names queue (i mod R) mod queues, R the smallest
// table among them, so a flow's frames reach the same queue index on every
// port. Fills `table` with the R entries (what RssOwner takes), or returns
// what went wrong; the ports' tables may then be as the driver left them, and
// the workers must not take the receive queue for the owner.
[[nodiscard]] std::string align_redirection(std::span<const uint16_t> ports, uint16_t queues,
                                            std::vector<uint16_t>& table);

}  // namespace sluice::dataplane
