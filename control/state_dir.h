// The appliance's state directory (`sluiced --state-dir DIR`): what must
// survive a restart of sluiced (the runs journal, the credential secret) is
// kept there. This file makes the directory, replaces files in it so a crash
// leaves either the old bytes or the new ones, and keeps the secret that
// credential hashes are computed with.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::control {

// Creates `dir` (0700) and any missing parents (0755, like mkdir -p) if it is
// missing. An existing directory must be owned by the user sluiced runs as
// (root) and have mode 0700; it is never chown'ed or chmod'ed to make it so.
// Returns "" or a one-line reason (exists but is not a directory, another
// owner, a wider mode, not writable, ...).
[[nodiscard]] std::string prepare_state_dir(const std::string& dir);

// Replaces dir/name with `bytes` so that a crash at any point leaves either
// the old file or the new one: writes dir/name.tmp (0600), fsyncs it, renames
// it over dir/name and fsyncs the directory. Returns "" or the reason. On
// failure the tmp file is removed and the old file is left as it was.
[[nodiscard]] std::string write_file_atomically(const std::string& dir, const std::string& name,
                                                std::string_view bytes);

// fsyncs the directory itself: what makes a rename or a new file in it
// durable. "" or the reason.
[[nodiscard]] std::string sync_dir(const std::string& dir);

// An exclusive lock on DIR/lock (flock) held for the object's life, with the
// holder's pid written in it: a second sluiced on the same state directory
// would interleave journal records and credential rewrites, so it is refused.
// The kernel drops the lock when the process ends, however it ends.
class StateDirLock {
 public:
  StateDirLock() = default;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  ~StateDirLock();
  // "" or why not (naming the holder's pid when it is another process).
  [[nodiscard]] std::string acquire(const std::string& dir);

 private:
  int fd_ = -1;
};

inline constexpr size_t kSecretSize = 192;

struct Secret {
  std::array<uint8_t, kSecretSize> bytes{};
  bool created = false;  // drawn now (the file did not exist)
  std::string error;     // non-empty: `bytes` is not a secret
};

// Reads dir/name, which must hold exactly kSecretSize bytes and be readable
// by its owner only; or, if it does not exist, draws a new secret from
// getrandom() and writes it there (0600). A file of any other size is an
// error, never a reason to draw a new one: credential hashes computed with the
// old secret would silently stop matching.
[[nodiscard]] Secret load_or_create_secret(const std::string& dir, const std::string& name);

// Reads dir/name under the same rules, never creating it: a missing file is
// an error (sluice-replay reads a box's secret and must not draw one there).
[[nodiscard]] Secret load_secret(const std::string& dir, const std::string& name);

}  // namespace sluice::control
