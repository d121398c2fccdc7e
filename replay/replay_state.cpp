// See replay_state.h.
#include "replay/replay_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "control/credential_registry.h"
#include "control/state_dir.h"
#include "policy/policy_loader.h"

namespace sluice::replay {

namespace {

// dir/credential.secret, read only (control::load_secret: the box's own
// rules, and a missing one is an error: replay never draws a box's secret).
std::optional<limiter::KeyHasher> read_secret(const std::string& dir, std::string& error) {
  const control::Secret secret = control::load_secret(dir, "credential.secret");
  if (!secret.error.empty()) {
    error = secret.error;
    return std::nullopt;
  }
  return limiter::KeyHasher(std::span<const uint8_t, limiter::KeyHasher::kSecretSize>(secret.bytes));
}

std::string column_error(const std::string& file, size_t line, size_t column, const std::string& what) {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what;
}

// "TOKEN [BUDGET]" lines; '#' starts a comment line.
void read_runs_file(const std::string& path, std::vector<control::LiveRun>& runs, std::vector<std::string>& errors) {
  std::ifstream in(path);
  if (!in) {
    errors.push_back(path + ": cannot read the runs file: " + std::strerror(errno));
    return;
  }
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    std::istringstream words(line);
    std::string token, budget, extra;
    words >> token >> budget >> extra;
    if (token.empty() || token[0] == '#') continue;
    if (!control::valid_run_token(token)) {
      errors.push_back(column_error(path, n, line.find(token) + 1, "a run token is 1..128 characters of [A-Za-z0-9._~-]"));
      continue;
    }
    control::LiveRun run{token, 0, 0};
    if (!budget.empty()) {
      const auto [end, ec] = std::from_chars(budget.data(), budget.data() + budget.size(), run.budget);
      if (ec != std::errc() || end != budget.data() + budget.size()) {
        errors.push_back(column_error(path, n, line.find(budget, token.size()) + 1,
                                      "a budget is a whole number of requests per minute"));
        continue;
      }
    }
    if (!extra.empty()) {
      errors.push_back(column_error(path, n, line.find(extra, token.size() + budget.size()) + 1,
                                    "a line is TOKEN [BUDGET]"));
      continue;
    }
    runs.push_back(std::move(run));
  }
}

void read_credentials(const std::string& path, BoxState& box, std::vector<std::string>& errors) {
  control::CredentialFile file = control::load_credential_file(path);
  errors.insert(errors.end(), file.errors.begin(), file.errors.end());
  if (file.errors.empty()) box.credentials = std::move(file.entries);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

BoxStateLoad load_box_state(const StateSources& sources) {
  BoxStateLoad out;
  BoxState& box = out.state;
  if (!sources.state_dir.empty()) {
    std::string error;
    box.credential_hasher = read_secret(sources.state_dir, error);
    if (!error.empty()) out.errors.push_back(error);
    box.secret_from_box = box.credential_hasher.has_value();
    control::RunJournal::Replay journal = control::RunJournal::read(sources.state_dir);
    if (!journal.error.empty()) out.errors.push_back(journal.error);
    box.runs = std::move(journal.live);
    box.warnings = std::move(journal.warnings);
    const std::string credentials = sources.state_dir + "/credentials";
    if (sources.credentials_file.empty() && exists(credentials)) read_credentials(credentials, box, out.errors);
  } else if (!sources.credentials_file.empty()) {
    out.errors.push_back("--credentials " + sources.credentials_file +
                         ": its hashes are keyed with a box's secret; give that box's --state-dir too");
  }
  if (!sources.credentials_file.empty()) read_credentials(sources.credentials_file, box, out.errors);
  if (!sources.runs_file.empty()) read_runs_file(sources.runs_file, box.runs, out.errors);
  if (!box.credential_hasher) box.credential_hasher.emplace(limiter::KeyHasher::random());
  return out;
}

LabelSecret load_label_secret(const std::string& dir) {
  LabelSecret out;
  if (dir.empty()) {
    out.error = "no directory for the label secret (neither XDG_STATE_HOME nor HOME is set; give --label-dir)";
    return out;
  }
  if (std::string e = control::prepare_state_dir(dir); !e.empty()) {
    out.error = std::move(e);
    return out;
  }
  const control::Secret secret = control::load_or_create_secret(dir, "label.secret");
  if (!secret.error.empty()) {
    out.error = secret.error;
    return out;
  }
  out.hasher.emplace(std::span<const uint8_t, limiter::KeyHasher::kSecretSize>(secret.bytes));
  out.path = dir + "/label.secret";
  out.created = secret.created;
  return out;
}

bool keys_credentials(const limiter::CompiledPolicy& policy) noexcept {
  return std::any_of(policy.rules.begin(), policy.rules.end(), [](const limiter::CompiledRule& r) {
    return r.key_kind == policy::KeySpec::Kind::kCredential;
  });
}

LoadedPolicy load_policy(const std::string& path, const limiter::KeyHasher& credential_hasher) {
  LoadedPolicy out;
  if (::access(path.c_str(), R_OK) != 0) {
    out.errors.push_back(path + ": cannot read the policy file: " + std::strerror(errno));
    return out;
  }
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    out.errors.push_back(path + ": the policy is not a regular file");
    return out;
  }
  policy::LoadResult loaded = policy::load_policy_file(path);
  std::vector<policy::PolicyError> errors = std::move(loaded.errors);
  std::optional<http::Http1Policy> compiled;
  if (loaded.policy) compiled = http::compile_http1_policy(*loaded.policy, credential_hasher, errors);
  for (const auto& e : errors) out.errors.push_back(e.to_string());
  if (!errors.empty() || !compiled) {
    if (out.errors.empty()) out.errors.push_back(path + ": the policy does not compile");
    return out;
  }
  out.policy = std::make_unique<http::Http1Policy>(std::move(*compiled));
  return out;
}

namespace {

// Words of a TB07 credential record: the policy's slots and a header, even
// (as sluiced sizes them).
unsigned record_words(const http::Http1Policy& p) { return std::max(2u, (p.max_slots + 1) & ~1u); }

}  // namespace

PolicyLimiter::PolicyLimiter(const http::Http1Policy& policy, const BoxState& box, size_t bucket_capacity)
    : policy_(policy),
      bucket_hasher_(limiter::KeyHasher::random()),
      buckets_({.capacity = bucket_capacity,
                .bucket_kinds = static_cast<uint16_t>(std::max<size_t>(policy.buckets.size(), 1))}),
      records_({.capacity = std::max<size_t>(bucket_capacity / 16, 4096),
                .bucket_kinds = 1,
                .words = record_words(policy)}),
      runs_(std::max<size_t>(box.runs.size() * 2, 16)),
      users_(std::max<size_t>(box.credentials.size() * 2, 16)),
      state_{buckets_, records_, runs_, users_, bucket_hasher_, *box.credential_hasher, nullptr} {
  const limiter::KeyHasher& h = *box.credential_hasher;
  for (const control::LiveRun& run : box.runs) {
    const limiter::Digest d =
        h.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(run.token.data()), run.token.size()));
    (void)runs_.put(d, run.budget);
  }
  for (const control::CredentialEntry& e : box.credentials) {
    const uint64_t id = control::CredentialRegistry::user_id(e.user);
    (void)users_.put(e.hash, id);
    user_names_.emplace(id, e.user);
  }
}

std::string PolicyLimiter::user_name(uint64_t id) const {
  const auto it = user_names_.find(id);
  return it == user_names_.end() ? std::string() : it->second;
}

}  // namespace sluice::replay
