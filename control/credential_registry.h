// The credential-to-user map (RF04, RF05, RF10): which user a credential
// belongs to, so every credential of one user shares that user's buckets.
// The control plane owns it; the workers read it through the lock-free user
// map (limiter::DigestMap: credential digest -> user id). Only keyed hashes
// are held (`credential hash` computes them with the daemon's secret), never
// a credential.
//
// The whole map is kept in the state directory (`credentials`, the format of
// credential_file.h), rewritten atomically before every change is applied,
// so a restart keeps it and a failed write changes nothing. Every change
// returns once every worker can see it (an RCU grace period).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/credential_file.h"
#include "limiter/bucket_key.h"
#include "limiter/digest_map.h"

namespace sluice::control {

class CredentialRegistry {
 public:
  // `state_dir` empty: the map is not kept across restarts.
  CredentialRegistry(limiter::DigestMap& users, const limiter::KeyHasher& credential_hasher, std::string state_dir,
                     std::function<void()> wait_for_readers);

  // The user id a user name stands for in bucket keys: the same across
  // restarts and reloads, so a user's buckets do not depend on the order of
  // a file.
  [[nodiscard]] static uint64_t user_id(std::string_view user) noexcept;

  // The map kept in the state directory, at start. Errors (file:line:column)
  // leave the map empty.
  [[nodiscard]] std::vector<std::string> restore();

  enum class Failure : uint8_t { kNone, kInvalidFile, kUnsaved, kNotFound, kFull };
  struct Result {
    bool ok = false;
    Failure failure = Failure::kNone;
    std::string message;              // one line
    std::vector<std::string> errors;  // file:line:column, for a refused file
    size_t added = 0, removed = 0, changed = 0;
  };
  // Replaces the whole map with a file's text (validated first; never half
  // applied). `name` is what messages call the file: a client passed it
  // (passed_file.h), the registry never opens a path it is given.
  [[nodiscard]] Result load_text(std::string_view text, const std::string& name);
  [[nodiscard]] Result add(const limiter::Digest& hash, const std::string& user);
  [[nodiscard]] Result remove(const limiter::Digest& hash);
  // From the cluster: the map becomes `entries` (another box
  // loaded a file), or gains them (a catch-up; theirs win where both have a
  // hash). Persisted and applied as a load is; `name` is what messages say.
  [[nodiscard]] Result replace(std::vector<CredentialEntry> entries, const std::string& name);
  [[nodiscard]] Result merge(const std::vector<CredentialEntry>& entries, const std::string& name);
  // What the map holds now (any thread).
  [[nodiscard]] std::vector<CredentialEntry> entries() const;

  // TB05: the hash the file holds for a credential as an authenticator reads it.
  [[nodiscard]] std::optional<limiter::Digest> hash(std::string_view credential) const;

  struct Summary {
    size_t credentials = 0;
    size_t users = 0;
    size_t capacity = 0;
  };
  [[nodiscard]] Summary summary() const;
  // Credentials per user, by user name.
  [[nodiscard]] std::map<std::string, size_t> users() const;

 private:
  [[nodiscard]] std::string persist(const std::vector<CredentialEntry>& entries) const;
  // Makes `entries` the map: persisted, applied, grace period. Caller holds mu_.
  [[nodiscard]] Result apply(std::vector<CredentialEntry> entries);

  limiter::DigestMap& users_;
  const limiter::KeyHasher& hasher_;
  std::string state_dir_;
  std::function<void()> wait_for_readers_;
  mutable std::mutex mu_;
  std::vector<CredentialEntry> entries_;  // what the user map holds
};

}  // namespace sluice::control
