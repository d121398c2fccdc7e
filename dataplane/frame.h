// What the data plane needs to know about one Ethernet frame: where its
// IP and TCP headers are, the TCP fields and options flow tracking reads,
// and where the payload is. Works on raw bytes (no DPDK), so it is unit-tested
// without a NIC and shared by the worker, the tests and the packet-rate harness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "net/ip_address.h"

namespace sluice::dataplane {

// Fail closed (dataplane/README.md, "What reaches the origin"): what may
// carry a TCP segment to a service port that the appliance cannot read is
// never bridged.
enum class FrameKind : uint8_t {
  kNonIp,        // ARP, LLDP, STP, anything that cannot carry IP: bridged
  kIpOther,      // IP with a transport other than TCP (ICMP, UDP, ...), or a later fragment: bridged
  kTcp,          // a whole TCP segment: `tcp` is valid
  kTcpFragment,  // the first fragment of a TCP segment: ports known, segment not whole
  kOpaque,       // may hide TCP the appliance cannot read (ESP, AH, tunnels, an unknown IPv6
                 // extension, a routing header still to be followed, a third VLAN tag, MPLS,
                 // PPPoE, a first fragment too short for the ports): dropped
  kMalformed,    // truncated or inconsistent headers: dropped, never parsed
};

namespace tcp_flag {
inline constexpr uint8_t kFin = 0x01;
inline constexpr uint8_t kSyn = 0x02;
inline constexpr uint8_t kRst = 0x04;
inline constexpr uint8_t kPsh = 0x08;
inline constexpr uint8_t kAck = 0x10;
inline constexpr uint8_t kUrg = 0x20;
}  // namespace tcp_flag

struct TcpOptions {
  uint16_t mss = 0;        // 0: absent
  bool sack_permitted = false;
  bool has_timestamp = false;
  bool has_wscale = false;
  uint8_t wscale = 0;
  uint32_t tsval = 0;
  uint32_t tsecr = 0;
};

// TCP option kinds the data plane reads or writes (RFC 9293 3.1, RFC 2018, RFC 7323).
namespace tcp_option {
inline constexpr uint8_t kEol = 0;
inline constexpr uint8_t kNop = 1;
inline constexpr uint8_t kMss = 2;
inline constexpr uint8_t kWindowScale = 3;
inline constexpr uint8_t kSackPermitted = 4;
inline constexpr uint8_t kSack = 5;
inline constexpr uint8_t kTimestamp = 8;
inline constexpr size_t kAreaAt = 20;  // the options area starts after the fixed header
}  // namespace tcp_option

// One option of a TCP header: its kind, its length (kind and length bytes
// included) and where its kind byte is in the options area.
struct TcpOption {
  uint8_t kind = 0;
  uint8_t len = 0;
  size_t at = 0;
};

// The one walk over a TCP options area `p[0, len)`: EOL ends the list (the
// rest is padding), NOP is stepped over, every other option must carry a
// length of at least 2 that stays inside the area. next() yields the options
// in order; it returns false at the end or at the first option that breaks
// those rules, and malformed() tells which. What a caller does with a broken
// list is its own choice: the flow tracker keeps the options read before it,
// as a stack would; the SACK and timestamp rewrites leave the segment as it
// came.
class TcpOptionWalk {
 public:
  TcpOptionWalk(const uint8_t* p, size_t len) noexcept : p_(p), len_(len) {}

  [[nodiscard]] bool next(TcpOption& o) noexcept {
    while (i_ < len_) {
      const uint8_t kind = p_[i_];
      if (kind == tcp_option::kEol) break;
      if (kind == tcp_option::kNop) {
        ++i_;
        continue;
      }
      if (i_ + 1 >= len_ || p_[i_ + 1] < 2 || i_ + p_[i_ + 1] > len_) {
        malformed_ = true;
        break;
      }
      o.kind = kind;
      o.len = p_[i_ + 1];
      o.at = i_;
      i_ += o.len;
      return true;
    }
    i_ = len_;
    return false;
  }
  [[nodiscard]] bool malformed() const noexcept { return malformed_; }

 private:
  const uint8_t* p_;
  size_t len_;
  size_t i_ = 0;
  bool malformed_ = false;
};

struct FrameView {
  FrameKind kind = FrameKind::kNonIp;
  uint8_t ip_version = 0;  // 4 or 6
  uint8_t vlan_tags = 0;   // 802.1Q / 802.1ad tags in front of the IP header
  uint16_t l3_offset = 0;  // also the length of the Ethernet header with its tags
  uint16_t l4_offset = 0;
  uint16_t payload_offset = 0;
  uint32_t payload_len = 0;  // TCP payload, from the IP length (Ethernet padding excluded)
  uint32_t frame_len = 0;    // bytes of the frame that belong to the IP packet, L2 included
  net::IpAddress src, dst;
  uint16_t sport = 0, dport = 0;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  uint16_t window = 0;
  TcpOptions options;  // parsed only on SYN segments and for the timestamp

  [[nodiscard]] bool has(uint8_t f) const noexcept { return (flags & f) != 0; }
};

// The TCP payload of the frame `v` describes, as the parsers read it.
[[nodiscard]] inline std::span<const char> payload_chars(const uint8_t* frame, const FrameView& v) noexcept {
  return {reinterpret_cast<const char*>(frame + v.payload_offset), v.payload_len};
}

// Reads the headers of `frame`. Never reads past it; a frame whose headers do
// not fit or do not agree is kMalformed.
[[nodiscard]] FrameView parse_frame(std::span<const uint8_t> frame) noexcept;

// Big-endian loads and stores: frames are in network order.
[[nodiscard]] inline uint16_t load16(const uint8_t* p) noexcept { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
[[nodiscard]] inline uint32_t load32(const uint8_t* p) noexcept {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 | static_cast<uint32_t>(p[2]) << 8 | p[3];
}
inline void store16(uint8_t* p, uint16_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void store32(uint8_t* p, uint32_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

}  // namespace sluice::dataplane
