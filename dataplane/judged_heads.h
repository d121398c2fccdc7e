// The request heads a flow forwarded, byte for byte, until the origin has
// acknowledged them: what the limiter judged is what the origin must
// execute. The origin may drop a forwarded segment (a bad checksum, a
// timestamp its PAWS check refuses, an option it does not accept, a full
// receive window), and the client then sends those bytes again, as it
// likes. A repeat that reaches into a recorded head is written back to the
// judged bytes before it goes on; one that reaches into a head the record
// had to let go of before the origin acknowledged it is dropped (the sender
// repeats it). Body bytes are not recorded: no decision reads them.
//
// Kept in the flow's ParseContext. The context goes back only once every
// forwarded request is answered, and the origin answers a head it has: so a
// flow without a context has no unacknowledged head. See dataplane/README.md,
// "What reaches the origin".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace sluice::dataplane {

enum class RepeatCheck : uint8_t {
  kUnchanged,     // nothing in the segment differs from what was judged
  kRewritten,     // bytes of recorded heads written back to the judged ones
  kUnverifiable,  // it reaches into a head let go of before the origin acknowledged it: drop it
};

class JudgedHeads {
 public:
  explicit JudgedHeads(size_t capacity);

  // A fresh record for a flow whose bytes before `seq` the origin has all
  // acknowledged.
  void reset(uint32_t seq) noexcept;

  // A head forwarded at client sequence `seq`: its bytes are `first` then
  // `second` (a held head's copy, then the rest from the segment).
  void record(uint32_t seq, std::span<const char> first, std::span<const char> second = {}) noexcept;

  // The origin acknowledges the client's stream up to `ack` (client numbers).
  void acknowledged(uint32_t ack) noexcept;

  // Checks the payload of a segment at `seq` that repeats forwarded bytes,
  // writing recorded heads' bytes back into it.
  [[nodiscard]] RepeatCheck check(uint32_t seq, std::span<char> payload) noexcept;

  [[nodiscard]] unsigned heads() const noexcept { return count_; }

 private:
  struct Entry {
    uint32_t seq;  // client sequence number of the head's first byte
    uint32_t len;
    uint32_t off;  // where its bytes are in bytes_
  };
  static constexpr size_t kMaxHeads = 64;  // two per outstanding request: at least as many as can be in flight

  void drop_front() noexcept;
  void make_room(size_t len) noexcept;
  [[nodiscard]] Entry& at(unsigned i) noexcept { return entries_[(front_ + i) % kMaxHeads]; }

  std::unique_ptr<char[]> bytes_;
  size_t capacity_;
  size_t used_ = 0;  // bytes_[0, used_) hold the recorded heads, in order
  std::array<Entry, kMaxHeads> entries_{};
  unsigned front_ = 0;
  unsigned count_ = 0;
  uint32_t acked_ = 0;      // the origin has every byte before this
  uint32_t let_go_to_ = 0;  // heads before this were let go of; those after acked_ unacknowledged
};

}  // namespace sluice::dataplane
