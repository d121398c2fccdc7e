// The state directory: mkdir -p, crash-safe file replacement, the secret.
#include "state_dir.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "unique_fd.h"

namespace sluice::control {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// A write() may be cut short by a signal or a full disk: go on until every
// byte is down or the kernel says why not (errno).
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;  // a regular file never takes nothing without saying why
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string octal_mode(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// A secret drawn now, and kept in dir/name before anything is hashed with it.
Secret create_secret(const std::string& dir, const std::string& name) {
  Secret s;
  size_t got = 0;
  while (got < s.bytes.size()) {
    const ssize_t n = ::getrandom(s.bytes.data() + got, s.bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      s.error = "cannot draw a secret from getrandom(): " + errno_text(errno);
      return s;
    }
    got += static_cast<size_t>(n);
  }
  const std::string e = write_file_atomically(
      dir, name, std::string_view(reinterpret_cast<const char*>(s.bytes.data()), s.bytes.size()));
  if (!e.empty()) {
    s.bytes.fill(0);
    s.error = "cannot keep a new secret: " + e;
    return s;
  }
  s.created = true;
  return s;
}

// Why the open file at `path` is not to be read as the secret, or "".
std::string check_secret_file(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "cannot stat the secret " + path + ": " + errno_text(errno);
  if (!S_ISREG(st.st_mode)) return "the secret " + path + " is not a regular file";
  if ((st.st_mode & 077) != 0) {
    return "the secret " + path + " is accessible to group or others (mode " + octal_mode(st.st_mode) +
           "): run chmod 600 " + path;
  }
  if (st.st_size != static_cast<off_t>(kSecretSize)) {
    return "the secret " + path + " holds " + std::to_string(st.st_size) + " bytes, not " +
           std::to_string(kSecretSize) +
           ": not drawing a new one, because credential hashes made with the old one would stop matching "
           "(restore the file, or remove it and issue the credentials again)";
  }
  return "";
}

Secret read_secret(int fd, const std::string& path) {
  Secret s;
  s.error = check_secret_file(fd, path);
  if (!s.error.empty()) return s;
  size_t got = 0;
  while (got < s.bytes.size()) {
    const ssize_t n = ::read(fd, s.bytes.data() + got, s.bytes.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      s.bytes.fill(0);
      s.error = "cannot read the secret " + path + ": " + errno_text(errno);
      return s;
    }
    if (n == 0) {
      s.bytes.fill(0);
      s.error = "the secret " + path + " shrank while it was read";
      return s;
    }
    got += static_cast<size_t>(n);
  }
  return s;
}

}  // namespace

std::string sync_dir(const std::string& dir) {
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd < 0) return "cannot open " + dir + " to fsync it: " + errno_text(errno);
  if (::fsync(d.fd) != 0) return "cannot fsync " + dir + ": " + errno_text(errno);
  return "";
}

std::string prepare_state_dir(const std::string& dir) {
  if (dir.empty()) return "the state directory is an empty path";
  std::string path = dir;
  // "a/b/" names "a/b": without this mkdir -p would make "a/b" as a parent.
  while (path.size() > 1 && path.back() == '/') path.pop_back();

  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return "state directory " + dir + ": " + errno_text(errno);
    for (size_t i = 1; i < path.size(); ++i) {
      if (path[i] != '/' || path[i - 1] == '/') continue;
      const std::string parent = path.substr(0, i);
      // EEXIST covers an existing parent; one that is not a directory makes
      // the next mkdir fail with ENOTDIR, which names the problem.
      if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
        return "cannot create " + parent + " (a parent of the state directory): " + errno_text(errno);
    }
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create the state directory " + dir + ": " + errno_text(errno);
    // Someone may have made it in the meantime: look again at what is there.
    if (::stat(path.c_str(), &st) != 0) return "state directory " + dir + ": " + errno_text(errno);
  }
  if (!S_ISDIR(st.st_mode)) return "state directory " + dir + " exists but is not a directory";
  // What is kept there decides who is admitted (the credential secret) and
  // what was spent (the journal): only sluiced's own user may see or change
  // it, and a directory found otherwise is not made so silently.
  if (st.st_uid != ::geteuid()) {
    return "state directory " + dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
           std::to_string(::geteuid()) + " that sluiced runs as (chown it, or choose another)";
  }
  if ((st.st_mode & 07777) != 0700) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return "state directory " + dir + " has mode " + mode + "; it must be 0700 (chmod 700 " + dir + ")";
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0)
    return "state directory " + dir + " is not writable: " + errno_text(errno);
  return "";
}

std::string write_file_atomically(const std::string& dir, const std::string& name, std::string_view bytes) {
  if (dir.empty()) return "no directory to write " + name + " in";
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    return "'" + name + "' is not a file name";
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";

  // A tmp file left by a crash may have another mode or owner: start afresh
  // (O_EXCL) rather than truncate it.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return "cannot remove the stale " + tmp + ": " + errno_text(errno);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.fd < 0) return "cannot create " + tmp + ": " + errno_text(errno);

  const auto fail = [&](const std::string& what) {
    const int e = errno;
    if (fd.fd >= 0) ::close(fd.fd);
    fd.fd = -1;
    ::unlink(tmp.c_str());
    return what + ": " + errno_text(e);
  };
  if (!write_all(fd.fd, bytes)) return fail("cannot write " + tmp);
  if (::fsync(fd.fd) != 0) return fail("cannot fsync " + tmp);
  const int closed = ::close(fd.fd);
  fd.fd = -1;
  if (closed != 0) return fail("cannot close " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename " + tmp + " to " + path);
  return sync_dir(dir);
}

Secret load_or_create_secret(const std::string& dir, const std::string& name) {
  if (dir.empty() || name.empty()) {
    Secret s;
    s.error = "no state directory or file name for the secret";
    return s;
  }
  const std::string path = dir + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd >= 0) return read_secret(fd.fd, path);
  if (errno != ENOENT) {
    Secret s;
    s.error = "cannot open the secret " + path + ": " + errno_text(errno);
    return s;
  }
  return create_secret(dir, name);
}

Secret load_secret(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.fd >= 0) return read_secret(fd.fd, path);
  Secret s;
  s.error = "cannot open the secret " + path + ": " + errno_text(errno);
  return s;
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::string StateDirLock::acquire(const std::string& dir) {
  const std::string path = dir + "/lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char holder[32] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    if (e == EWOULDBLOCK) {
      std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("?");
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      return dir + " is in use by another sluiced (pid " + pid + "); give each a directory of its own";
    }
    return "cannot lock " + path + ": " + std::strerror(e);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // The pid is for the message above only: a filesystem without write()
  // (hugetlbfs, for --table-dir) keeps the lock without it.
  if (::ftruncate(fd, 0) != 0 ||
      (::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()) && errno != EINVAL)) {
    const int e = errno;
    ::close(fd);
    return "cannot write " + path + ": " + std::strerror(e);
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  return {};
}

}  // namespace sluice::control
