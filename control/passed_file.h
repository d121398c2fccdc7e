// A file a control client passes with its request (SCM_RIGHTS) instead of
// naming it: sluiced runs as root and never opens a path a client names, so
// sluicectl opens the file with its caller's own rights and passes the
// descriptor; a client can make the daemon read only what it could read
// itself. The control server reads the descriptor (a regular file, bounded)
// before the command runs, and closes it.
//
// On the wire: the request carries "fd": true and the descriptor travels
// with the request's bytes; "file" names the file for messages only.
#pragma once

#include <cstddef>
#include <string>

namespace sluice::control {

// A credentials file of a few hundred thousand users, and any policy.
inline constexpr size_t kMaxPassedFileBytes = size_t{16} << 20;

struct PassedFile {
  bool passed = false;  // the request said a descriptor came with it
  std::string bytes;    // the file's contents, when it could be read
  std::string error;    // passed, but not usable: why (not a regular file, too large, unreadable, missing)
};

// Reads a passed descriptor (closing it): a regular file of at most
// kMaxPassedFileBytes.
[[nodiscard]] PassedFile read_passed_file(int fd);

}  // namespace sluice::control
