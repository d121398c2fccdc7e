// The sequence-number correspondence of one direction of a flow whose byte
// stream the appliance edits, the way NAT helpers do: bytes inserted (the
// RateLimit fields of an admitted response, a 429 spliced into the response
// stream) and bytes removed (a refused request absorbed on a keep-alive
// connection). The sender numbers the stream it sent; the receiver sees the
// edited one. Sequence numbers of the sender's segments are mapped forward;
// the receiver's acknowledgements and SACK edges are mapped back.
//
// An edit is kept until the receiver has acknowledged past it (no segment
// before it can then be sent again); it is then folded into a base shift.
// Fixed capacity, no allocation: a flow with more edits in flight than that
// gets no more (the caller then leaves the stream as it is).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace sluice::dataplane {

class SeqShift {
 public:
  // As many as a connection may have responses outstanding (each gets one).
  static constexpr unsigned kMaxEdits = 32;

  // At sender sequence `at` (after every edit already recorded), `removed`
  // bytes of the sender's stream are dropped and `inserted` bytes put in
  // their place. False if there is no room (nothing recorded) or `at` is
  // before the last edit.
  [[nodiscard]] bool add(uint32_t at, uint32_t removed, uint32_t inserted) noexcept;
  // The last edit removes `removed` bytes from now on (a refused request's
  // body, removed as it arrives). Only the last edit may grow: nothing is
  // recorded after it yet.
  void set_last_removed(uint32_t removed) noexcept;

  // A sender sequence number as the receiver sees it. Bytes inserted at `at`
  // belong to the segment that ends there: a segment that starts at `at`
  // follows them. A position inside a removed range maps to where the range
  // went (after what was inserted).
  [[nodiscard]] uint32_t forward(uint32_t sender_seq) const noexcept;
  // A receiver acknowledgement (or SACK edge) in the sender's numbers. An
  // acknowledgement inside inserted bytes covers the sender's bytes only up
  // to the edit.
  [[nodiscard]] uint32_t backward(uint32_t receiver_ack) const noexcept;

  // The receiver has acknowledged up to `receiver_ack`: edits wholly before
  // it are folded into the base shift.
  void acknowledged(uint32_t receiver_ack) noexcept;
  // The same, but only edits that also end at or before sender sequence
  // `sender_limit` (the sender may still send again what lies after it).
  void acknowledged(uint32_t receiver_ack, uint32_t sender_limit) noexcept;

  // No pending edit, everything shifted by `base` (what a flow keeps once
  // every edit has been acknowledged).
  void reset(int64_t base = 0) noexcept;
  // The sender's numbers all move down by `delta`, what the receiver sees
  // staying as it was: a stream the appliance numbered itself until the
  // real sender's ISN was known (delayed binding, syn_proxy.h).
  void renumber_sender(uint32_t delta) noexcept;
  // The receiver's numbers all move up by `delta`, the sender's staying as
  // they were: a receiver whose numbers were learnt late (an adopted
  // connection, flow_adopter.h).
  void renumber_receiver(uint32_t delta) noexcept;

  [[nodiscard]] bool empty() const noexcept { return count_ == 0 && base_ == 0; }
  [[nodiscard]] unsigned pending() const noexcept { return count_; }
  // The shift of everything after the last edit (receiver - sender).
  [[nodiscard]] int64_t total_shift() const noexcept;
  // The shift of every position before the first pending edit.
  [[nodiscard]] int64_t base() const noexcept { return base_; }
  // The pending edits, oldest first (for rewriting a segment that spans one).
  struct Edit {
    uint32_t at;        // sender sequence
    uint32_t removed;
    uint32_t inserted;
    int64_t before;     // shift of the positions before it (base included)
  };
  [[nodiscard]] const Edit& edit(unsigned i) const noexcept { return edits_[i]; }
  // Whether its count is one this code writes (a shift another process
  // left in memory is checked before it is taken on).
  [[nodiscard]] bool valid() const noexcept { return count_ <= kMaxEdits; }
  // The object's bytes that are in use: the count, the base and the pending
  // edits (a copy of these reads as the whole, ChangeUndo).
  [[nodiscard]] size_t live_bytes() const noexcept {
    return static_cast<size_t>(reinterpret_cast<const std::byte*>(edits_.data() + count_) -
                               reinterpret_cast<const std::byte*>(this));
  }

 private:
  // The count and base first: a shift with an edit or two in use touches
  // one cache line.
  unsigned count_ = 0;
  int64_t base_ = 0;  // shift of every position before the first pending edit
  std::array<Edit, kMaxEdits> edits_{};
};

}  // namespace sluice::dataplane
