// The answers a worker has sent, kept for clients that retransmit a refused
// request because the answer was lost: a byte ring that the newest answers
// overwrite. A flow keeps only the position of its answer (8 bytes), not a
// parse context, so a flood of refusals holds no per-flow buffers; an answer
// overwritten before its client asked again is lost, and the client gets a
// RST instead (counted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "populated_memory.h"

namespace sluice::dataplane {

class AnswerStore {
 public:
  // `capacity` bytes, rounded up to a power of two.
  explicit AnswerStore(size_t capacity);

  // Copies `answer` in; returns where it is.
  [[nodiscard]] uint64_t put(std::span<const char> answer) noexcept;
  // The answer put at `pos`, `len` bytes long, or an empty span if it has been
  // overwritten since.
  [[nodiscard]] std::span<const char> get(uint64_t pos, size_t len) const noexcept;

 private:
  PopulatedMemory memory_;
  char* bytes_;
  size_t mask_;
  uint64_t written_ = 0;  // bytes put (and skipped) since the start: never wraps
};

}  // namespace sluice::dataplane
