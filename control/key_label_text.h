// The operator's name for what a request was counted by (limiter::KeyLabel):
// an address, "user NAME", "credential DIGEST", a header's or parameter's
// text (its first 32 bytes, control bytes shown as '?'). What sluicectl's
// busiest keys, the refusal log and sluice-replay's reports show, so a key
// reads the same wherever it appears.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "limiter/decide.h"

namespace sluice::control {

// A user id's name, or "" when the credential map has none for it.
using UserNamer = std::function<std::string(uint64_t user_id)>;

[[nodiscard]] std::string key_label_text(const limiter::KeyLabel& label, const UserNamer& user_name);

}  // namespace sluice::control
