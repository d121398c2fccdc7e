// Where the flow engine puts the segments it writes itself (answers, RSTs,
// ACKs): the worker's transmit bursts, or a vector in tests. Segments of one
// port leave in the order they are sent, after any frame forwarded before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice::dataplane {

enum class Side : uint8_t { kClient = 0, kOrigin = 1 };

[[nodiscard]] constexpr Side other(Side s) noexcept { return s == Side::kClient ? Side::kOrigin : Side::kClient; }

class PacketSink {
 public:
  // A buffer for one frame of `len` bytes towards `to`, or an empty span when
  // none is free (the segment is then not sent; TCP recovers as from a loss).
  [[nodiscard]] virtual std::span<uint8_t> allocate(Side to, size_t len) noexcept = 0;
  // Sends the frame last allocated, `len` bytes long.
  virtual void send(Side to, size_t len) noexcept = 0;

 protected:
  ~PacketSink() = default;
};

}  // namespace sluice::dataplane
