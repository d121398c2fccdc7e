// Edits a forwarded segment of a flow whose byte stream the appliance
// changes (RateLimit fields inserted into responses, refused
// requests cut out of a kept-open connection, their answers put in): the
// origin's sequence numbers mapped forward, the client's acknowledgement and
// SACK edges (RFC 2018) backward, through the flow's SeqShift; a client
// segment's absorbed bytes cut out; an origin segment grown in place with
// inserted bytes. In place, on every forwarded segment of such a flow, so the
// TCP checksum is patched incrementally (RFC 1624) rather than summed again
// wherever the payload allows. Raw bytes, no DPDK.
//
// All of these act only on a frame parse_frame called kTcp (anything else is
// left as it is), with `v` describing it.
#pragma once

#include <cstdint>
#include <span>

#include "frame.h"
#include "seq_shift.h"

namespace sluice::dataplane {

// Writes the sequence number (and v.seq).
void rewrite_seq(uint8_t* frame, FrameView& v, uint32_t seq) noexcept;

// Writes the acknowledgement number (and v.ack), whatever the ACK flag says.
void rewrite_ack(uint8_t* frame, FrameView& v, uint32_t ack) noexcept;

// Maps every edge of every SACK option with shift.backward(). Returns the
// number of blocks mapped (an edge the shift leaves where it is is not
// written). An option list that does not hold together (a length under 2 or
// running past the header, a SACK length that is not 2 + 8n with n in 1..4)
// leaves the frame untouched and returns 0.
[[nodiscard]] unsigned rewrite_sack(uint8_t* frame, const FrameView& v, const SeqShift& shift) noexcept;

// A client->origin segment: with the ACK flag, its acknowledgement and SACK
// edges in the origin's numbers.
void shift_client_segment(uint8_t* frame, FrameView& v, const SeqShift& shift) noexcept;

// An origin->client segment: its sequence number as the client sees it.
void shift_origin_segment(uint8_t* frame, FrameView& v, const SeqShift& shift) noexcept;

// A client->origin segment of a flow whose client stream has removals (a
// refused request absorbed on a kept-open connection): the payload bytes
// that fall in a removal are cut out (the rest moved up in place, lengths
// and checksums written again) and the sequence number is mapped forward.
// Returns the bytes cut; a segment that loses none is renumbered in place
// with an incremental checksum.
uint32_t cut_removed(uint8_t* frame, FrameView& v, const SeqShift& shift) noexcept;

// Bytes to put into a segment's payload before its byte `at` (an offset
// into the payload as it came; at == payload_len: at its end).
struct Insertion {
  uint32_t at;
  uint32_t len;
  const char* bytes;
};

// Puts `insertions` (in order of `at`) into the segment in place, moving the
// payload after each up, and gives it sequence number `seq` and (with the
// ACK flag) acknowledgement `ack`. The frame's buffer must hold v.frame_len
// plus their total. The TCP checksum is patched, not summed again (RFC
// 1624): the inserted bytes are added, and payload bytes moved by an odd
// number count byte-swapped; the IPv4 header's is written again (20 bytes).
void insert_in_place(uint8_t* frame, FrameView& v, std::span<const Insertion> insertions, uint32_t seq,
                     uint32_t ack) noexcept;

// The timestamp option's TSval moved on by `tsval_add` and its TSecr by
// `tsecr_add` (modulo 2^32), checksum patched; a segment without the option
// (or with an option list that does not hold together) is left as it is.
// For a flow whose handshake the SYN proxy made: each end has its own clock.
void shift_timestamps(uint8_t* frame, const FrameView& v, uint32_t tsval_add, uint32_t tsecr_add) noexcept;

// Writes the window field (and patches the checksum).
void rewrite_window(uint8_t* frame, FrameView& v, uint16_t window) noexcept;

}  // namespace sluice::dataplane
