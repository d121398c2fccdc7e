// Counts the program's allocations while a test asks (the hot path's
// "allocates nothing" made checkable): replaces the global operator new and
// delete. Include it in exactly ONE source file of a test program, which
// then counts every allocation made anywhere in that program.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace sluice::test {
inline std::atomic<uint64_t> g_allocations{0};
inline std::atomic<bool> g_counting{false};
}  // namespace sluice::test

// Not inlined: GCC would otherwise see free() called on what operator new
// returned and warn of a mismatch (they are this pair, malloc and free).
[[gnu::noinline]] void* operator new(size_t n) {
  if (sluice::test::g_counting.load(std::memory_order_relaxed)) {
    sluice::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
