// See sluiced_cluster.h.
#include "sluiced_cluster.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::sluiced {
namespace {

constexpr size_t kMinSecret = 32;
constexpr size_t kMaxSecret = 4096;

// Closes the descriptor it holds.
class OpenFile {
 public:
  explicit OpenFile(int fd) noexcept : fd_(fd) {}
  ~OpenFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::optional<limiter::KeyHasher> read_cluster_secret(const std::string& path, std::string& error) {
  const std::string what = "cluster secret_file " + path + ": ";
  const OpenFile f(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (f.fd() < 0) {
    error = what + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st{};
  if (::fstat(f.fd(), &st) != 0 || !S_ISREG(st.st_mode)) {
    error = what + "not a regular file";
    return std::nullopt;
  }
  if ((st.st_mode & (S_IWGRP | S_IRWXO)) != 0) {
    error = what + "others may read or write it, or its group write it (chmod 0600, or 0640)";
    return std::nullopt;
  }
  if (st.st_size < static_cast<off_t>(kMinSecret) || st.st_size > static_cast<off_t>(kMaxSecret)) {
    error = what + "must hold 32 to 4096 bytes (head -c 64 /dev/urandom > FILE), it holds " +
            std::to_string(st.st_size);
    return std::nullopt;
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(f.fd(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = what + (n < 0 ? std::strerror(errno) : "shorter than it said");
      return std::nullopt;
    }
    got += static_cast<size_t>(n);
  }
  return limiter::KeyHasher::from_material(bytes);
}

std::vector<std::string> cluster_bucket_names(const limiter::CompiledPolicy& p, size_t kinds) {
  std::vector<std::string> names(kinds);
  for (const limiter::CompiledBucket& b : p.buckets) {
    if (b.cluster_salt != 0 && b.index < kinds) names[b.index] = b.name;
  }
  return names;
}

std::string ClusterPart::prepare(const policy::Policy& p) {
  if (!p.cluster) return {};
  spec_ = *p.cluster;
  std::string error;
  hasher_ = read_cluster_secret(spec_->secret_file, error);
  return error;
}

void ClusterPart::make_logs(unsigned workers) {
  if (!on()) return;
  for (unsigned i = 0; i < workers; ++i) logs_.push_back(std::make_unique<limiter::SpendLog>());
}

void ClusterPart::build(control::ClusterService::Setup setup) {
  if (!on()) return;
  setup.spec = *spec_;
  for (const auto& l : logs_) setup.logs.push_back(l.get());
  service_ = std::make_unique<control::ClusterService>(std::move(setup));
}

}  // namespace sluice::sluiced
