// See passed_file.h.
#include "control/passed_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::control {

PassedFile read_passed_file(int fd) {
  PassedFile f;
  f.passed = true;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    f.error = std::string("the passed file cannot be examined: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    // A pipe, socket or device could block the control thread or never end.
    f.error = "the passed file is not a regular file";
  } else if (static_cast<size_t>(st.st_size) > kMaxPassedFileBytes) {
    f.error = "the passed file is larger than " + std::to_string(kMaxPassedFileBytes >> 20) + " MiB";
  } else {
    // Up to one byte past its size: a file that grew meanwhile is refused,
    // never read cut short.
    const size_t size = static_cast<size_t>(st.st_size);
    f.bytes.resize(size + 1);
    size_t got = 0;
    while (got < f.bytes.size()) {
      const ssize_t n = ::pread(fd, f.bytes.data() + got, f.bytes.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        f.error = std::string("the passed file cannot be read: ") + std::strerror(errno);
        break;
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    f.bytes.resize(got);
    if (f.error.empty() && got > size) f.error = "the passed file changed while it was read";
    if (!f.error.empty()) f.bytes.clear();
  }
  ::close(fd);
  return f;
}

}  // namespace sluice::control
