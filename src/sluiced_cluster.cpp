// See sluiced_cluster.h.
#include "sluiced_cluster.h"

#include "control/credential_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/random.h>

#include <cerrno>
#include <charconv>
#include <ctime>
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

std::vector<control::SharedBucket> cluster_bucket_names(const limiter::CompiledPolicy& p, size_t kinds) {
  std::vector<control::SharedBucket> out(kinds);
  for (const limiter::CompiledBucket& b : p.buckets) {
    // A penalty box is shared by replication (boxings), not by syncing spends.
    if (b.cluster_salt != 0 && !b.penalty && b.index < kinds) {
      out[b.index] = control::SharedBucket(b.name, b.calendar, b.window.calendar);
    }
  }
  return out;
}

namespace {

using Change = control::ReplicaChange;

[[nodiscard]] std::optional<uint32_t> budget_of(const std::string& text) {
  uint32_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > 1'000'000'000) return std::nullopt;
  return v;
}

[[nodiscard]] bool apply_run(const std::string& token, const std::string& value, control::RunRegistry& runs) {
  const std::optional<uint32_t> budget = budget_of(value);
  return budget && runs.start(token, *budget, static_cast<int64_t>(std::time(nullptr))).ok();
}

[[nodiscard]] std::optional<std::vector<control::CredentialEntry>> entries_of(const Change& c) {
  std::vector<control::CredentialEntry> out;
  for (const auto& [hash, user] : c.all) {
    const std::optional<limiter::Digest> h = control::parse_digest_hex(hash);
    if (!h || !control::valid_user_name(user)) return std::nullopt;
    out.push_back({*h, user});
  }
  return out;
}

[[nodiscard]] bool apply_credentials(const Change& c, control::CredentialRegistry& credentials) {
  using F = control::CredentialRegistry::Failure;
  switch (c.op) {
    case Change::Op::kSet: {
      const std::optional<limiter::Digest> h = control::parse_digest_hex(c.field);
      return h && control::valid_user_name(c.value) && credentials.add(*h, c.value).ok;
    }
    case Change::Op::kDelete: {
      const std::optional<limiter::Digest> h = control::parse_digest_hex(c.field);
      if (!h) return false;
      const control::CredentialRegistry::Result r = credentials.remove(*h);
      return r.ok || r.failure == F::kNotFound;
    }
    case Change::Op::kReplace:
    case Change::Op::kMerge: {
      std::optional<std::vector<control::CredentialEntry>> entries = entries_of(c);
      if (!entries) return false;
      return c.op == Change::Op::kReplace ? credentials.replace(std::move(*entries), "the cluster's credentials").ok
                                          : credentials.merge(*entries, "the cluster's credentials").ok;
    }
  }
  return false;
}

}  // namespace

bool apply_replica_change(const Change& c, control::RunRegistry& runs, control::CredentialRegistry& credentials) {
  if (c.table == Change::Table::kCredentials) return apply_credentials(c, credentials);
  switch (c.op) {
    case Change::Op::kSet: return apply_run(c.field, c.value, runs);
    case Change::Op::kDelete: {
      const control::RunRegistry::Result r = runs.end(c.field);
      return r.ok() || r.outcome == control::RunRegistry::Outcome::kNotLive;
    }
    case Change::Op::kMerge: {
      bool all = true;
      for (const auto& [token, budget] : c.all) all = apply_run(token, budget, runs) && all;
      return all;
    }
    case Change::Op::kReplace: return false;  // runs are never replaced whole
  }
  return false;
}

std::string box_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "box");
  uint32_t tag = 0;
  if (::getrandom(&tag, sizeof tag, 0) != static_cast<ssize_t>(sizeof tag)) tag = static_cast<uint32_t>(::getpid());
  char out[300];
  std::snprintf(out, sizeof out, "%s/%08x", host, tag);
  return out;
}

std::string credential_fingerprint(const limiter::KeyHasher& credential_hasher) {
  constexpr std::string_view kConstant = "sluice credential-secret fingerprint";
  return control::digest_hex(credential_hasher.digest(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kConstant.data()), kConstant.size())));
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
