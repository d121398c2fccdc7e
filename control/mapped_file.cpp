// See mapped_file.h.
#include "control/mapped_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 (older C library headers lack it)
#endif

namespace sluice::control {

namespace {

size_t rounded(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }

// Writes `bytes` at the start of `fd` through a mapping (hugetlbfs has no write()).
bool write_start_mapped(int fd, std::span<const std::byte> bytes, size_t unit) {
  const size_t len = rounded(bytes.size(), unit);
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return false;
  std::memcpy(p, bytes.data(), bytes.size());
  munmap(p, len);
  return true;
}

}  // namespace

size_t file_unit(int fd) noexcept {
  struct statfs fs {};
  if (fstatfs(fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == HUGETLBFS_MAGIC && fs.f_bsize > 0) {
    return static_cast<size_t>(fs.f_bsize);
  }
  return kFilePage;
}

size_t stored_size(int fd, size_t bytes) noexcept { return rounded(bytes, file_unit(fd)); }

bool read_start(int fd, void* out, size_t size) noexcept {
  const size_t unit = file_unit(fd);
  if (unit == kFilePage) return ::pread(fd, out, size, 0) == static_cast<ssize_t>(size);
  const size_t len = rounded(size, unit);
  void* p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return false;
  std::memcpy(out, p, size);
  munmap(p, len);
  return true;
}

std::string store_of(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return "an unknown filesystem";
  const auto type = static_cast<unsigned long>(fs.f_type);
  if (type == HUGETLBFS_MAGIC) return "hugetlbfs (" + std::to_string(fs.f_bsize / 1024) + " kB pages)";
  if (type == TMPFS_MAGIC || type == RAMFS_MAGIC) return "a tmpfs";
  return "a disk (the kernel writes the pages back)";
}

MadeFile make_file(const std::string& path, size_t bytes, std::span<const std::byte> header) {
  MadeFile out;
  const std::string tmp = path + ".new";
  (void)::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    out.error = tmp + ": cannot create it: " + std::strerror(errno);
    return out;
  }
  const size_t unit = file_unit(fd);
  const bool header_written =
      ::ftruncate(fd, static_cast<off_t>(rounded(bytes, unit))) == 0 &&
      (unit == kFilePage ? ::pwrite(fd, header.data(), header.size(), 0) == static_cast<ssize_t>(header.size())
                         : write_start_mapped(fd, header, unit));
  if (!header_written) {
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

std::byte* map_shared(int fd, size_t bytes, Populate populate) noexcept {
  const size_t len = stored_size(fd, bytes);
  if (populate == Populate::kForReading) {
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  // MAP_POPULATE maps a disk file's pages read-only (the kernel tracks their
  // dirtying), so each one's first write would fault again.
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  if (madvise(p, len, MADV_POPULATE_WRITE) != 0) {
    // A kernel before 5.14: faulted in for reading, as MAP_POPULATE does.
    munmap(p, len);
    p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) return nullptr;
  }
  return static_cast<std::byte*>(p);
}

Mapping::~Mapping() {
  if (map_ != nullptr) munmap(map_, fd_ >= 0 ? stored_size(fd_, bytes_) : bytes_);
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
