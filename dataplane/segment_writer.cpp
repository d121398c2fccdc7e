// Segment layout: L2 as given, a 20-byte IPv4 header (DF, TTL 64) or a
// 40-byte IPv6 header (hop limit 64), a TCP header with the timestamp
// option when asked, the payload.
#include "segment_writer.h"

#include <cstring>

#include "checksum.h"

namespace sluice::dataplane {

size_t segment_size(const SegmentSpec& s) noexcept {
  return s.l2.size() + (s.ip_version == 4 ? 20 : 40) + 20 + options_size(s) + s.payload.size();
}

namespace {

void write_options(uint8_t* o, const SegmentSpec& s) noexcept {
  using namespace tcp_option;
  if (s.mss != 0) {
    o[0] = kMss;
    o[1] = 4;
    store16(o + 2, s.mss);
    o += 4;
  }
  if (s.timestamp) {
    // SACK-permitted takes the place of the two NOPs.
    o[0] = s.sack_permitted ? kSackPermitted : kNop;
    o[1] = s.sack_permitted ? 2 : kNop;
    o[2] = kTimestamp;
    o[3] = 10;
    store32(o + 4, s.tsval);
    store32(o + 8, s.tsecr);
    o += kTimestampOptionBytes;
  } else if (s.sack_permitted) {
    o[0] = kNop;
    o[1] = kNop;
    o[2] = kSackPermitted;
    o[3] = 2;
    o += 4;
  }
  if (s.wscale >= 0) {
    o[0] = kNop;
    o[1] = kWindowScale;
    o[2] = 3;
    o[3] = static_cast<uint8_t>(s.wscale);
  }
}

}  // namespace

size_t write_segment(std::span<uint8_t> out, const SegmentSpec& s) noexcept {
  const size_t total = segment_size(s);
  if (out.size() < total || total > 0xffff) return 0;
  uint8_t* f = out.data();
  std::memcpy(f, s.l2.data(), s.l2.size());
  uint8_t* ip = f + s.l2.size();
  const size_t tcp_hdr = 20 + options_size(s);
  const size_t tcp_len = tcp_hdr + s.payload.size();
  size_t ip_hdr;
  if (s.ip_version == 4) {
    ip_hdr = 20;
    ip[0] = 0x45;
    ip[1] = 0;
    store16(ip + 2, static_cast<uint16_t>(ip_hdr + tcp_len));
    store16(ip + 4, s.ip_id);
    store16(ip + 6, 0x4000);  // don't fragment
    ip[8] = 64;
    ip[9] = 6;
    std::memcpy(ip + 12, s.src.bytes.data() + 12, 4);
    std::memcpy(ip + 16, s.dst.bytes.data() + 12, 4);
    set_ipv4_checksum(ip, ip_hdr);
  } else {
    ip_hdr = 40;
    store32(ip, 0x60000000u);
    store16(ip + 4, static_cast<uint16_t>(tcp_len));
    ip[6] = 6;
    ip[7] = 64;
    std::memcpy(ip + 8, s.src.bytes.data(), 16);
    std::memcpy(ip + 24, s.dst.bytes.data(), 16);
  }
  uint8_t* tcp = ip + ip_hdr;
  store16(tcp, s.sport);
  store16(tcp + 2, s.dport);
  store32(tcp + 4, s.seq);
  store32(tcp + 8, s.ack);
  tcp[12] = static_cast<uint8_t>((tcp_hdr / 4) << 4);
  tcp[13] = s.flags;
  store16(tcp + 14, s.window);
  store16(tcp + 16, 0);
  store16(tcp + 18, 0);
  write_options(tcp + 20, s);
  if (!s.payload.empty()) std::memcpy(tcp + tcp_hdr, s.payload.data(), s.payload.size());

  FrameView v;
  v.ip_version = s.ip_version;
  v.l3_offset = static_cast<uint16_t>(s.l2.size());
  v.l4_offset = static_cast<uint16_t>(s.l2.size() + ip_hdr);
  v.frame_len = static_cast<uint32_t>(total);
  set_tcp_checksum(f, v);
  return total;
}

void change_payload_length(uint8_t* frame, FrameView& v, int32_t delta) noexcept {
  v.payload_len = static_cast<uint32_t>(static_cast<int64_t>(v.payload_len) + delta);
  v.frame_len = static_cast<uint32_t>(static_cast<int64_t>(v.frame_len) + delta);
  uint8_t* ip = frame + v.l3_offset;
  if (v.ip_version == 4) {
    store16(ip + 2, static_cast<uint16_t>(load16(ip + 2) + delta));
    set_ipv4_checksum(ip, static_cast<size_t>(ip[0] & 0x0f) * 4);
  } else {
    store16(ip + 4, static_cast<uint16_t>(load16(ip + 4) + delta));
  }
}

uint32_t trim_payload(uint8_t* frame, FrameView& v, uint32_t keep) noexcept {
  if (keep >= v.payload_len) return v.frame_len;
  change_payload_length(frame, v, -static_cast<int32_t>(v.payload_len - keep));
  set_tcp_checksum(frame, v);
  return v.frame_len;
}

uint32_t cut_payload(uint8_t* frame, FrameView& v, uint32_t keep) noexcept {
  if (keep >= v.payload_len) return v.frame_len;
  frame[v.l4_offset + 13] &= static_cast<uint8_t>(~tcp_flag::kFin);
  v.flags &= static_cast<uint8_t>(~tcp_flag::kFin);
  return trim_payload(frame, v, keep);
}

void clear_urgent(uint8_t* frame, FrameView& v) noexcept {
  v.flags &= static_cast<uint8_t>(~tcp_flag::kUrg);
  frame[v.l4_offset + 13] = v.flags;
  store16(frame + v.l4_offset + 18, 0);
  set_tcp_checksum(frame, v);
}

uint32_t trim_front(uint8_t* frame, FrameView& v, uint32_t drop) noexcept {
  if (drop == 0 || drop >= v.payload_len) return v.frame_len;
  const uint32_t keep = v.payload_len - drop;
  std::memmove(frame + v.payload_offset, frame + v.payload_offset + drop, keep);
  v.seq += drop;
  store32(frame + v.l4_offset + 4, v.seq);
  change_payload_length(frame, v, -static_cast<int32_t>(drop));
  set_tcp_checksum(frame, v);
  return v.frame_len;
}

}  // namespace sluice::dataplane
