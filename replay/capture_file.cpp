// Reading pcap and pcapng images (https://www.ietf.org/archive/id/
// draft-ietf-opsawg-pcap and draft-ietf-opsawg-pcapng) and walking their
// packets' link layers. Every read is checked against the image's end first:
// these bytes come from anywhere (the readers are to be fuzzed).
#include "replay/capture_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
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
std::string at_byte(const std::string& name, size_t offset) { return name + ": byte " + std::to_string(offset); }

// ---- classic pcap -----------------------------------------------------------

void index_pcap(std::span<const uint8_t> image, const std::string& name, CaptureIndex& out) {
  if (image.size() < 24) {
    out.fatal = InputProblem{at_byte(name, 0), "the pcap file header is cut short (" + std::to_string(image.size()) + " of 24 bytes)"};
    return;
  }
  const uint32_t magic_le = Bytes{image, false}.u32(0);
  const Bytes b{image, magic_le != kPcapMicros && magic_le != kPcapNanos};
  const bool nanos = b.u32(0) == kPcapNanos;
  const uint32_t snap = b.u32(16);
  const uint32_t link = b.u32(20) & 0xffffu;  // the upper bits say whether frames end in an FCS
  size_t off = 24;
  for (uint64_t n = 1; off < image.size(); ++n) {
    out.packet_count = n;
    const size_t left = image.size() - off;
    if (left < 16) {
      out.problems.push_back({n, {at_packet(name, n), "the file ends inside the packet's record header (" +
                                                          std::to_string(left) + " of 16 bytes)"}});
      return;
    }
    const uint32_t caplen = b.u32(off + 8);
    if (caplen > snap && caplen > kMaxSnap) {
      out.problems.push_back({n, {at_packet(name, n), "a captured length of " + std::to_string(caplen) +
                                                          " bytes, past the snap length: the rest of the file is unreadable"}});
      return;
    }
    if (caplen > left - 16) {
      out.problems.push_back({n, {at_packet(name, n), "the file ends " + std::to_string(left - 16) + " bytes into the packet's " +
                                                          std::to_string(caplen) + " captured bytes"}});
      return;
    }
    const uint64_t sub = b.u32(off + 4);
    const time::Nanos at = saturate(Wide{b.u32(off)} * 1'000'000'000u + sub * (nanos ? 1u : 1000u));
    out.packets.push_back({image.subspan(off + 16, caplen), at, n, link, b.u32(off + 12)});
    off += 16 + size_t{caplen};
  }
}

// ---- pcapng -------------------------------------------------------------------

struct Interface {
  uint32_t link_type = 0;
  uint32_t snap = 0;
  uint8_t tsresol = 6;
  int64_t offset_s = 0;  // if_tsoffset
};

// One section's state and the whole walk's results.
struct NgWalk {
  const std::string& name;
  CaptureIndex& out;
  Bytes b;
  std::vector<Interface> interfaces;
  time::Nanos last_at = 0;  // a simple packet block has no time of its own: the one before it
};

constexpr uint32_t kIdb = 1, kPb = 2, kSpb = 3, kEpb = 6, kShb = kPcapngSection;

bool is_packet_block(uint32_t type) noexcept { return type == kPb || type == kSpb || type == kEpb; }

void read_interface(NgWalk& w, size_t body, size_t body_len) {
  Interface i;
  if (body_len >= 8) {
    i.link_type = w.b.u16(body);
    i.snap = w.b.u32(body + 4);
  }
  for (size_t o = body + 8; o + 4 <= body + body_len;) {
    const uint16_t code = w.b.u16(o);
    const uint16_t len = w.b.u16(o + 2);
    if (code == 0 || o + 4 + len > body + body_len) break;
    if (code == 9 && len >= 1) i.tsresol = w.b.image[o + 4];
    if (code == 14 && len >= 8) i.offset_s = static_cast<int64_t>(w.b.u64(o + 4, false));
    o += 4 + ((size_t{len} + 3) & ~size_t{3});
  }
  w.interfaces.push_back(i);
}

time::Nanos interface_time(const Interface& i, uint64_t units) noexcept {
  const time::Nanos ns = to_nanos(units, i.tsresol);
  const uint64_t magnitude = i.offset_s < 0 ? 0 - static_cast<uint64_t>(i.offset_s) : static_cast<uint64_t>(i.offset_s);
  const Wide shift = Wide{magnitude} * 1'000'000'000u;
  if (i.offset_s >= 0) return saturate(Wide{ns} + shift);
  return shift >= ns ? 0 : static_cast<time::Nanos>(ns - shift);
}

void packet_problem(NgWalk& w, std::string message) {
  w.out.problems.push_back({w.out.packet_count, {at_packet(w.name, w.out.packet_count), std::move(message)}});
}

// EPB and the obsolete PB: interface, time, captured and original lengths.
void read_timed_packet(NgWalk& w, uint32_t type, size_t body, size_t body_len) {
  if (body_len < 20) return packet_problem(w, "a packet block too short for its fields");
  const uint32_t iface = type == kEpb ? w.b.u32(body) : w.b.u16(body);
  const uint32_t caplen = w.b.u32(body + 12);
  if (caplen > body_len - 20) return packet_problem(w, "a captured length of " + std::to_string(caplen) + " bytes runs past its block");
  if (iface >= w.interfaces.size()) return packet_problem(w, "interface " + std::to_string(iface) + " has no interface block");
  const Interface& i = w.interfaces[iface];
  w.last_at = interface_time(i, w.b.u64(body + 4));
  w.out.packets.push_back({w.b.image.subspan(body + 20, caplen), w.last_at, w.out.packet_count, i.link_type, w.b.u32(body + 16)});
}

void read_simple_packet(NgWalk& w, size_t body, size_t body_len) {
  if (body_len < 4) return packet_problem(w, "a simple packet block too short for its length field");
  if (w.interfaces.empty()) return packet_problem(w, "a simple packet block before any interface block");
  const Interface& i = w.interfaces.front();
  const uint32_t original = w.b.u32(body);
  size_t caplen = std::min<size_t>(original, body_len - 4);
  if (i.snap != 0) caplen = std::min<size_t>(caplen, i.snap);
  w.out.packets.push_back({w.b.image.subspan(body + 4, caplen), w.last_at, w.out.packet_count, i.link_type, original});
}

// Checks a block's lengths; false (with the problem) when the walk cannot go on.
bool block_fits(NgWalk& w, size_t off, uint32_t type, uint32_t len) {
  const size_t left = w.b.image.size() - off;
  if (len >= 12 && len % 4 == 0 && len > left && is_packet_block(type)) {
    ++w.out.packet_count;
    packet_problem(w, "the file ends " + std::to_string(left) + " bytes into the packet's " + std::to_string(len) + "-byte block");
    return false;
  }
  if (len < 12 || len % 4 != 0 || len > left) {
    w.out.problems.push_back({w.out.packet_count + 1, {at_byte(w.name, off), "a block length of " + std::to_string(len) +
                                                                        " bytes, which the file cannot hold: the rest is unreadable"}});
    return false;
  }
  if (w.b.u32(off + len - 4) != len) {
    w.out.problems.push_back({w.out.packet_count + 1, {at_byte(w.name, off), "a block whose trailing length differs from its leading one: "
                                                                    "the rest is unreadable"}});
    return false;
  }
  return true;
}

// A section header: its byte order (the magic, read both ways). False when neither.
bool start_section(NgWalk& w, size_t off) {
  const uint32_t le = Bytes{w.b.image, false}.u32(off + 8);
  if (le != kPcapngByteOrder && Bytes{w.b.image, true}.u32(off + 8) != kPcapngByteOrder) {
    w.out.problems.push_back({w.out.packet_count + 1, {at_byte(w.name, off), "a section header with no byte-order magic: the rest is unreadable"}});
    return false;
  }
  w.b.big = le != kPcapngByteOrder;
  w.interfaces.clear();
  return true;
}

void index_pcapng(std::span<const uint8_t> image, const std::string& name, CaptureIndex& out) {
  NgWalk w{name, out, Bytes{image, false}, {}, 0};
  for (size_t off = 0; off < image.size();) {
    if (image.size() - off < 12) {
      if (off == 0) {
        out.fatal = InputProblem{at_byte(name, 0), "the pcapng section header is cut short"};
        return;
      }
      out.problems.push_back({w.out.packet_count + 1, {at_byte(name, off), "the file ends inside a block header"}});
      return;
    }
    const uint32_t type = w.b.u32(off);
    if (type == kShb && !start_section(w, off)) {
      if (off == 0) out.fatal = InputProblem{at_byte(name, 0), "a pcapng section header with no byte-order magic"};
      return;
    }
    const uint32_t len = w.b.u32(off + 4);
    if (!block_fits(w, off, type, len)) return;
    const size_t body = off + 8, body_len = len - 12;
    if (type == kIdb) read_interface(w, body, body_len);
    if (is_packet_block(type)) ++w.out.packet_count;
    if (type == kEpb || type == kPb) read_timed_packet(w, type, body, body_len);
    if (type == kSpb) read_simple_packet(w, body, body_len);
    off += len;
  }
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

std::optional<FileImage> FileImage::open(const std::string& path, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "not a regular file";
    ::close(fd);
    return std::nullopt;
  }
  const auto size = static_cast<size_t>(st.st_size);
  // Populated up front: the whole file is read anyway, and one call costs
  // less than a page fault per 4 KiB.
  void* map = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    error = std::strerror(errno);
    return std::nullopt;
  }
  return FileImage(static_cast<const uint8_t*>(map), size);
}

FileImage::FileImage(FileImage&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

FileImage::~FileImage() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

CaptureFormat capture_format(std::span<const uint8_t> first) noexcept {
  if (first.size() < 4) return CaptureFormat::kUnknown;
  for (const bool big : {false, true}) {
    const uint32_t magic = Bytes{first, big}.u32(0);
    if (magic == kPcapMicros || magic == kPcapNanos) return CaptureFormat::kPcap;
  }
  return Bytes{first, false}.u32(0) == kPcapngSection ? CaptureFormat::kPcapng : CaptureFormat::kUnknown;
}

CaptureIndex index_capture(std::span<const uint8_t> image, const std::string& name) {
  CaptureIndex out;
  out.packets.reserve(image.size() / 256);  // a guess that costs at most a fifth of the file
  switch (capture_format(image)) {
    case CaptureFormat::kPcap: index_pcap(image, name, out); break;
    case CaptureFormat::kPcapng: index_pcapng(image, name, out); break;
    case CaptureFormat::kUnknown: out.fatal = InputProblem{name, "not a pcap or pcapng capture"}; break;
  }
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
