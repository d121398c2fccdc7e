// Header walk: Ethernet, up to two VLAN tags, IPv4 (options allowed) or IPv6
// (extension headers walked), TCP with its options.
#include "frame.h"

#include <cstring>

namespace sluice::dataplane {
namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr uint16_t kEtherVlan = 0x8100;
constexpr uint16_t kEtherQinQ = 0x88a8;
constexpr uint8_t kProtoTcp = 6;

void parse_options(const uint8_t* p, size_t len, TcpOptions& o) noexcept {
  size_t i = 0;
  while (i < len) {
    const uint8_t kind = p[i];
    if (kind == 0) break;  // end of options
    if (kind == 1) {       // no-op
      ++i;
      continue;
    }
    if (i + 1 >= len) break;
    const uint8_t olen = p[i + 1];
    if (olen < 2 || i + olen > len) break;  // malformed: ignore the rest, as a stack would
    switch (kind) {
      case 2:
        if (olen == 4) o.mss = load16(p + i + 2);
        break;
      case 3:
        if (olen == 3) {
          o.has_wscale = true;
          o.wscale = p[i + 2];
        }
        break;
      case 4:
        if (olen == 2) o.sack_permitted = true;
        break;
      case 8:
        if (olen == 10) {
          o.has_timestamp = true;
          o.tsval = load32(p + i + 2);
          o.tsecr = load32(p + i + 6);
        }
        break;
      default:
        break;
    }
    i += olen;
  }
}

}  // namespace

FrameView parse_frame(std::span<const uint8_t> frame) noexcept {
  FrameView v;
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  if (n < 14) {
    v.kind = FrameKind::kMalformed;
    return v;
  }
  size_t off = 12;
  uint16_t type = load16(f + off);
  while ((type == kEtherVlan || type == kEtherQinQ) && v.vlan_tags < 2) {
    if (n < off + 6) {
      v.kind = FrameKind::kMalformed;
      return v;
    }
    off += 4;
    ++v.vlan_tags;
    type = load16(f + off);
  }
  off += 2;
  v.l3_offset = static_cast<uint16_t>(off);
  if (type != kEtherIpv4 && type != kEtherIpv6) {
    v.kind = FrameKind::kNonIp;
    return v;
  }

  uint8_t proto = 0;
  size_t l4 = 0;
  size_t ip_end = 0;
  bool fragment = false;
  bool first_fragment = false;
  if (type == kEtherIpv4) {
    if (n < off + 20 || (f[off] >> 4) != 4) {
      v.kind = FrameKind::kMalformed;
      return v;
    }
    v.ip_version = 4;
    const size_t ihl = static_cast<size_t>(f[off] & 0x0f) * 4;
    const size_t total = load16(f + off + 2);
    if (ihl < 20 || total < ihl || off + total > n) {
      v.kind = FrameKind::kMalformed;
      return v;
    }
    const uint16_t frag = load16(f + off + 6);
    fragment = (frag & 0x3fff) != 0;           // MF set or an offset
    first_fragment = fragment && (frag & 0x1fff) == 0;
    proto = f[off + 9];
    v.src = net::IpAddress::v4(load32(f + off + 12));
    v.dst = net::IpAddress::v4(load32(f + off + 16));
    l4 = off + ihl;
    ip_end = off + total;
  } else {
    if (n < off + 40 || (f[off] >> 4) != 6) {
      v.kind = FrameKind::kMalformed;
      return v;
    }
    v.ip_version = 6;
    const size_t payload = load16(f + off + 4);
    if (off + 40 + payload > n) {
      v.kind = FrameKind::kMalformed;
      return v;
    }
    std::array<uint8_t, 16> a;
    std::memcpy(a.data(), f + off + 8, 16);
    v.src = net::IpAddress::v6(a);
    std::memcpy(a.data(), f + off + 24, 16);
    v.dst = net::IpAddress::v6(a);
    ip_end = off + 40 + payload;
    proto = f[off + 6];
    l4 = off + 40;
    // Extension headers: hop-by-hop, routing, destination options, fragment.
    for (int hops = 0; hops < 8; ++hops) {
      if (proto == 0 || proto == 43 || proto == 60) {
        if (l4 + 8 > ip_end) {
          v.kind = FrameKind::kMalformed;
          return v;
        }
        const size_t len = (static_cast<size_t>(f[l4 + 1]) + 1) * 8;
        proto = f[l4];
        l4 += len;
      } else if (proto == 44) {
        if (l4 + 8 > ip_end) {
          v.kind = FrameKind::kMalformed;
          return v;
        }
        const uint16_t frag = load16(f + l4 + 2);
        fragment = true;
        first_fragment = (frag & 0xfff8) == 0;
        proto = f[l4];
        l4 += 8;
      } else {
        break;
      }
    }
    if (l4 > ip_end) {
      v.kind = FrameKind::kMalformed;
      return v;
    }
  }
  v.frame_len = static_cast<uint32_t>(ip_end);
  if (proto != kProtoTcp || (fragment && !first_fragment)) {
    v.kind = FrameKind::kIpOther;
    return v;
  }
  v.l4_offset = static_cast<uint16_t>(l4);
  if (l4 + 4 > ip_end) {
    v.kind = fragment ? FrameKind::kIpOther : FrameKind::kMalformed;
    return v;
  }
  v.sport = load16(f + l4);
  v.dport = load16(f + l4 + 2);
  if (fragment) {
    v.kind = FrameKind::kTcpFragment;
    return v;
  }
  if (l4 + 20 > ip_end) {
    v.kind = FrameKind::kMalformed;
    return v;
  }
  const size_t doff = static_cast<size_t>(f[l4 + 12] >> 4) * 4;
  if (doff < 20 || l4 + doff > ip_end) {
    v.kind = FrameKind::kMalformed;
    return v;
  }
  v.seq = load32(f + l4 + 4);
  v.ack = load32(f + l4 + 8);
  v.flags = f[l4 + 13];
  v.window = load16(f + l4 + 14);
  if (doff > 20) parse_options(f + l4 + 20, doff - 20, v.options);
  v.payload_offset = static_cast<uint16_t>(l4 + doff);
  v.payload_len = static_cast<uint32_t>(ip_end - (l4 + doff));
  v.kind = FrameKind::kTcp;
  return v;
}

}  // namespace sluice::dataplane
