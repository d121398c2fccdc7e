// Port bring-up in the order DPDK wants it: info, configure, queues, start.
#include "ports.h"

#include <rte_ethdev.h>
#include <rte_ether.h>

#include <algorithm>
#include <bit>
#include <cstdio>

#include "rss_owner.h"

namespace sluice::dataplane {
namespace {

// A Toeplitz key made of one repeated 16-bit pattern hashes (a, b) and (b, a)
// alike, so both directions of a TCP flow reach the same queue (Woo and Park,
// "Scalable TCP Session Monitoring with Symmetric Receive-side Scaling").
// rte_eth_rss_conf wants it writable.
std::array<uint8_t, 40> symmetric_key = kSymmetricRssKey;

std::string errno_text(int rc) { return rte_strerror(rc < 0 ? -rc : rc); }

}  // namespace

std::string start_port(uint16_t port, const PortSetup& setup, rte_mempool* pool, PortInfo& info) {
  info.id = port;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port, name);
  info.name = name;

  rte_eth_dev_info dev{};
  if (int rc = rte_eth_dev_info_get(port, &dev); rc != 0) return "port " + info.name + ": no device info: " + errno_text(rc);
  info.driver = dev.driver_name ? dev.driver_name : "?";
  if (dev.max_rx_queues < setup.queues || dev.max_tx_queues < setup.queues) {
    return "port " + info.name + " has " + std::to_string(dev.max_rx_queues) + " receive queues, " +
           std::to_string(setup.queues) + " workers need one each";
  }

  rte_eth_conf conf{};
  // On the addresses alone: a flow's owner is named by its addresses
  // (rss_owner.h), so that a client's flows share one worker.
  const uint64_t rss_types = RTE_ETH_RSS_IP & dev.flow_type_rss_offloads;
  if (setup.queues > 1 && rss_types != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_key = symmetric_key.data();
    conf.rx_adv_conf.rss_conf.rss_key_len = static_cast<uint8_t>(symmetric_key.size());
    conf.rx_adv_conf.rss_conf.rss_hf = rss_types;
    info.rss = true;
  }
  // Receive checksum verification where the device has it: the worker then
  // reads the verdict off the mbuf instead of summing every segment.
  conf.rxmode.offloads = dev.rx_offload_capa & (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM);
  info.rx_checksum = (conf.rxmode.offloads & RTE_ETH_RX_OFFLOAD_TCP_CKSUM) != 0;
  if (int rc = rte_eth_dev_configure(port, setup.queues, setup.queues, &conf); rc != 0) {
    return "port " + info.name + ": cannot configure: " + errno_text(rc);
  }
  uint16_t rxd = setup.rx_descriptors, txd = setup.tx_descriptors;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd); rc != 0) {
    return "port " + info.name + ": descriptor counts: " + errno_text(rc);
  }
  const int socket = rte_eth_dev_socket_id(port);
  for (uint16_t q = 0; q < setup.queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(port, q, rxd, socket < 0 ? 0 : socket, nullptr, pool); rc != 0) {
      return "port " + info.name + ": receive queue " + std::to_string(q) + ": " + errno_text(rc);
    }
    if (int rc = rte_eth_tx_queue_setup(port, q, txd, socket < 0 ? 0 : socket, nullptr); rc != 0) {
      return "port " + info.name + ": transmit queue " + std::to_string(q) + ": " + errno_text(rc);
    }
  }
  if (int rc = rte_eth_dev_start(port); rc != 0) return "port " + info.name + ": cannot start: " + errno_text(rc);
  // A bump in the wire forwards frames addressed to the hosts on either side,
  // not to itself.
  if (int rc = rte_eth_promiscuous_enable(port); rc != 0 && rc != -ENOTSUP) {
    return "port " + info.name + ": cannot enable promiscuous mode: " + errno_text(rc);
  }

  rte_ether_addr mac{};
  rte_eth_macaddr_get(port, &mac);
  char buf[RTE_ETHER_ADDR_FMT_SIZE];
  rte_ether_format_addr(buf, sizeof buf, &mac);
  info.mac = buf;
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port, &link) == 0) {
    info.link_up = link.link_status == RTE_ETH_LINK_UP;
    info.speed_mbps = link.link_speed;
  }
  return {};
}

void stop_port(uint16_t port) noexcept {
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
}

std::string align_redirection(std::span<const uint16_t> ports, uint16_t queues, std::vector<uint16_t>& table) {
  size_t smallest = RssOwner::kMaxEntries;
  std::vector<uint16_t> sizes;
  for (uint16_t port : ports) {
    rte_eth_dev_info dev{};
    if (int rc = rte_eth_dev_info_get(port, &dev); rc != 0) return "no device info: " + errno_text(rc);
    if (dev.reta_size == 0 || !std::has_single_bit(dev.reta_size) || dev.reta_size < queues) {
      return "port " + std::to_string(port) + " has a redirection table of " + std::to_string(dev.reta_size) +
             " entries";
    }
    sizes.push_back(dev.reta_size);
    smallest = std::min<size_t>(smallest, dev.reta_size);
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    std::vector<rte_eth_rss_reta_entry64> reta(sizes[i] / RTE_ETH_RETA_GROUP_SIZE + 1);
    for (size_t e = 0; e < sizes[i]; ++e) {
      auto& group = reta[e / RTE_ETH_RETA_GROUP_SIZE];
      group.mask |= uint64_t{1} << (e % RTE_ETH_RETA_GROUP_SIZE);
      group.reta[e % RTE_ETH_RETA_GROUP_SIZE] = static_cast<uint16_t>((e % smallest) % queues);
    }
    if (int rc = rte_eth_dev_rss_reta_update(ports[i], reta.data(), sizes[i]); rc != 0) {
      return "port " + std::to_string(ports[i]) + ": cannot set its redirection table: " + errno_text(rc);
    }
  }
  table = RssOwner::even_table(smallest, queues);
  return {};
}

}  // namespace sluice::dataplane
