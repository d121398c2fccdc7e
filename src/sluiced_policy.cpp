// See sluiced_policy.h.
#include "http/http1_policy.h"
#include "sluiced_policy.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <optional>

#include "policy/policy_loader.h"

namespace sluice::sluiced {

namespace {

// A loaded policy compiled with the daemon's hasher, its service ports set.
LoadedPolicy compiled(policy::LoadResult loaded, const std::string& name, const limiter::KeyHasher& credential_hasher) {
  LoadedPolicy out;
  std::vector<policy::PolicyError> errors = std::move(loaded.errors);
  std::optional<http::Http1Policy> compiled;
  if (loaded.policy) compiled = http::compile_http1_policy(*loaded.policy, credential_hasher, errors);
  if (!errors.empty() || !compiled) {
    for (const auto& e : errors) out.errors.push_back(e.to_string());
    if (out.errors.empty()) out.errors.push_back(name + ": the policy does not compile");
    return out;
  }
  out.snapshot = std::make_unique<dataplane::PolicySnapshot>();
  out.snapshot->policy = std::move(*compiled);
  for (uint16_t p : out.snapshot->policy.source.service_ports) out.snapshot->service_ports.set(p);
  return out;
}

}  // namespace

LoadedPolicy load_policy(const std::string& path, const limiter::KeyHasher& credential_hasher) {
  if (access(path.c_str(), R_OK) != 0) {
    LoadedPolicy out;
    out.errors.push_back(path + ": cannot read the policy file");
    return out;
  }
  return compiled(policy::load_policy_file(path), path, credential_hasher);
}

LoadedPolicy load_policy_text(std::string_view text, const std::string& name,
                              const limiter::KeyHasher& credential_hasher) {
  return compiled(policy::load_policy_text(text, name), name, credential_hasher);
}

std::string digest_hex(uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, digest);
  return buf;
}

std::string port_list(const std::bitset<65536>& ports) {
  std::string s;
  for (size_t p = 1; p < ports.size(); ++p) {
    if (ports.test(p)) s += (s.empty() ? "" : ",") + std::to_string(p);
  }
  return s;
}

}  // namespace sluice::sluiced
