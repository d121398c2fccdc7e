// Reading a policy file the way sluiced runs it: loaded, compiled with the
// daemon's credential hasher, its service ports set; and the two ways the
// daemon prints a policy's identity (digest, port list).
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/policy_snapshot.h"
#include "limiter/bucket_key.h"

namespace sluice::sluiced {

struct LoadedPolicy {
  std::unique_ptr<dataplane::PolicySnapshot> snapshot;
  std::vector<std::string> errors;  // file:line:column: message, when there is no snapshot
};

// sluiced's own --config file (its operator's path).
[[nodiscard]] LoadedPolicy load_policy(const std::string& path, const limiter::KeyHasher& credential_hasher);
// A policy's text, as a control client passed it; `name` is what its
// errors call it.
[[nodiscard]] LoadedPolicy load_policy_text(std::string_view text, const std::string& name,
                                            const limiter::KeyHasher& credential_hasher);

[[nodiscard]] std::string digest_hex(uint64_t digest);
// "80,8080"
[[nodiscard]] std::string port_list(const std::bitset<65536>& ports);

}  // namespace sluice::sluiced
