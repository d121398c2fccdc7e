// See populated_memory.h.
#include "populated_memory.h"

#include <sys/mman.h>

#include <new>

namespace sluice::dataplane {

PopulatedMemory::PopulatedMemory(size_t bytes) : bytes_(bytes != 0 ? bytes : 1) {
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<std::byte*>(p);
}

PopulatedMemory::~PopulatedMemory() { munmap(data_, bytes_); }

}  // namespace sluice::dataplane
