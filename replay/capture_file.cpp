// Reading pcap and pcapng captures (https://www.ietf.org/archive/id/
// draft-ietf-opsawg-pcap and draft-ietf-opsawg-pcapng) a block at a time,
// and walking their packets' link layers. Every read is checked against
// what the window holds first: these bytes come from anywhere (the readers
// are fuzzed). A streamed reader's window is its read-ahead, refilled
// (what is left moved to the front) whenever a block needs more.
#include "replay/capture_file.h"

#include <algorithm>
#include <cstring>

namespace sluice::replay {
namespace {

__extension__ using Wide = unsigned __int128;

constexpr uint32_t kPcapMicros = 0xa1b2c3d4;
constexpr uint32_t kPcapNanos = 0xa1b23c4d;
constexpr uint32_t kPcapngSection = 0x0a0d0d0a;
constexpr uint32_t kPcapngByteOrder = 0x1a2b3c4d;
// libpcap's MAXIMUM_SNAPLEN: a record longer than this and than the file's
// snap length is not a record (the framing is lost).
constexpr uint32_t kMaxSnap = 262144;

// The image's integers in the byte order the file declared.
struct Bytes {
  std::span<const uint8_t> image;
  bool big = false;

  [[nodiscard]] uint16_t u16(size_t at) const noexcept {
    const uint8_t* p = image.data() + at;
    return big ? static_cast<uint16_t>(p[0] << 8 | p[1]) : static_cast<uint16_t>(p[1] << 8 | p[0]);
  }
  [[nodiscard]] uint32_t u32(size_t at) const noexcept {
    const uint8_t* p = image.data() + at;
    return big ? dataplane::load32(p)
               : static_cast<uint32_t>(p[3]) << 24 | static_cast<uint32_t>(p[2]) << 16 |
                     static_cast<uint32_t>(p[1]) << 8 | p[0];
  }
  [[nodiscard]] uint64_t u64(size_t at, bool high_first = true) const noexcept {
    // pcapng timestamps are two 32-bit words, high first; options are plain 64-bit integers.
    if (high_first) return uint64_t{u32(at)} << 32 | u32(at + 4);
    return big ? uint64_t{u32(at)} << 32 | u32(at + 4) : uint64_t{u32(at + 4)} << 32 | u32(at);
  }
};

time::Nanos saturate(Wide v) noexcept { return v > Wide{~uint64_t{0}} ? ~uint64_t{0} : static_cast<uint64_t>(v); }

// `units` of an interface's if_tsresol (RFC: high bit clear, 10^-n seconds;
// set, 2^-n) in nanoseconds.
time::Nanos to_nanos(uint64_t units, uint8_t tsresol) noexcept {
  const unsigned n = tsresol & 0x7fu;
  if ((tsresol & 0x80u) != 0) return n > 100 ? 0 : saturate((Wide{units} * 1'000'000'000u) >> n);
  Wide v = units;
  for (unsigned i = n; i < 9; ++i) v *= 10;
  for (unsigned i = 9; i < n && v != 0; ++i) v /= 10;
  return saturate(v);
}

std::string at_packet(const std::string& name, uint64_t n) { return name + ": packet " + std::to_string(n); }
std::string at_byte(const std::string& name, uint64_t offset) { return name + ": byte " + std::to_string(offset); }

// ---- pcapng -------------------------------------------------------------------

struct Interface {
  uint32_t link_type = 0;
  uint32_t snap = 0;
  uint8_t tsresol = 6;
  int64_t offset_s = 0;  // if_tsoffset
};

constexpr uint32_t kIdb = 1, kPb = 2, kSpb = 3, kEpb = 6, kShb = kPcapngSection;

bool is_packet_block(uint32_t type) noexcept { return type == kPb || type == kSpb || type == kEpb; }

// An interface description block's body.
Interface read_interface(const Bytes& b, size_t body, size_t body_len) {
  Interface i;
  if (body_len >= 8) {
    i.link_type = b.u16(body);
    i.snap = b.u32(body + 4);
  }
  for (size_t o = body + 8; o + 4 <= body + body_len;) {
    const uint16_t code = b.u16(o);
    const uint16_t len = b.u16(o + 2);
    if (code == 0 || o + 4 + len > body + body_len) break;
    if (code == 9 && len >= 1) i.tsresol = b.image[o + 4];
    if (code == 14 && len >= 8) i.offset_s = static_cast<int64_t>(b.u64(o + 4, false));
    o += 4 + ((size_t{len} + 3) & ~size_t{3});
  }
  return i;
}

time::Nanos interface_time(const Interface& i, uint64_t units) noexcept {
  const time::Nanos ns = to_nanos(units, i.tsresol);
  const uint64_t magnitude = i.offset_s < 0 ? 0 - static_cast<uint64_t>(i.offset_s) : static_cast<uint64_t>(i.offset_s);
  const Wide shift = Wide{magnitude} * 1'000'000'000u;
  if (i.offset_s >= 0) return saturate(Wide{ns} + shift);
  return shift >= ns ? 0 : static_cast<time::Nanos>(ns - shift);
}

// ---- link layers -----------------------------------------------------------------

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;

// The EtherType for an IP header that starts at `ip`, by its version.
uint16_t ether_type_of_ip(std::span<const uint8_t> ip) noexcept {
  if (ip.empty()) return 0;
  const unsigned version = ip[0] >> 4;
  return version == 4 ? kEtherIpv4 : version == 6 ? kEtherIpv6 : 0;
}

// The link header's length and the EtherType behind it; false when the
// link type is not read or the packet is shorter than its header.
bool link_header(const CapturedPacket& p, size_t& header, uint16_t& type, bool& supported) noexcept {
  const std::span<const uint8_t> d = p.data;
  switch (p.link_type) {
    case link_type::kLinuxSll:
      header = 16;
      if (d.size() < header) return false;
      type = dataplane::load16(d.data() + 14);
      return true;
    case link_type::kLinuxSll2:
      header = 20;
      if (d.size() < header) return false;
      type = dataplane::load16(d.data());
      return true;
    case link_type::kRaw:
    case link_type::kIpv4:
    case link_type::kIpv6: header = 0; break;
    case link_type::kNull:
    case link_type::kLoop: header = 4; break;
    default: supported = false; return false;
  }
  if (d.size() < header) return false;
  type = ether_type_of_ip(d.subspan(header));
  return true;
}

}  // namespace

// ---- the public part -----------------------------------------------------------------

CaptureFormat capture_format(std::span<const uint8_t> first) noexcept {
  if (first.size() < 4) return CaptureFormat::kUnknown;
  for (const bool big : {false, true}) {
    const uint32_t magic = Bytes{first, big}.u32(0);
    if (magic == kPcapMicros || magic == kPcapNanos) return CaptureFormat::kPcap;
  }
  return Bytes{first, false}.u32(0) == kPcapngSection ? CaptureFormat::kPcapng : CaptureFormat::kUnknown;
}

// ---- PacketReader ---------------------------------------------------------------------

struct PacketReader::Section {
  std::vector<Interface> interfaces;
  time::Nanos last_at = 0;  // a simple packet block has no time of its own: the one before it
};

namespace {
// A streamed reader reads ahead this much at a time.
constexpr size_t kReadAhead = size_t{1} << 20;
}  // namespace

PacketReader::PacketReader(std::unique_ptr<InputStream> in, std::string name)
    : name_(std::move(name)), in_(std::move(in)), section_(std::make_unique<Section>()) {}

PacketReader::PacketReader(std::span<const uint8_t> image, std::string name)
    : name_(std::move(name)), window_(image), eof_(true), section_(std::make_unique<Section>()) {}

PacketReader::~PacketReader() = default;

std::string PacketReader::stream_error() const { return in_ && in_->failed() ? in_->error() : std::string(); }

bool PacketReader::ensure(size_t n) {
  if (left() >= n) return true;
  if (eof_) return false;
  // What is left moves to the front; the buffer grows only for a block
  // longer than the read-ahead.
  const size_t keep = left();
  if (buffer_.size() < std::max(n, kReadAhead)) {
    std::vector<uint8_t> bigger(std::max(n, kReadAhead));
    if (keep != 0) std::memcpy(bigger.data(), window_.data() + at_, keep);
    buffer_.swap(bigger);
  } else if (keep != 0) {
    std::memmove(buffer_.data(), window_.data() + at_, keep);
  }
  base_ += at_;
  at_ = 0;
  size_t filled = keep;
  while (filled < n && !eof_) {
    const size_t got = in_->read(reinterpret_cast<char*>(buffer_.data() + filled), buffer_.size() - filled);
    if (got == 0) eof_ = true;
    filled += got;
  }
  window_ = {buffer_.data(), filled};
  return filled >= n;
}

void PacketReader::problem(uint64_t packet, std::string where, std::string message) {
  problems_.push_back({packet, {std::move(where), std::move(message)}});
}

bool PacketReader::start() {
  started_ = true;
  (void)ensure(4);
  format_ = capture_format(window_.subspan(at_, std::min<size_t>(left(), 4)));
  if (format_ == CaptureFormat::kUnknown) {
    fatal_ = InputProblem{name_, "not a pcap or pcapng capture"};
    return false;
  }
  if (format_ == CaptureFormat::kPcapng) return true;
  if (!ensure(24)) {
    fatal_ = InputProblem{at_byte(name_, 0), "the pcap file header is cut short (" + std::to_string(left()) + " of 24 bytes)"};
    return false;
  }
  const Bytes le{window_.subspan(at_, 24), false};
  const uint32_t magic_le = le.u32(0);
  const Bytes b{window_.subspan(at_, 24), magic_le != kPcapMicros && magic_le != kPcapNanos};
  big_ = b.big;
  nanos_ = b.u32(0) == kPcapNanos;
  snap_ = b.u32(16);
  link_ = b.u32(20) & 0xffffu;  // the upper bits say whether frames end in an FCS
  at_ += 24;
  return true;
}

bool PacketReader::next(CapturedPacket& out) {
  if (done_) return false;
  if (!started_ && !start()) {
    done_ = true;
    return false;
  }
  const bool got = format_ == CaptureFormat::kPcap ? next_pcap(out) : next_pcapng(out);
  if (!got) done_ = true;
  return got;
}

// ---- classic pcap -----------------------------------------------------------

bool PacketReader::next_pcap(CapturedPacket& out) {
  if (!ensure(1)) return false;
  const uint64_t n = ++packet_count_;
  if (!ensure(16)) {
    problem(n, at_packet(name_, n), "the file ends inside the packet's record header (" + std::to_string(left()) + " of 16 bytes)");
    return false;
  }
  const Bytes h{window_.subspan(at_, 16), big_};
  const uint32_t caplen = h.u32(8);
  if ((caplen > snap_ && caplen > kMaxSnap) || caplen > kMaxCaptureBlock) {
    problem(n, at_packet(name_, n), "a captured length of " + std::to_string(caplen) +
                                        " bytes, past the snap length: the rest of the file is unreadable");
    return false;
  }
  const uint32_t sub = h.u32(4), seconds = h.u32(0), original = h.u32(12);
  if (!ensure(16 + size_t{caplen})) {
    problem(n, at_packet(name_, n), "the file ends " + std::to_string(left() - 16) + " bytes into the packet's " +
                                        std::to_string(caplen) + " captured bytes");
    return false;
  }
  out = {window_.subspan(at_ + 16, caplen), saturate(Wide{seconds} * 1'000'000'000u + Wide{sub} * (nanos_ ? 1u : 1000u)), n,
         link_, original};
  at_ += 16 + size_t{caplen};
  return true;
}

// ---- pcapng -------------------------------------------------------------------

bool PacketReader::next_pcapng(CapturedPacket& out) {
  Section& s = *section_;
  for (;;) {
    if (!ensure(1)) return false;
    const uint64_t off = offset();
    if (!ensure(12)) {
      if (off == 0) {
        fatal_ = InputProblem{at_byte(name_, 0), "the pcapng section header is cut short"};
      } else {
        problem(packet_count_ + 1, at_byte(name_, off), "the file ends inside a block header");
      }
      return false;
    }
    const uint32_t type = Bytes{window_.subspan(at_, 12), big_}.u32(0);
    if (type == kShb) {
      // A section's byte order: its magic, read both ways.
      const std::span<const uint8_t> h = window_.subspan(at_, 12);
      const uint32_t le = Bytes{h, false}.u32(8);
      if (le != kPcapngByteOrder && Bytes{h, true}.u32(8) != kPcapngByteOrder) {
        if (off == 0) {
          fatal_ = InputProblem{at_byte(name_, 0), "a pcapng section header with no byte-order magic"};
        } else {
          problem(packet_count_ + 1, at_byte(name_, off), "a section header with no byte-order magic: the rest is unreadable");
        }
        return false;
      }
      big_ = le != kPcapngByteOrder;
      s.interfaces.clear();
    }
    const uint32_t len = Bytes{window_.subspan(at_, 12), big_}.u32(4);
    const bool framed = len >= 12 && len % 4 == 0 && len <= kMaxCaptureBlock;
    if (!framed || !ensure(len)) {
      if (framed && is_packet_block(type)) {
        ++packet_count_;
        problem(packet_count_, at_packet(name_, packet_count_),
                "the file ends " + std::to_string(left()) + " bytes into the packet's " + std::to_string(len) + "-byte block");
      } else {
        problem(packet_count_ + 1, at_byte(name_, off),
                "a block length of " + std::to_string(len) + " bytes, which the file cannot hold: the rest is unreadable");
      }
      return false;
    }
    const Bytes b{window_.subspan(at_, len), big_};
    if (b.u32(len - 4) != len) {
      problem(packet_count_ + 1, at_byte(name_, off), "a block whose trailing length differs from its leading one: "
                                                      "the rest is unreadable");
      return false;
    }
    at_ += len;
    const size_t body = 8, body_len = len - 12;
    if (type == kIdb) s.interfaces.push_back(read_interface(b, body, body_len));
    if (!is_packet_block(type)) continue;
    const uint64_t n = ++packet_count_;
    const auto damaged = [&](std::string message) { problem(n, at_packet(name_, n), std::move(message)); };
    if (type == kSpb) {
      if (body_len < 4) {
        damaged("a simple packet block too short for its length field");
        continue;
      }
      if (s.interfaces.empty()) {
        damaged("a simple packet block before any interface block");
        continue;
      }
      const Interface& i = s.interfaces.front();
      const uint32_t original = b.u32(body);
      size_t caplen = std::min<size_t>(original, body_len - 4);
      if (i.snap != 0) caplen = std::min<size_t>(caplen, i.snap);
      out = {b.image.subspan(body + 4, caplen), s.last_at, n, i.link_type, original};
      return true;
    }
    // EPB and the obsolete PB: interface, time, captured and original lengths.
    if (body_len < 20) {
      damaged("a packet block too short for its fields");
      continue;
    }
    const uint32_t iface = type == kEpb ? b.u32(body) : b.u16(body);
    const uint32_t caplen = b.u32(body + 12);
    if (caplen > body_len - 20) {
      damaged("a captured length of " + std::to_string(caplen) + " bytes runs past its block");
      continue;
    }
    if (iface >= s.interfaces.size()) {
      damaged("interface " + std::to_string(iface) + " has no interface block");
      continue;
    }
    const Interface& i = s.interfaces[iface];
    s.last_at = interface_time(i, b.u64(body + 4));
    out = {b.image.subspan(body + 20, caplen), s.last_at, n, i.link_type, b.u32(body + 16)};
    return true;
  }
}

CaptureIndex index_capture(std::span<const uint8_t> image, const std::string& name) {
  CaptureIndex out;
  out.packets.reserve(image.size() / 256);  // a guess that costs at most a fifth of the file
  PacketReader reader(image, name);
  CapturedPacket p;
  while (reader.next(p)) out.packets.push_back(p);
  out.packet_count = reader.packet_count();
  out.problems = reader.take_problems();
  out.fatal = reader.fatal();
  return out;
}

PacketFrame walk_packet(const CapturedPacket& p, std::vector<uint8_t>& scratch) {
  PacketFrame f;
  if (p.link_type == link_type::kEthernet) {
    f.view = dataplane::parse_frame(p.data);
    if (f.view.kind == dataplane::FrameKind::kTcp) f.payload = p.data.subspan(f.view.payload_offset, f.view.payload_len);
    return f;
  }
  size_t header = 0;
  uint16_t type = 0;
  if (!link_header(p, header, type, f.link_supported)) {
    f.view.kind = f.link_supported ? dataplane::FrameKind::kMalformed : dataplane::FrameKind::kNonIp;
    return f;
  }
  // A made-up Ethernet header (no addresses) in front of the network layer.
  const std::span<const uint8_t> rest = p.data.subspan(header);
  scratch.assign(14, 0);
  scratch.insert(scratch.end(), rest.begin(), rest.end());
  dataplane::store16(scratch.data() + 12, type);
  f.view = dataplane::parse_frame(scratch);
  if (f.view.kind == dataplane::FrameKind::kTcp) f.payload = rest.subspan(f.view.payload_offset - 14u, f.view.payload_len);
  return f;
}

}  // namespace sluice::replay
