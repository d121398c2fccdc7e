// What the state directory's mapped files (the limiter tables, the flow
// file) share: a new file made whole before it has its name, a shared
// mapping faulted in at once, and an unusable file set aside for an
// operator to look at. Control plane only: at start.
//
// The files may be on a disk, a tmpfs or a hugetlbfs mount (--table-dir).
// hugetlbfs has no read() or write() and sizes files in huge pages, so a
// file is sized and mapped in its filesystem's unit (file_unit), and its
// header read and written through a mapping there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace sluice::control {

struct MadeFile {
  int fd = -1;        // open read-write; -1: see `error`
  std::string error;  // what failed, with the path
};

// `path` made (replacing any) `bytes` long, zero but for `header` at its
// start, through PATH.new and a rename: a crash leaves no half-made one.
[[nodiscard]] MadeFile make_file(const std::string& path, size_t bytes, std::span<const std::byte> header);

// `bytes` of `fd` mapped shared and read-write, every page faulted in now;
// nullptr (errno set) if it cannot be. For writing: a disk file's pages are
// then writable at once too (MAP_POPULATE maps them read-only, for the
// kernel to see their first write, which faults); worth it where the
// start writes them anyway (the flow file's contexts), not where it only
// reads them (the bucket tables' re-attach: measured 35 ms slower). On a
// disk's filesystem the kernel's writeback makes a page fault again at its
// next write, now and then on a worker's path: --table-dir on a tmpfs,
// whose pages are writable either way, avoids it.
enum class Populate : uint8_t { kForReading, kForWriting };
[[nodiscard]] std::byte* map_shared(int fd, size_t bytes, Populate populate) noexcept;

// The unit `fd`'s filesystem sizes and maps files in: its huge page on
// hugetlbfs, else kFilePage.
[[nodiscard]] size_t file_unit(int fd) noexcept;
// The size a file of `bytes` has there.
[[nodiscard]] size_t stored_size(int fd, size_t bytes) noexcept;
// The first `size` bytes of `fd` into `out`: false if it has fewer.
[[nodiscard]] bool read_start(int fd, void* out, size_t size) noexcept;
// What `dir` is on, for the start-up summary: "a tmpfs", "hugetlbfs (2048 kB
// pages)", or "a disk (the kernel writes the pages back)".
[[nodiscard]] std::string store_of(const std::string& dir);

// Renames `path`, unusable for reason `why`, to PATH.set-aside (replacing
// an older one). `note` says so ("PATH: WHY; set aside as ..."), or
// `error` why it could not be done.
struct SetAside {
  std::string note;
  std::string error;
};
[[nodiscard]] SetAside set_aside(const std::string& path, const std::string& why);

// A state file open and mapped shared (map_shared): unmapped and closed
// with it.
class Mapping {
 public:
  Mapping(std::string path, int fd, std::byte* map, size_t bytes) noexcept
      : path_(std::move(path)), fd_(fd), map_(map), bytes_(bytes) {}
  ~Mapping();  // unmaps what map_shared mapped: `bytes` in the file's unit
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return map_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int fd_;
  std::byte* map_;
  size_t bytes_;
};

constexpr size_t kFilePage = 4096;
[[nodiscard]] constexpr size_t round_to_page(size_t n) noexcept { return (n + kFilePage - 1) / kFilePage * kFilePage; }

}  // namespace sluice::control
