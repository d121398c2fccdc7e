// TB05: a credential identified the way an authenticator identifies it, so
// respelling the header buys no second budget: the scheme is
// case-insensitive, whitespace around the parts is ignored, the token is
// kept exactly. Only a keyed digest of the result is ever kept.
#pragma once

#include <span>
#include <string_view>

namespace sluice::limiter {

// Writes the canonical form of an Authorization-style value into `out`
// ("bearer <token>", or the value trimmed if it has no scheme) and returns
// it; empty if the value is empty or does not fit.
[[nodiscard]] std::string_view normalize_credential(std::string_view value, std::span<char> out) noexcept;

}  // namespace sluice::limiter
