// See mapped_file.h.
#include "control/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::control {

MadeFile make_file(const std::string& path, size_t bytes, std::span<const std::byte> header) {
  MadeFile out;
  const std::string tmp = path + ".new";
  (void)::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    out.error = tmp + ": cannot create it: " + std::strerror(errno);
    return out;
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      ::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
    out.error = tmp + ": cannot size it to " + std::to_string(bytes) + " bytes: " + std::strerror(errno);
    ::close(fd);
    (void)::unlink(tmp.c_str());
    return out;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    out.error = tmp + ": cannot rename it to " + path + ": " + std::strerror(errno);
    ::close(fd);
    (void)::unlink(tmp.c_str());
    return out;
  }
  out.fd = fd;
  return out;
}

std::byte* map_shared(int fd, size_t bytes) noexcept {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

Mapping::~Mapping() {
  if (map_ != nullptr) munmap(map_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

SetAside set_aside(const std::string& path, const std::string& why) {
  const std::string aside = path + ".set-aside";
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    return {{}, path + ": " + why + "; and it cannot be set aside: " + std::strerror(errno)};
  }
  return {path + ": " + why + "; set aside as " + aside, {}};
}

}  // namespace sluice::control
