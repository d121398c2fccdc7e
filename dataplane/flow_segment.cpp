// Segments written in a flow's name; see flow_segment.h.
#include "flow_segment.h"

#include <algorithm>

namespace sluice::dataplane {

SegmentSpec SegmentEmitter::from(const TcpFlow& flow, Side from) noexcept {
  SegmentSpec s;
  const bool origin = from == Side::kOrigin;
  s.l2 = origin ? std::span<const uint8_t>(flow.origin.l2, flow.origin.l2_len)
                : std::span<const uint8_t>(flow.client.l2, flow.client.l2_len);
  s.ip_version = flow.ip_version;
  s.src = origin ? flow.key.origin : flow.key.client;
  s.dst = origin ? flow.key.client : flow.key.origin;
  s.sport = origin ? flow.key.origin_port : flow.key.client_port;
  s.dport = origin ? flow.key.client_port : flow.key.origin_port;
  s.timestamp = flow.timestamps;
  // A proxied flow's origin keeps its own clock (proxy.ts_offset: 0 otherwise).
  s.tsval = origin ? flow.origin.tsval + flow.proxy.ts_offset : flow.client.tsval;
  s.tsecr = origin ? flow.client.tsval : flow.origin.tsval;
  return s;
}

void SegmentEmitter::emit(PacketSink& out, Side to, SegmentSpec& s) noexcept {
  s.ip_id = ip_id_++;
  std::span<uint8_t> buf = out.allocate(to, segment_size(s));
  if (buf.empty()) return;
  out.send(to, write_segment(buf, s));
}

void SegmentEmitter::emit_split(PacketSink& out, Side to, SegmentSpec& s, std::span<const uint8_t> bytes,
                                size_t max_payload, uint8_t last_flags) noexcept {
  const uint32_t first = s.seq;
  const uint8_t flags = s.flags;
  size_t off = 0;
  do {
    const size_t chunk = std::min(max_payload, bytes.size() - off);
    const bool last = off + chunk == bytes.size();
    s.seq = first + static_cast<uint32_t>(off);
    s.flags = last ? last_flags : flags;
    s.payload = bytes.subspan(off, chunk);
    emit(out, to, s);
    off += chunk;
  } while (off < bytes.size());
}

}  // namespace sluice::dataplane
