// A policy as the HTTP/1 front end runs it: the limiter's compiled form
// (limiter/compiled_policy.h, which speaks no protocol), and what the HTTP/1
// side reads of the policy besides: the names of the fields its parser
// records, under the ids the compiled rules read them by, and the request
// stream's limits and switches. Built once per policy load; immutable while
// published.
#pragma once

#include <optional>
#include <vector>

#include "http/field_set.h"
#include "http/request_stream.h"
#include "limiter/compiled_policy.h"

namespace sluice::http {

struct Http1Policy : limiter::CompiledPolicy {
  FieldSet fields;
  StreamConfig stream;
};

// Compiles `p` for the HTTP/1 front end (limiter::compile_policy, with this
// side's field names); nullopt, with `errors` grown, when it cannot be.
[[nodiscard]] std::optional<Http1Policy> compile_http1_policy(const policy::Policy& p,
                                                              const limiter::KeyHasher& credential_hasher,
                                                              std::vector<policy::PolicyError>& errors);

}  // namespace sluice::http
