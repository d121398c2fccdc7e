// What the box knew while the traffic was recorded, and one policy's limiter
// set up with it: the live runs (TB01, TB11-TB13) and the credential-to-user
// map (RF04) from the box's state directory (read, never written) or from
// files, and the secret its credential digests are keyed with, so a replayed
// request meets the same runs and users the appliance's did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/credential_file.h"
#include "control/run_journal.h"
#include "http/http1_policy.h"
#include "limiter/bucket_key.h"
#include "limiter/bucket_table.h"
#include "limiter/decide.h"
#include "limiter/digest_map.h"

namespace sluice::replay {

struct StateSources {
  std::string state_dir;         // a box's --state-dir: credential.secret, credentials, runs.journal
  std::string runs_file;         // lines of "TOKEN [BUDGET]": live runs (added to the journal's)
  std::string credentials_file;  // lines of "HASH USER" (replaces the state directory's map)
};

struct BoxState {
  // Keyed with the state directory's secret; without one, a secret drawn now
  // (credential digests then match no box's).
  std::optional<limiter::KeyHasher> credential_hasher;
  bool secret_from_box = false;
  std::vector<control::LiveRun> runs;
  std::vector<control::CredentialEntry> credentials;
  std::vector<std::string> warnings;  // records skipped, each naming its file and line
};

struct BoxStateLoad {
  BoxState state;
  std::vector<std::string> errors;  // FILE:LINE:COLUMN or FILE: reason; non-empty: not usable
};

[[nodiscard]] BoxStateLoad load_box_state(const StateSources& sources);

// Without a box's secret, a credential's digest label (`credential DIGEST`)
// is keyed with the operator's own secret, DIR/label.secret, drawn on first
// use (0600 in a 0700 DIR, the state directory's rules), so that two reports
// of the same traffic name a credential alike and can be compared by key.
// Never a key built into the program: anyone could then turn a digest back
// into a short credential by trying candidates.
struct LabelSecret {
  std::optional<limiter::KeyHasher> hasher;
  std::string path;
  bool created = false;
  std::string error;  // non-empty: no hasher (the directory or file cannot be used)
};
[[nodiscard]] LabelSecret load_label_secret(const std::string& dir);

// Whether any rule of `policy` keys on a credential (its digest shows in
// the report).
[[nodiscard]] bool keys_credentials(const limiter::CompiledPolicy& policy) noexcept;

// A policy file loaded and compiled with the box's credential hasher.
struct LoadedPolicy {
  std::unique_ptr<http::Http1Policy> policy;
  std::vector<std::string> errors;  // FILE:LINE:COLUMN: message
};
[[nodiscard]] LoadedPolicy load_policy(const std::string& path, const limiter::KeyHasher& credential_hasher);

// One policy's limiter over its own tables, as a freshly started box holds
// them, with the box's runs and users. Deciding charges its tables; two
// policies compared never share one.
class PolicyLimiter {
 public:
  PolicyLimiter(const http::Http1Policy& policy, const BoxState& box, size_t bucket_capacity);
  PolicyLimiter(const PolicyLimiter&) = delete;
  PolicyLimiter& operator=(const PolicyLimiter&) = delete;

  [[nodiscard]] const http::Http1Policy& policy() const noexcept { return policy_; }
  // How many live runs and credentials the box's state gave.
  [[nodiscard]] size_t runs_known() const noexcept { return runs_.size(); }
  [[nodiscard]] size_t users_known() const noexcept { return users_.size(); }
  [[nodiscard]] limiter::LimiterState& state() noexcept { return state_; }
  // A user id's name from the credential map, or "".
  [[nodiscard]] std::string user_name(uint64_t id) const;

 private:
  const http::Http1Policy& policy_;
  limiter::KeyHasher bucket_hasher_;
  limiter::BucketTable buckets_;
  limiter::BucketTable records_;
  limiter::DigestMap runs_;
  limiter::DigestMap users_;
  std::unordered_map<uint64_t, std::string> user_names_;
  limiter::LimiterState state_;
};

}  // namespace sluice::replay
