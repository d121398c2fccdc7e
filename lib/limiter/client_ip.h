// Who the client is, for keys by client address: the connection's source, or
// an address a trusted proxy reported in a header (TB10, RF06, X04), cut to
// the configured IPv6 prefix (X03).
#pragma once

#include <span>

#include "limiter/request.h"
#include "net/ip_address.h"
#include "policy/policy.h"

namespace sluice::limiter {

struct ClientIpRule {
  policy::ClientIpSpec spec;
  std::vector<FieldId> fields;  // the spec's headers, as tracked field ids
};

// Whether `peer` is one of the spec's trusted proxies (X04; the PROXY
// protocol's balancers).
[[nodiscard]] bool trusted_proxy(const policy::ClientIpSpec& spec, const net::IpAddress& peer) noexcept;

// The client's address for keying. Headers are read only when `peer` is a
// trusted proxy; an unparsable or missing value falls through to the next
// header and finally to `peer`.
[[nodiscard]] net::IpAddress resolve_client_ip(const ClientIpRule& rule, const FieldValues& fields,
                                               const net::IpAddress& peer) noexcept;

}  // namespace sluice::limiter
