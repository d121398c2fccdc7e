// Reading an object another process left in memory (a restart that carries
// connections on, dataplane/flow_carry.h): its bytes may be anything a
// crash or a damaged file left there. A bool whose byte is neither 0 nor 1
// may not even be loaded (it is undefined behaviour, and the compiler
// assumes it cannot happen), so each bool of such an object is checked as
// a byte before it is read or copied as a bool; the streams and the
// data plane's contexts use these before they take anything on.
#pragma once

#include <cstring>
#include <initializer_list>

namespace sluice::http {

// Whether the byte at `b` is a bool's (0 or 1), read without loading a bool.
[[nodiscard]] inline bool is_bool_byte(const bool& b) noexcept {
  unsigned char c;
  std::memcpy(&c, &b, 1);
  return c <= 1;
}
[[nodiscard]] inline bool all_bool_bytes(std::initializer_list<const bool*> bools) noexcept {
  for (const bool* b : bools) {
    if (!is_bool_byte(*b)) return false;
  }
  return true;
}

// Copies a trivially copyable object byte by byte (its bools not loaded).
template <class T>
void copy_bytes(T& to, const T& from) noexcept {
  std::memcpy(static_cast<void*>(&to), static_cast<const void*>(&from), sizeof(T));
}

}  // namespace sluice::http
