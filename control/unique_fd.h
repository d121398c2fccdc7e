// A file descriptor that closes itself: on every return path, so error paths
// need not. Move-only.
#pragma once

#include <unistd.h>

#include <utility>

namespace sluice::control {

struct UniqueFd {
  int fd = -1;
  UniqueFd() = default;
  explicit UniqueFd(int f) noexcept : fd(f) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      if (fd >= 0) ::close(fd);
      fd = std::exchange(o.fd, -1);
    }
    return *this;
  }
  ~UniqueFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace sluice::control
