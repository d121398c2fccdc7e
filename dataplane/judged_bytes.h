// The bytes of a flow's client stream that decisions and framing read (its
// request heads, and its chunked bodies, whose size lines say where the next
// request begins), kept as forwarded until the origin acknowledges them:
// what the limiter judged is what the origin must execute. The origin may
// drop a forwarded segment (a bad checksum, a timestamp its PAWS check
// refuses, an option it does not accept, a full receive window), and the
// client then sends those bytes again, as it likes. A repeat that reaches
// into a recorded range is written back to the judged bytes before it goes
// on; one that reaches into a range the record had to let go of before the
// origin acknowledged it is dropped (the sender repeats it, and the origin
// acknowledges it in the end, or the connection times out: never past the
// judgement). A Content-Length body is not recorded: no decision reads it.
//
// Kept in the flow's ParseContext. The context goes back only once every
// forwarded request is answered, and the origin answers a request it has
// whole: so a flow without a context has nothing unacknowledged that was
// judged. See dataplane/README.md, "What reaches the origin".
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

class JudgedBytes {
 public:
  explicit JudgedBytes(size_t capacity);
  // On memory it does not own (a context pool's arena).
  explicit JudgedBytes(std::span<char> memory) noexcept;

  // A fresh record for a flow whose bytes before `seq` the origin has all
  // acknowledged.
  void reset(uint32_t seq) noexcept;

  // Judged bytes forwarded at client sequence `seq`: `first` then `second`
  // (a held head's copy, then the rest from the segment).
  void record(uint32_t seq, std::span<const char> first, std::span<const char> second = {}) noexcept;

  // The origin acknowledges the client's stream up to `ack` (client numbers).
  void acknowledged(uint32_t ack) noexcept;

  // Checks the payload of a segment at `seq` that repeats forwarded bytes,
  // writing the recorded bytes back into it.
  [[nodiscard]] RepeatCheck check(uint32_t seq, std::span<char> payload) noexcept;

  [[nodiscard]] unsigned ranges() const noexcept { return count_; }

  // Goes on from `dead`, a record another process left in memory (a
  // restart that carries connections on), without its bytes, which were in
  // that process's buffers: what it recorded and the origin has not
  // acknowledged is let go of, so that a repeat reaching into it is
  // unverifiable (dropped), never forwarded unchecked. False, and nothing
  // taken, if its positions are not ones this code writes.
  [[nodiscard]] bool carry_on(const JudgedBytes& dead) noexcept;

 private:
  struct Entry {
    uint32_t seq;  // client sequence number of the range's first byte
    uint32_t len;
    uint32_t off;  // where its bytes are in bytes_
  };
  static constexpr size_t kMaxRanges = 64;  // heads in flight (at most 32), and body pieces

  // The oldest range loses its first `n` bytes: acknowledged (trim_front),
  // or let go of for room (let_go).
  void trim_front(uint32_t n) noexcept;
  void let_go(uint32_t n) noexcept;
  void make_room(size_t len) noexcept;
  [[nodiscard]] Entry& at(unsigned i) noexcept { return entries_[(front_ + i) % kMaxRanges]; }

  std::unique_ptr<char[]> own_;  // none when on memory given
  char* bytes_;
  size_t capacity_;
  size_t used_ = 0;  // bytes_[0, used_) hold the recorded ranges, in order
  std::array<Entry, kMaxRanges> entries_{};
  unsigned front_ = 0;
  unsigned count_ = 0;
  uint32_t acked_ = 0;      // the origin has every byte before this
  uint32_t let_go_to_ = 0;  // ranges before this were let go of; those after acked_ unacknowledged
};

}  // namespace sluice::dataplane
