// See credential_registry.h. Every change builds the next whole map, writes
// it to the state directory, then applies the difference to the user map
// and waits out a grace period before erased slots may be reused.
#include "control/credential_registry.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <set>
#include <utility>
#include <span>

#include "control/state_dir.h"
#include "limiter/credential.h"

namespace sluice::control {

namespace {

constexpr const char* kFileName = "credentials";

bool digest_less(const limiter::Digest& a, const limiter::Digest& b) noexcept {
  return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
}

}  // namespace

CredentialRegistry::CredentialRegistry(limiter::DigestMap& users, const limiter::KeyHasher& credential_hasher,
                                       std::string state_dir, std::function<void()> wait_for_readers)
    : users_(users),
      hasher_(credential_hasher),
      state_dir_(std::move(state_dir)),
      wait_for_readers_(std::move(wait_for_readers)) {}

uint64_t CredentialRegistry::user_id(std::string_view user) noexcept {
  return XXH3_64bits_withSeed(user.data(), user.size(), 0x736c756963652d75ull);  // "sluice-u"
}

std::vector<std::string> CredentialRegistry::restore() {
  if (state_dir_.empty()) return {};
  const std::string path = state_dir_ + "/" + kFileName;
  if (access(path.c_str(), F_OK) != 0) return {};
  CredentialFile file = load_credential_file(path);
  if (!file.errors.empty()) return file.errors;
  std::lock_guard lock(mu_);
  // Already on disk: apply without writing it back.
  const std::string keep = std::exchange(state_dir_, std::string());
  Result r = apply(std::move(file.entries));
  state_dir_ = keep;
  if (!r.ok) return {path + ": " + r.message};
  return {};
}

std::string CredentialRegistry::persist(const std::vector<CredentialEntry>& entries) const {
  if (state_dir_.empty()) return {};
  return write_file_atomically(state_dir_, kFileName, format_credential_file(entries));
}

CredentialRegistry::Result CredentialRegistry::apply(std::vector<CredentialEntry> entries) {
  Result r;
  if (entries.size() > users_.capacity()) {
    r.failure = Failure::kFull;
    r.message = std::to_string(entries.size()) + " credentials do not fit the user map (room for " +
                std::to_string(users_.capacity()) + "); nothing changed";
    return r;
  }
  if (const std::string err = persist(entries); !err.empty()) {
    r.failure = Failure::kUnsaved;
    r.message = "the credentials could not be saved (" + err + "); nothing changed";
    return r;
  }
  std::map<limiter::Digest, const std::string*, bool (*)(const limiter::Digest&, const limiter::Digest&)> before(
      digest_less);
  for (const CredentialEntry& e : entries_) before[e.hash] = &e.user;
  std::set<limiter::Digest, bool (*)(const limiter::Digest&, const limiter::Digest&)> kept(digest_less);
  // Removals first, so a full map never refuses a file that fits.
  for (const CredentialEntry& e : entries) kept.insert(e.hash);
  for (const CredentialEntry& e : entries_) {
    if (!kept.contains(e.hash)) {
      (void)users_.erase(e.hash);
      ++r.removed;
    }
  }
  const uint64_t grace = users_.begin_grace();
  wait_for_readers_();
  users_.end_grace(grace);
  for (const CredentialEntry& e : entries) {
    const auto it = before.find(e.hash);
    if (it != before.end() && *it->second == e.user) continue;
    if (users_.put(e.hash, user_id(e.user)) == limiter::DigestMap::Put::kFull) {
      r.failure = Failure::kFull;
      r.message = "the user map is full (a probe sequence overflowed); the map is partly applied: reload it";
      return r;
    }
    ++(it == before.end() ? r.added : r.changed);
  }
  wait_for_readers_();
  entries_ = std::move(entries);
  r.ok = true;
  return r;
}

CredentialRegistry::Result CredentialRegistry::load_text(std::string_view text, const std::string& name) {
  CredentialFile file = text.size() > kMaxCredentialFileBytes
                            ? CredentialFile{{}, {name + ": larger than " + std::to_string(kMaxCredentialFileBytes >> 20) + " MiB"}}
                            : parse_credential_file(text, name);
  if (!file.errors.empty()) {
    Result r;
    r.failure = Failure::kInvalidFile;
    r.message = name + " was not loaded; the credentials are unchanged";
    r.errors = std::move(file.errors);
    return r;
  }
  std::lock_guard lock(mu_);
  Result r = apply(std::move(file.entries));
  if (r.ok) {
    r.message = name + ": " + std::to_string(entries_.size()) + " credentials (" + std::to_string(r.added) +
                " added, " + std::to_string(r.removed) + " removed, " + std::to_string(r.changed) +
                " moved to another user)";
  }
  return r;
}

CredentialRegistry::Result CredentialRegistry::add(const limiter::Digest& hash, const std::string& user) {
  std::lock_guard lock(mu_);
  std::vector<CredentialEntry> next = entries_;
  bool found = false;
  for (CredentialEntry& e : next) {
    if (e.hash == hash) {
      found = true;
      if (e.user == user) {
        Result r;
        r.ok = true;
        r.message = "credential " + digest_hex(hash) + " already belongs to " + user;
        return r;
      }
      e.user = user;
    }
  }
  if (!found) next.push_back({hash, user});
  Result r = apply(std::move(next));
  if (r.ok) r.message = "credential " + digest_hex(hash) + (found ? " now belongs to " : " added for ") + user;
  return r;
}

CredentialRegistry::Result CredentialRegistry::remove(const limiter::Digest& hash) {
  std::lock_guard lock(mu_);
  std::vector<CredentialEntry> next = entries_;
  const auto it = std::find_if(next.begin(), next.end(), [&](const CredentialEntry& e) { return e.hash == hash; });
  if (it == next.end()) {
    Result r;
    r.failure = Failure::kNotFound;
    r.message = "no credential " + digest_hex(hash) + " is loaded";
    return r;
  }
  const std::string user = it->user;
  next.erase(it);
  Result r = apply(std::move(next));
  if (r.ok) r.message = "credential " + digest_hex(hash) + " of " + user + " removed";
  return r;
}

CredentialRegistry::Result CredentialRegistry::replace(std::vector<CredentialEntry> entries, const std::string& name) {
  std::lock_guard lock(mu_);
  Result r = apply(std::move(entries));
  if (r.ok) {
    r.message = name + ": " + std::to_string(entries_.size()) + " credentials (" + std::to_string(r.added) +
                " added, " + std::to_string(r.removed) + " removed, " + std::to_string(r.changed) +
                " moved to another user)";
  }
  return r;
}

CredentialRegistry::Result CredentialRegistry::merge(const std::vector<CredentialEntry>& entries,
                                                     const std::string& name) {
  std::lock_guard lock(mu_);
  std::map<limiter::Digest, std::string, bool (*)(const limiter::Digest&, const limiter::Digest&)> all(digest_less);
  for (const CredentialEntry& e : entries_) all[e.hash] = e.user;
  for (const CredentialEntry& e : entries) all[e.hash] = e.user;
  std::vector<CredentialEntry> next;
  next.reserve(all.size());
  for (auto& [hash, user] : all) next.push_back({hash, std::move(user)});
  Result r = apply(std::move(next));
  if (r.ok) r.message = name + ": " + std::to_string(r.added) + " added, " + std::to_string(r.changed) + " moved";
  return r;
}

std::vector<CredentialEntry> CredentialRegistry::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

std::optional<limiter::Digest> CredentialRegistry::hash(std::string_view credential) const {
  std::string buf(credential.size() + 1, '\0');
  const std::string_view norm = limiter::normalize_credential(credential, std::span<char>(buf.data(), buf.size()));
  if (norm.empty()) return std::nullopt;
  return hasher_.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(norm.data()), norm.size()));
}

CredentialRegistry::Summary CredentialRegistry::summary() const {
  std::lock_guard lock(mu_);
  std::set<std::string_view> names;
  for (const CredentialEntry& e : entries_) names.insert(e.user);
  return {entries_.size(), names.size(), users_.capacity()};
}

std::map<std::string, size_t> CredentialRegistry::users() const {
  std::lock_guard lock(mu_);
  std::map<std::string, size_t> out;
  for (const CredentialEntry& e : entries_) ++out[e.user];
  return out;
}

}  // namespace sluice::control
