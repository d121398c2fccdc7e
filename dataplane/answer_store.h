// The answers a worker has sent, kept for clients that retransmit a refused
// request because the answer was lost: a byte ring that the newest answers
// overwrite. A flow keeps only the position of its answer (8 bytes), not a
// parse context, so a flood of refusals holds no per-flow buffers; an answer
// overwritten before its client asked again is lost, and the client gets a
// RST instead (counted). In sluiced the ring and its count of bytes written
// live in the flow file (control/flow_file.h), so a restart carries on a
// refused connection whose answer the client may still ask for again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "populated_memory.h"

namespace sluice::dataplane {

class AnswerStore {
 public:
  // `capacity` bytes, rounded up to a power of two (ring_size), in memory of
  // its own; or on `ring` (ring_size(capacity) bytes) with its count of
  // bytes written at `written`, both given (the flow file's), which it goes
  // on from: what the last process put there can still be got.
  explicit AnswerStore(size_t capacity, std::span<std::byte> ring = {}, uint64_t* written = nullptr);
  [[nodiscard]] static size_t ring_size(size_t capacity) noexcept;

  // Copies `answer` in; returns where it is.
  [[nodiscard]] uint64_t put(std::span<const char> answer) noexcept;
  // The answer put at `pos`, `len` bytes long, or an empty span if it has been
  // overwritten since (or never was: a position a damaged file left).
  [[nodiscard]] std::span<const char> get(uint64_t pos, size_t len) const noexcept;

 private:
  std::optional<PopulatedMemory> memory_;  // none when on memory given
  char* bytes_;
  size_t mask_;
  uint64_t own_written_ = 0;
  // Bytes put (and skipped) since the ring was made: never wraps. Counted
  // before an answer's bytes are copied, so that bytes a crash left half
  // overwritten are never got as an older answer's.
  uint64_t* written_;
};

}  // namespace sluice::dataplane
