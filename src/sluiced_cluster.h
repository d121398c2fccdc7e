// sluiced's part in cluster budgets: the secret every box shares
// for the keys of `scope: cluster` buckets, the workers' spend logs, and the
// sync thread's service, made from the policy's `cluster` section. A policy
// without one makes none of it, and the workers record nothing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/cluster/cluster_service.h"
#include "control/credential_registry.h"
#include "control/run_registry.h"
#include "limiter/bucket_key.h"
#include "limiter/compiled_policy.h"
#include "limiter/spend_log.h"
#include "policy/policy.h"

namespace sluice::sluiced {

// The shared secret from `secret_file`: a regular file of 32 to 4096 bytes
// that neither others nor the group may write and others may not read.
// nullopt with `error` saying why (naming the file).
[[nodiscard]] std::optional<limiter::KeyHasher> read_cluster_secret(const std::string& path, std::string& error);

// The Redis password from `password_file`, under the secret's rules: 1 to
// 512 bytes on one line (a final line end is not part of it).
[[nodiscard]] std::optional<std::string> read_cluster_password(const std::string& path, std::string& error);

// How the sync connects: the section's username and its password read.
[[nodiscard]] std::optional<control::RedisLink::Options> cluster_link_options(const policy::ClusterSpec& spec,
                                                                             std::string& error);

// Connects to the seeds as the sync will (TLS and AUTH included) and asks
// for the topology: kAuth when Redis refuses the credentials or wants some,
// kTls when the handshake fails, which no retry mends (sluiced does not
// start: is_setup_error); kUnreachable and the like when
// no seed answers (sluiced starts in fallback, --check-config --connect
// says so).
[[nodiscard]] control::RedisLink::Result probe_cluster(const policy::ClusterSpec& spec,
                                                       const control::RedisLink::Options& options);

// Per bucket kind (up to `kinds`): the policy's cluster bucket of that kind
// (its name, whether a calendar window), or an empty name.
[[nodiscard]] std::vector<control::SharedBucket> cluster_bucket_names(const limiter::CompiledPolicy& p, size_t kinds);

// Another box's change to the runs or the credentials, applied here through
// the registries (journalled, published to the workers). False if it could
// not be (a value that does not parse, a full map, a journal that failed).
[[nodiscard]] bool apply_replica_change(const control::ReplicaChange& c, control::RunRegistry& runs,
                                        control::CredentialRegistry& credentials);
// This box's name in the change stream: host name and a random tag (its own
// changes are told apart by it).
[[nodiscard]] std::string box_name();
// A fingerprint of the credential secret: its keyed digest of a constant,
// which tells whether two boxes share it and nothing about it.
[[nodiscard]] std::string credential_fingerprint(const limiter::KeyHasher& credential_hasher);

class ClusterPart {
 public:
  // Reads the secret and the Redis password if the policy has a cluster
  // section: the error, or empty.
  [[nodiscard]] std::string prepare(const policy::Policy& p);
  [[nodiscard]] bool on() const noexcept { return spec_.has_value(); }
  [[nodiscard]] const limiter::KeyHasher* hasher() const noexcept { return hasher_ ? &*hasher_ : nullptr; }

  // One log per worker (none when off).
  void make_logs(unsigned workers);
  [[nodiscard]] limiter::SpendLog* log(unsigned worker) const noexcept {
    return worker < logs_.size() ? logs_[worker].get() : nullptr;
  }

  // The sync service, given what it needs from the appliance (when on).
  void build(control::ClusterService::Setup setup);
  [[nodiscard]] control::ClusterService* service() noexcept { return service_.get(); }
  [[nodiscard]] const control::ClusterService* service() const noexcept { return service_.get(); }

 private:
  std::optional<policy::ClusterSpec> spec_;
  std::optional<limiter::KeyHasher> hasher_;
  control::RedisLink::Options link_;  // the credentials, read by prepare()
  std::vector<std::unique_ptr<limiter::SpendLog>> logs_;
  std::unique_ptr<control::ClusterService> service_;
};

}  // namespace sluice::sluiced
