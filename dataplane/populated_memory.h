// Anonymous memory mapped and faulted in at once (MAP_POPULATE), for the
// worker's big pools. The kernel fills it in one pass; on this VM, where a
// page fault is expensive, that is several times faster than touching the
// pages of a heap allocation one by one, and it is part of the time a
// restart forwards nothing. And no page of it faults on a worker's path
// later. Zero-filled.
#pragma once

#include <cstddef>

namespace sluice::dataplane {

class PopulatedMemory {
 public:
  // Throws std::bad_alloc if it cannot be mapped.
  explicit PopulatedMemory(size_t bytes);
  ~PopulatedMemory();
  PopulatedMemory(const PopulatedMemory&) = delete;
  PopulatedMemory& operator=(const PopulatedMemory&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] size_t size() const noexcept { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace sluice::dataplane
