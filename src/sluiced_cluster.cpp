// See sluiced_cluster.h.
#include "sluiced_cluster.h"

#include "control/cluster/redis_router.h"
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
constexpr size_t kMaxPassword = 512;
constexpr size_t kMaxKeyFile = 64 * 1024;

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

namespace {

// A file only its owner may change and the world may not read (the secret
// and the password): its bytes, from `min` to `max` of them; nullopt with
// `error` saying why, naming the file as `what`.
std::optional<std::vector<uint8_t>> read_private_file(const std::string& path, const std::string& what, size_t min,
                                                      size_t max, const std::string& size_hint,
                                                      std::string& error) {
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
  if (st.st_size < static_cast<off_t>(min) || st.st_size > static_cast<off_t>(max)) {
    error = what + size_hint + ", it holds " + std::to_string(st.st_size);
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
  return bytes;
}

}  // namespace

std::optional<limiter::KeyHasher> read_cluster_secret(const std::string& path, std::string& error) {
  const std::optional<std::vector<uint8_t>> bytes =
      read_private_file(path, "cluster secret_file " + path + ": ", kMinSecret, kMaxSecret,
                        "must hold 32 to 4096 bytes (head -c 64 /dev/urandom > FILE)", error);
  if (!bytes) return std::nullopt;
  return limiter::KeyHasher::from_material(*bytes);
}

std::optional<std::string> read_cluster_password(const std::string& path, std::string& error) {
  const std::string what = "cluster password_file " + path + ": ";
  const std::optional<std::vector<uint8_t>> bytes =
      read_private_file(path, what, 1, kMaxPassword + 2, "must hold a password of 1 to 512 bytes on one line", error);
  if (!bytes) return std::nullopt;
  std::string password(bytes->begin(), bytes->end());
  // One line: the line end an editor or `echo` adds is not the password's.
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty() || password.size() > kMaxPassword ||
      password.find_first_of(std::string_view("\0\r\n", 3)) != std::string::npos) {
    error = what + "must hold a password of 1 to 512 bytes on one line";
    return std::nullopt;
  }
  return password;
}

std::optional<control::RedisLink::Options> cluster_link_options(const policy::ClusterSpec& spec, std::string& error) {
  control::RedisLink::Options o;
  if (spec.tls) {
    // The client key is a secret like the password: the same rules, checked
    // before OpenSSL reads it by name.
    if (!spec.tls->key_file.empty() &&
        !read_private_file(spec.tls->key_file, "cluster tls key_file " + spec.tls->key_file + ": ", 1, kMaxKeyFile,
                           "must hold a PEM key of at most 64 KiB", error)) {
      return std::nullopt;
    }
    o.tls = control::RedisTlsContext::make(
        {spec.tls->ca_file, spec.tls->cert_file, spec.tls->key_file, spec.tls->server_name}, error);
    if (!o.tls) return std::nullopt;
  }
  if (spec.password_file.empty()) return o;
  std::optional<std::string> password = read_cluster_password(spec.password_file, error);
  if (!password) return std::nullopt;
  o.username = spec.username;
  o.password = std::move(*password);
  return o;
}

control::RedisLink::Result probe_cluster(const policy::ClusterSpec& spec, const control::RedisLink::Options& options) {
  std::vector<control::RedisEndpoint> seeds;
  for (const std::string& e : spec.redis) {
    std::string why;
    if (std::optional<control::RedisEndpoint> ep = control::parse_redis_endpoint(e, why)) seeds.push_back(*ep);
  }
  control::RedisRouter router(std::move(seeds), options);
  return router.probe(control::RedisLink::Clock::now());
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
  if (!hasher_) return error;
  std::optional<control::RedisLink::Options> link = cluster_link_options(*spec_, error);
  if (!link) return error;
  link_ = std::move(*link);
  return {};
}

void ClusterPart::make_logs(unsigned workers) {
  if (!on()) return;
  for (unsigned i = 0; i < workers; ++i) logs_.push_back(std::make_unique<limiter::SpendLog>());
}

void ClusterPart::build(control::ClusterService::Setup setup) {
  if (!on()) return;
  setup.spec = *spec_;
  setup.redis.username = link_.username;
  setup.redis.password = link_.password;
  setup.redis.tls = link_.tls;
  for (const auto& l : logs_) setup.logs.push_back(l.get());
  service_ = std::make_unique<control::ClusterService>(std::move(setup));
}

}  // namespace sluice::sluiced
