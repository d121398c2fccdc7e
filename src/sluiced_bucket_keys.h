// The bucket key an operator names by its text (a client address, a run
// token, a deployment, a user name, a credential hash), as the rules that
// charge the bucket key their requests: for bucket.show, usage.report and
// penalty.release.
#pragma once

#include <optional>
#include <string>

#include "limiter/compiled_policy.h"
#include "limiter/decide.h"

namespace sluice::sluiced {

// The kind of key the rules charging `b` agree on (nullopt if they key it
// differently, or none charges it). A rule's penalty box is keyed as the rule.
[[nodiscard]] std::optional<policy::KeySpec::Kind> key_kind_of(const limiter::CompiledPolicy& p,
                                                              const limiter::CompiledBucket& b);
// Keys given as text as written (a path parameter, a field, a host).
[[nodiscard]] bool text_keyed(policy::KeySpec::Kind k);
// The key `text` names in `b`, into `out`; "" or the reason it names none.
[[nodiscard]] std::string key_of(const limiter::LimiterState& limiter, const limiter::CompiledPolicy& p,
                                 const limiter::CompiledBucket& b, const std::string& text, limiter::BucketKey& out);

}  // namespace sluice::sluiced
