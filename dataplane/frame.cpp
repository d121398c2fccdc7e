// Header walk: Ethernet, up to two VLAN tags, IPv4 (options allowed) or IPv6
// (extension headers walked, however many the packet holds), TCP with its
// options. What could carry TCP past the walk is kOpaque (frame.h).
#include "frame.h"

#include <array>
#include <cstring>

namespace sluice::dataplane {
namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr uint16_t kEtherVlan = 0x8100;
constexpr uint16_t kEtherQinQ = 0x88a8;
constexpr uint16_t kEtherMpls = 0x8847;
constexpr uint16_t kEtherMplsMulticast = 0x8848;
constexpr uint16_t kEtherPppoeSession = 0x8864;
constexpr uint8_t kProtoTcp = 6;

// IP protocols (and IPv6 extension headers the walk does not follow) behind
// which a TCP segment could reach a host that unwraps them: IP in IP, IPv6
// in IP, GRE, ESP, AH, EtherIP, IPComp, L2TP, MPLS in IP; Mobility, HIP,
// Shim6 and the experimental numbers.
inline constexpr std::array<bool, 256> kOpaqueProtocol = [] {
  std::array<bool, 256> t{};
  for (const uint8_t p : {4, 41, 47, 50, 51, 97, 108, 115, 137, 135, 139, 140, 253, 254}) t[p] = true;
  return t;
}();

void parse_options(const uint8_t* p, size_t len, TcpOptions& o) noexcept {
  TcpOptionWalk walk(p, len);
  TcpOption opt;
  while (walk.next(opt)) {  // a malformed rest is ignored, as a stack would
    const uint8_t* value = p + opt.at + 2;
    switch (opt.kind) {
      case tcp_option::kMss:
        if (opt.len == 4) o.mss = load16(value);
        break;
      case tcp_option::kWindowScale:
        if (opt.len == 3) {
          o.has_wscale = true;
          o.wscale = value[0];
        }
        break;
      case tcp_option::kSackPermitted:
        if (opt.len == 2) o.sack_permitted = true;
        break;
      case tcp_option::kTimestamp:
        if (opt.len == 10) {
          o.has_timestamp = true;
          o.tsval = load32(value);
          o.tsecr = load32(value + 4);
        }
        break;
      default:
        break;
    }
  }
}

// What the IP header (and, for IPv6, its extension headers) says about the
// transport header behind it.
struct L3 {
  uint8_t proto = 0;
  size_t l4 = 0;      // offset of the transport header
  size_t ip_end = 0;  // offset just past the IP packet: Ethernet padding is not part of it
  bool fragment = false;
  bool first_fragment = false;
  bool opaque = false;  // a routing header with segments left: the destination is not the one read
};

// The helpers below each run once per frame from parse_frame: forced inline so
// the split costs neither a call nor the spill of the FrameView being filled.

// Steps over the MAC addresses and at most two VLAN tags (802.1Q, QinQ) to
// the EtherType that names the payload. False if the frame ends inside them;
// `vlan_tags` counts the tags read until then. A third tag is left as the
// EtherType: parse_frame() drops it.
[[gnu::always_inline]] inline bool walk_l2(const uint8_t* f, size_t n, FrameView& v, uint16_t& type) noexcept {
  if (n < 14) return false;
  size_t off = 12;
  type = load16(f + off);
  while ((type == kEtherVlan || type == kEtherQinQ) && v.vlan_tags < 2) {
    if (n < off + 6) return false;
    off += 4;
    ++v.vlan_tags;
    type = load16(f + off);
  }
  v.l3_offset = static_cast<uint16_t>(off + 2);
  return true;
}

[[gnu::always_inline]] inline bool read_ipv4(const uint8_t* f, size_t n, size_t off, FrameView& v, L3& ip) noexcept {
  if (n < off + 20 || (f[off] >> 4) != 4) return false;
  v.ip_version = 4;
  const size_t ihl = static_cast<size_t>(f[off] & 0x0f) * 4;
  const size_t total = load16(f + off + 2);
  if (ihl < 20 || total < ihl || off + total > n) return false;
  const uint16_t frag = load16(f + off + 6);
  ip.fragment = (frag & 0x3fff) != 0;  // MF set or an offset
  ip.first_fragment = ip.fragment && (frag & 0x1fff) == 0;
  ip.proto = f[off + 9];
  v.src = net::IpAddress::v4(load32(f + off + 12));
  v.dst = net::IpAddress::v4(load32(f + off + 16));
  ip.l4 = off + ihl;
  ip.ip_end = off + total;
  return true;
}

// Follows hop-by-hop, routing, destination options and fragment headers to
// the transport header, however many there are: each is at least 8 bytes, so
// the packet bounds the walk. An attacker's chain of nine is walked like a
// client's one. False if a header does not fit in the packet.
[[gnu::always_inline]] inline bool walk_ipv6_extensions(const uint8_t* f, L3& ip) noexcept {
  for (;;) {
    if (ip.proto == 0 || ip.proto == 43 || ip.proto == 60) {
      if (ip.l4 + 8 > ip.ip_end) return false;
      // A routing header with segments left sends the packet on to another
      // address, and the transport checksum is over that one.
      if (ip.proto == 43 && f[ip.l4 + 3] != 0) ip.opaque = true;
      const size_t len = (static_cast<size_t>(f[ip.l4 + 1]) + 1) * 8;
      ip.proto = f[ip.l4];
      ip.l4 += len;
    } else if (ip.proto == 44) {
      if (ip.l4 + 8 > ip.ip_end) return false;
      const uint16_t frag = load16(f + ip.l4 + 2);
      ip.fragment = true;
      ip.first_fragment = (frag & 0xfff8) == 0;
      ip.proto = f[ip.l4];
      ip.l4 += 8;
      // Behind a later fragment are data, not headers.
      if (!ip.first_fragment) return ip.l4 <= ip.ip_end;
    } else {
      // A header's stated length may run past the packet.
      return ip.l4 <= ip.ip_end;
    }
  }
}

[[gnu::always_inline]] inline bool read_ipv6(const uint8_t* f, size_t n, size_t off, FrameView& v, L3& ip) noexcept {
  if (n < off + 40 || (f[off] >> 4) != 6) return false;
  v.ip_version = 6;
  const size_t payload = load16(f + off + 4);
  if (off + 40 + payload > n) return false;
  std::array<uint8_t, 16> a;
  std::memcpy(a.data(), f + off + 8, 16);
  v.src = net::IpAddress::v6(a);
  std::memcpy(a.data(), f + off + 24, 16);
  v.dst = net::IpAddress::v6(a);
  ip.ip_end = off + 40 + payload;
  ip.proto = f[off + 6];
  ip.l4 = off + 40;
  return walk_ipv6_extensions(f, ip);
}

// The TCP header of a whole (unfragmented) segment, from its sequence number
// on, with its options, and where the payload is.
[[gnu::always_inline]] inline FrameKind read_tcp(const uint8_t* f, size_t l4, size_t ip_end, FrameView& v) noexcept {
  if (l4 + 20 > ip_end) return FrameKind::kMalformed;
  const size_t doff = static_cast<size_t>(f[l4 + 12] >> 4) * 4;
  if (doff < 20 || l4 + doff > ip_end) return FrameKind::kMalformed;
  v.seq = load32(f + l4 + 4);
  v.ack = load32(f + l4 + 8);
  v.flags = f[l4 + 13];
  v.window = load16(f + l4 + 14);
  // NOP, NOP, timestamps: what Linux and most stacks put on every segment
  // after the handshake; anything else takes the general walk.
  if (doff == 32 && load32(f + l4 + 20) == 0x0101080au) {
    v.options.has_timestamp = true;
    v.options.tsval = load32(f + l4 + 24);
    v.options.tsecr = load32(f + l4 + 28);
  } else if (doff > 20) {
    parse_options(f + l4 + 20, doff - 20, v.options);
  }
  v.payload_offset = static_cast<uint16_t>(l4 + doff);
  v.payload_len = static_cast<uint32_t>(ip_end - (l4 + doff));
  return FrameKind::kTcp;
}

// What the transport header makes of a well-formed IP packet. A first
// fragment yields its ports only: the rest of the segment is not here, and a
// header cut short in it is not a malformed frame.
[[gnu::always_inline]] inline FrameKind read_l4(const uint8_t* f, const L3& ip, FrameView& v) noexcept {
  if (ip.fragment && !ip.first_fragment) return FrameKind::kIpOther;  // its first fragment was judged
  if (ip.opaque || kOpaqueProtocol[ip.proto]) return FrameKind::kOpaque;
  if (ip.proto != kProtoTcp) return FrameKind::kIpOther;
  v.l4_offset = static_cast<uint16_t>(ip.l4);
  // A first fragment must show the ports, or nobody can tell whose it is.
  if (ip.l4 + 4 > ip.ip_end) return ip.fragment ? FrameKind::kOpaque : FrameKind::kMalformed;
  v.sport = load16(f + ip.l4);
  v.dport = load16(f + ip.l4 + 2);
  if (ip.fragment) return FrameKind::kTcpFragment;
  return read_tcp(f, ip.l4, ip.ip_end, v);
}

}  // namespace

FrameView parse_frame(std::span<const uint8_t> frame) noexcept {
  FrameView v;
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  uint16_t type = 0;
  if (!walk_l2(f, n, v, type)) {
    v.kind = FrameKind::kMalformed;
    return v;
  }
  if (type != kEtherIpv4 && type != kEtherIpv6) {
    const bool may_carry_ip = type == kEtherVlan || type == kEtherQinQ || type == kEtherMpls ||
                              type == kEtherMplsMulticast || type == kEtherPppoeSession;
    v.kind = may_carry_ip ? FrameKind::kOpaque : FrameKind::kNonIp;
    return v;
  }
  L3 ip;
  const bool ip_ok = type == kEtherIpv4 ? read_ipv4(f, n, v.l3_offset, v, ip) : read_ipv6(f, n, v.l3_offset, v, ip);
  if (!ip_ok) {
    v.kind = FrameKind::kMalformed;
    return v;
  }
  v.frame_len = static_cast<uint32_t>(ip.ip_end);
  v.kind = read_l4(f, ip, v);
  return v;
}

}  // namespace sluice::dataplane
