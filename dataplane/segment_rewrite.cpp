// Incremental TCP checksum patching (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'))
// for 32-bit fields anywhere in the TCP header, and the SACK option walk.
#include "segment_rewrite.h"

#include <cstddef>
#include <cstring>

#include "checksum.h"
#include "segment_writer.h"

namespace sluice::dataplane {
namespace {

using tcp_option::kAreaAt;
constexpr unsigned kMaxSackBlocks = 4;  // 2 + 8 * 4 = 34 bytes; the options area holds at most 40

uint32_t fold(uint32_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum;
}

// What a 32-bit field adds to the checksum. The TCP header starts on a
// checksum word (the pseudo-header is 12 or 40 bytes), so a field at an odd
// header offset (a SACK edge after a lone NOP) straddles three words; its
// bytes then count swapped, and one's-complement sums commute with a byte
// swap (RFC 1071 2(B)), so the aligned sum swapped is its share.
uint32_t field_sum(uint32_t value, bool odd) noexcept {
  const uint32_t s = fold((value >> 16) + (value & 0xffff));
  return odd ? ((s & 0xff) << 8 | s >> 8) : s;
}

// Accumulates the change of one field into `sum` (which starts as ~HC).
uint32_t replace(uint32_t sum, uint32_t old_value, uint32_t new_value, bool odd) noexcept {
  return sum + (~field_sum(old_value, odd) & 0xffff) + field_sum(new_value, odd);
}

uint16_t tcp_checksum(const uint8_t* tcp) noexcept { return load16(tcp + 16); }
void set_tcp_checksum_from(uint8_t* tcp, uint32_t sum) noexcept {
  store16(tcp + 16, static_cast<uint16_t>(~fold(sum)));
}

void rewrite_word(uint8_t* frame, const FrameView& v, size_t field, uint32_t value) noexcept {
  uint8_t* tcp = frame + v.l4_offset;
  const uint32_t old = load32(tcp + field);
  if (old == value) return;
  store32(tcp + field, value);
  set_tcp_checksum_from(tcp, replace(~tcp_checksum(tcp) & 0xffffu, old, value, false));
}

// Walks the options area `p[0, len)`. Without `shift` it only checks that
// the list holds together; with it, it maps the SACK edges and folds their
// change into `sum`. Returns the SACK blocks seen, or -1 if malformed.
int walk_sack(uint8_t* p, size_t len, const SeqShift* shift, uint32_t& sum) noexcept {
  int blocks = 0;
  TcpOptionWalk walk(p, len);
  TcpOption opt;
  while (walk.next(opt)) {
    if (opt.kind != tcp_option::kSack) continue;
    const size_t n = (opt.len - 2u) / 8;
    if ((opt.len - 2u) % 8 != 0 || n == 0 || n > kMaxSackBlocks) return -1;
    if (shift != nullptr) {
      for (size_t e = 0; e < 2 * n; ++e) {
        const size_t at = opt.at + 2 + 4 * e;
        uint8_t* edge = p + at;  // may be unaligned: byte access only
        const uint32_t old = load32(edge);
        const uint32_t mapped = shift->backward(old);
        if (mapped == old) continue;
        store32(edge, mapped);
        sum = replace(sum, old, mapped, ((kAreaAt + at) & 1) != 0);
      }
    }
    blocks += static_cast<int>(n);
  }
  return walk.malformed() ? -1 : blocks;
}

}  // namespace

void rewrite_seq(uint8_t* frame, FrameView& v, uint32_t seq) noexcept {
  if (v.kind != FrameKind::kTcp) return;
  rewrite_word(frame, v, 4, seq);
  v.seq = seq;
}

void rewrite_ack(uint8_t* frame, FrameView& v, uint32_t ack) noexcept {
  if (v.kind != FrameKind::kTcp) return;
  rewrite_word(frame, v, 8, ack);
  v.ack = ack;
}

unsigned rewrite_sack(uint8_t* frame, const FrameView& v, const SeqShift& shift) noexcept {
  if (v.kind != FrameKind::kTcp) return 0;
  uint8_t* tcp = frame + v.l4_offset;
  const size_t header = static_cast<size_t>(v.payload_offset) - v.l4_offset;
  if (header <= kAreaAt) return 0;
  uint8_t* opts = tcp + kAreaAt;
  const size_t len = header - kAreaAt;
  uint32_t sum = 0;
  // Check the whole list before writing anything, so a malformed one is
  // forwarded exactly as it came.
  const int blocks = walk_sack(opts, len, nullptr, sum);
  if (blocks <= 0) return 0;
  sum = ~tcp_checksum(tcp) & 0xffffu;
  static_cast<void>(walk_sack(opts, len, &shift, sum));
  set_tcp_checksum_from(tcp, sum);
  return static_cast<unsigned>(blocks);
}

void shift_client_segment(uint8_t* frame, FrameView& v, const SeqShift& shift) noexcept {
  if (!v.has(tcp_flag::kAck) || shift.empty()) return;
  rewrite_ack(frame, v, shift.backward(v.ack));
  static_cast<void>(rewrite_sack(frame, v, shift));
}

void shift_origin_segment(uint8_t* frame, FrameView& v, const SeqShift& shift) noexcept {
  if (shift.empty()) return;
  rewrite_seq(frame, v, shift.forward(v.seq));
}

namespace {

uint32_t swap16(uint32_t s) noexcept { return ((s & 0xff) << 8) | (s >> 8); }

// What `n` bytes at payload offset `offset` add to the checksum (the TCP
// header's length is a multiple of four, so the offset's parity is the
// word alignment).
uint32_t bytes_sum(const uint8_t* p, size_t n, uint32_t offset) noexcept {
  const uint32_t s = checksum_fold(checksum_add(0, p, n));
  return (offset & 1) != 0 ? swap16(s) : s;
}

}  // namespace

void insert_in_place(uint8_t* frame, FrameView& v, std::span<const Insertion> insertions, uint32_t seq,
                     uint32_t ack) noexcept {
  if (v.kind != FrameKind::kTcp) return;
  uint8_t* tcp = frame + v.l4_offset;
  uint8_t* payload = frame + v.payload_offset;
  const uint32_t len = v.payload_len;
  uint32_t total = 0;
  for (const Insertion& in : insertions) total += in.len;
  const uint32_t tcp_len = v.frame_len - v.l4_offset;
  uint32_t sum = ~tcp_checksum(tcp) & 0xffffu;
  // The pseudo-header's length (a 16-bit word for IPv4, the low word of
  // IPv6's 32-bit one: segments here stay far below 64 KiB).
  sum = sum + (~tcp_len & 0xffffu) + ((tcp_len + total) & 0xffffu);
  // From the last insertion back: the bytes after each move up past
  // everything inserted before them, and its own bytes go in front of them.
  uint32_t tail_end = len;
  uint32_t moved = total;
  for (size_t i = insertions.size(); i-- > 0;) {
    const Insertion& in = insertions[i];
    const uint32_t n = in.len;
    std::memmove(payload + in.at + moved, payload + in.at, tail_end - in.at);
    if ((moved & 1) != 0 && tail_end > in.at) {
      // Moved by an odd number: these bytes now count swapped.
      const uint32_t was = bytes_sum(payload + in.at + moved, tail_end - in.at, in.at);
      sum = sum + (~was & 0xffffu) + swap16(was);
    }
    moved -= n;
    std::memcpy(payload + in.at + moved, in.bytes, n);
    sum += bytes_sum(payload + in.at + moved, n, in.at + moved);
    tail_end = in.at;
  }
  sum = replace(sum, load32(tcp + 4), seq, false);
  store32(tcp + 4, seq);
  v.seq = seq;
  if (v.has(tcp_flag::kAck)) {
    sum = replace(sum, load32(tcp + 8), ack, false);
    store32(tcp + 8, ack);
    v.ack = ack;
  }
  set_tcp_checksum_from(tcp, sum);
  change_payload_length(frame, v, static_cast<int32_t>(total));
}

uint32_t cut_removed(uint8_t* frame, FrameView& v, const SeqShift& shift) noexcept {
  if (v.kind != FrameKind::kTcp) return 0;
  const uint32_t seq = v.seq;
  const uint32_t len = v.payload_len;
  uint8_t* payload = frame + v.payload_offset;
  uint32_t kept = 0;  // bytes of the payload kept so far, moved up to payload[0, kept)
  uint32_t pos = 0;   // the next payload byte not yet kept or cut
  for (unsigned i = 0; i < shift.pending() && pos < len; ++i) {
    const SeqShift::Edit& e = shift.edit(i);
    if (e.removed == 0) continue;
    // The removal in payload offsets, clipped to the payload.
    const int64_t from = static_cast<int32_t>(e.at - seq);
    const int64_t to = from + e.removed;
    if (to <= pos) continue;
    if (from >= len) break;
    const uint32_t cut_from = from > pos ? static_cast<uint32_t>(from) : pos;
    const uint32_t cut_to = to < len ? static_cast<uint32_t>(to) : len;
    if (cut_from > pos) std::memmove(payload + kept, payload + pos, cut_from - pos);
    kept += cut_from - pos;
    pos = cut_to;
  }
  if (kept == pos) {  // nothing cut
    rewrite_seq(frame, v, shift.forward(seq));
    return 0;
  }
  if (pos < len) std::memmove(payload + kept, payload + pos, len - pos);
  kept += len - pos;
  const uint32_t cut = len - kept;
  change_payload_length(frame, v, -static_cast<int32_t>(cut));
  v.seq = shift.forward(seq);
  store32(frame + v.l4_offset + 4, v.seq);
  set_tcp_checksum(frame, v);
  return cut;
}

namespace {

// Where the timestamp option's TSval starts in the options area, or -1
// (none, or a list that does not hold together up to it).
int timestamp_at(const uint8_t* p, size_t len) noexcept {
  TcpOptionWalk walk(p, len);
  TcpOption opt;
  while (walk.next(opt)) {
    if (opt.kind == tcp_option::kTimestamp) return opt.len == 10 ? static_cast<int>(opt.at + 2) : -1;
  }
  return -1;
}

}  // namespace

void shift_timestamps(uint8_t* frame, const FrameView& v, uint32_t tsval_add, uint32_t tsecr_add) noexcept {
  if (v.kind != FrameKind::kTcp || (tsval_add == 0 && tsecr_add == 0)) return;
  uint8_t* tcp = frame + v.l4_offset;
  const size_t header = static_cast<size_t>(v.payload_offset) - v.l4_offset;
  if (header <= kAreaAt) return;
  const int at = timestamp_at(tcp + kAreaAt, header - kAreaAt);
  if (at < 0) return;
  uint8_t* ts = tcp + kAreaAt + at;  // may be unaligned: byte access only
  const bool odd = ((kAreaAt + static_cast<size_t>(at)) & 1) != 0;
  uint32_t sum = ~tcp_checksum(tcp) & 0xffffu;
  const uint32_t tsval = load32(ts), tsecr = load32(ts + 4);
  store32(ts, tsval + tsval_add);
  store32(ts + 4, tsecr + tsecr_add);
  sum = replace(sum, tsval, tsval + tsval_add, odd);
  sum = replace(sum, tsecr, tsecr + tsecr_add, odd);
  set_tcp_checksum_from(tcp, sum);
}

void rewrite_window(uint8_t* frame, FrameView& v, uint16_t window) noexcept {
  if (v.kind != FrameKind::kTcp || v.window == window) return;
  const uint32_t word = load32(frame + v.l4_offset + 12);
  rewrite_word(frame, v, 12, (word & 0xffff0000u) | window);
  v.window = window;
}

}  // namespace sluice::dataplane
