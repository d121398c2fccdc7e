// Test support: captures written by hand. TCP segments framed on Ethernet
// (optionally VLAN-tagged), Linux cooked SLL/SLL2 or raw IP, over IPv4 or
// IPv6, and written as classic pcap (either byte order, micro- or
// nanosecond) or pcapng (either byte order, any if_tsresol, several
// interfaces, enhanced or simple packet blocks). A Conversation numbers one
// connection's segments the way TCP would, so tests only say what is sent.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "net/ip_address.h"

namespace sluice::test {

namespace tcp {
inline constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;
}

struct TcpSegment {
  net::IpAddress src, dst;
  uint16_t sport = 0, dport = 0;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  std::string payload;
};

enum class Link : uint8_t { kEthernet, kEthernetVlan, kSll, kSll2, kRaw };

[[nodiscard]] inline uint32_t link_type_of(Link l) {
  switch (l) {
    case Link::kSll: return 113;
    case Link::kSll2: return 276;
    case Link::kRaw: return 101;
    default: return 1;
  }
}

namespace pcap_detail {

inline void put16(std::vector<uint8_t>& o, uint16_t v, bool big = true) {
  o.push_back(static_cast<uint8_t>(big ? v >> 8 : v));
  o.push_back(static_cast<uint8_t>(big ? v : v >> 8));
}
inline void put32(std::vector<uint8_t>& o, uint32_t v, bool big = true) {
  for (int i = 0; i < 4; ++i) o.push_back(static_cast<uint8_t>(v >> (big ? 24 - 8 * i : 8 * i)));
}
inline uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}
inline uint32_t add_words(uint32_t sum, const uint8_t* p, size_t n) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n % 2 != 0) sum += static_cast<uint32_t>(p[n - 1] << 8);
  return sum;
}

// The IP packet (header, TCP header, payload), checksums included.
inline std::vector<uint8_t> ip_packet(const TcpSegment& s) {
  const bool v4 = s.src.is_v4();
  std::vector<uint8_t> tcp;
  put16(tcp, s.sport), put16(tcp, s.dport), put32(tcp, s.seq), put32(tcp, s.ack);
  tcp.push_back(5 << 4), tcp.push_back(s.flags), put16(tcp, 65535), put16(tcp, 0), put16(tcp, 0);
  tcp.insert(tcp.end(), s.payload.begin(), s.payload.end());
  // The pseudo-header: addresses, protocol, TCP length.
  const size_t a = v4 ? 12 : 0, alen = v4 ? 4 : 16;
  uint32_t sum = add_words(0, s.src.bytes.data() + a, alen);
  sum = add_words(sum, s.dst.bytes.data() + a, alen);
  sum += 6 + static_cast<uint32_t>(tcp.size());
  const uint16_t c = fold(add_words(sum, tcp.data(), tcp.size()));
  tcp[16] = static_cast<uint8_t>(c >> 8), tcp[17] = static_cast<uint8_t>(c);
  std::vector<uint8_t> ip;
  if (v4) {
    ip = {0x45, 0};
    put16(ip, static_cast<uint16_t>(20 + tcp.size())), put16(ip, 1), put16(ip, 0x4000);
    ip.push_back(64), ip.push_back(6), put16(ip, 0);
    ip.insert(ip.end(), s.src.bytes.begin() + 12, s.src.bytes.end());
    ip.insert(ip.end(), s.dst.bytes.begin() + 12, s.dst.bytes.end());
    const uint16_t h = fold(add_words(0, ip.data(), 20));
    ip[10] = static_cast<uint8_t>(h >> 8), ip[11] = static_cast<uint8_t>(h);
  } else {
    ip = {0x60, 0, 0, 0};
    put16(ip, static_cast<uint16_t>(tcp.size())), ip.push_back(6), ip.push_back(64);
    ip.insert(ip.end(), s.src.bytes.begin(), s.src.bytes.end());
    ip.insert(ip.end(), s.dst.bytes.begin(), s.dst.bytes.end());
  }
  ip.insert(ip.end(), tcp.begin(), tcp.end());
  return ip;
}

}  // namespace pcap_detail

// The frame carrying `s` on `link`.
[[nodiscard]] inline std::vector<uint8_t> frame_of(const TcpSegment& s, Link link) {
  using namespace pcap_detail;
  const uint16_t type = s.src.is_v4() ? 0x0800 : 0x86dd;
  std::vector<uint8_t> f;
  switch (link) {
    case Link::kEthernet:
    case Link::kEthernetVlan:
      f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2};
      if (link == Link::kEthernetVlan) put16(f, 0x8100), put16(f, 42);
      put16(f, type);
      break;
    case Link::kSll:
      put16(f, 0), put16(f, 1), put16(f, 6);
      f.insert(f.end(), {0x02, 0, 0, 0, 0, 1, 0, 0});
      put16(f, type);
      break;
    case Link::kSll2:
      put16(f, type), put16(f, 0), put32(f, 3), put16(f, 1), f.push_back(0), f.push_back(6);
      f.insert(f.end(), {0x02, 0, 0, 0, 0, 1, 0, 0});
      break;
    case Link::kRaw: break;
  }
  const std::vector<uint8_t> ip = ip_packet(s);
  f.insert(f.end(), ip.begin(), ip.end());
  return f;
}

struct CapPacket {
  uint64_t at = 0;  // UTC ns
  std::vector<uint8_t> bytes;
  uint32_t interface = 0;  // pcapng only
  bool simple = false;     // pcapng: a simple packet block (no interface, no time)
};

// Classic pcap.
[[nodiscard]] inline std::string pcap_file(const std::vector<CapPacket>& packets, uint32_t link_type, bool big = false,
                                           bool nanos = false) {
  using namespace pcap_detail;
  std::vector<uint8_t> o;
  put32(o, nanos ? 0xa1b23c4d : 0xa1b2c3d4, big), put16(o, 2, big), put16(o, 4, big);
  put32(o, 0, big), put32(o, 0, big), put32(o, 262144, big), put32(o, link_type, big);
  for (const CapPacket& p : packets) {
    put32(o, static_cast<uint32_t>(p.at / 1'000'000'000), big);
    put32(o, static_cast<uint32_t>(p.at % 1'000'000'000 / (nanos ? 1 : 1000)), big);
    put32(o, static_cast<uint32_t>(p.bytes.size()), big), put32(o, static_cast<uint32_t>(p.bytes.size()), big);
    o.insert(o.end(), p.bytes.begin(), p.bytes.end());
  }
  return {o.begin(), o.end()};
}

struct NgInterface {
  uint32_t link_type = 1;
  uint8_t tsresol = 6;  // 10^-tsresol seconds, or 2^-(tsresol & 0x7f) with the high bit set (up to 2^-63)
};

// pcapng: one section, the interfaces in order, then the packets.
[[nodiscard]] inline std::string pcapng_file(const std::vector<CapPacket>& packets,
                                             const std::vector<NgInterface>& interfaces, bool big = false) {
  using namespace pcap_detail;
  std::vector<uint8_t> o;
  auto block = [&](uint32_t type, const std::vector<uint8_t>& body) {
    const size_t padded = (body.size() + 3) & ~size_t{3};
    put32(o, type, big), put32(o, static_cast<uint32_t>(12 + padded), big);
    o.insert(o.end(), body.begin(), body.end());
    o.insert(o.end(), padded - body.size(), 0);
    put32(o, static_cast<uint32_t>(12 + padded), big);
  };
  std::vector<uint8_t> b;
  put32(b, 0x1a2b3c4d, big), put16(b, 1, big), put16(b, 0, big), put32(b, 0xffffffff, big), put32(b, 0xffffffff, big);
  block(0x0a0d0d0a, b);
  for (const NgInterface& i : interfaces) {
    b.clear();
    put16(b, static_cast<uint16_t>(i.link_type), big), put16(b, 0, big), put32(b, 0, big);
    put16(b, 9, big), put16(b, 1, big), b.insert(b.end(), {i.tsresol, 0, 0, 0});
    put16(b, 0, big), put16(b, 0, big);
    block(1, b);
  }
  for (const CapPacket& p : packets) {
    b.clear();
    if (p.simple) {
      put32(b, static_cast<uint32_t>(p.bytes.size()), big);
    } else {
      const uint8_t resolution = interfaces[p.interface].tsresol;
      uint64_t units = p.at;
      if ((resolution & 0x80) != 0) {
        __extension__ using Wide = unsigned __int128;
        units = static_cast<uint64_t>((Wide{p.at} << (resolution & 0x7f)) / 1'000'000'000u);
      }
      for (unsigned r = resolution; r < 9; ++r) units /= 10;
      put32(b, p.interface, big), put32(b, static_cast<uint32_t>(units >> 32), big);
      put32(b, static_cast<uint32_t>(units), big);
      put32(b, static_cast<uint32_t>(p.bytes.size()), big), put32(b, static_cast<uint32_t>(p.bytes.size()), big);
    }
    b.insert(b.end(), p.bytes.begin(), p.bytes.end());
    block(p.simple ? 3 : 6, b);
  }
  return {o.begin(), o.end()};
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// One TCP connection's segments, numbered as TCP numbers them.
class Conversation {
 public:
  Conversation(const std::string& client, uint16_t client_port, const std::string& origin, uint16_t origin_port,
               uint32_t client_isn = 1000, uint32_t origin_isn = 900000)
      : client_(*net::parse_ip(client)), origin_(*net::parse_ip(origin)), cport_(client_port), oport_(origin_port),
        cseq_(client_isn), oseq_(origin_isn) {}

  TcpSegment syn() { return from_client(tcp::kSyn, "", 1, false); }
  TcpSegment syn_ack() { return from_origin(tcp::kSyn | tcp::kAck, "", 1); }
  TcpSegment ack() { return from_client(tcp::kAck, ""); }
  // Data; the sequence numbers move on by its length.
  TcpSegment client(const std::string& data) { return from_client(tcp::kAck | tcp::kPsh, data); }
  TcpSegment origin(const std::string& data) { return from_origin(tcp::kAck | tcp::kPsh, data); }
  TcpSegment client_fin() { return from_client(tcp::kFin | tcp::kAck, "", 1); }
  TcpSegment origin_fin(const std::string& data = "") { return from_origin(tcp::kFin | tcp::kAck, data, 1); }
  TcpSegment client_rst() { return from_client(tcp::kRst, "", 0); }
  // Skips `n` bytes of the client's stream (their segment is sent later, or never).
  void skip_client(uint32_t n) { cseq_ += n; }

 private:
  TcpSegment from_client(uint8_t flags, const std::string& data, uint32_t extra = 0, bool with_ack = true) {
    TcpSegment s{client_, origin_, cport_, oport_, cseq_, with_ack ? oseq_ : 0, flags, data};
    cseq_ += static_cast<uint32_t>(data.size()) + extra;
    return s;
  }
  TcpSegment from_origin(uint8_t flags, const std::string& data, uint32_t extra = 0) {
    TcpSegment s{origin_, client_, oport_, cport_, oseq_, cseq_, flags, data};
    oseq_ += static_cast<uint32_t>(data.size()) + extra;
    return s;
  }

  net::IpAddress client_, origin_;
  uint16_t cport_, oport_;
  uint32_t cseq_, oseq_;
};

}  // namespace sluice::test
