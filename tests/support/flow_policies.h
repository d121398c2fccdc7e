// The policies the flow engine's tests and its fuzz target share. Kept
// apart from flow_harness.h, which needs GoogleTest: the fuzz target is
// built without it (-Dtests=false).
#pragma once

#include <string_view>

namespace sluice::test {

inline constexpr std::string_view kSmallPolicy = R"(sluice: 1
name: small
service_ports: [80]
header_style: seed
after_answer: close
buckets:
  per-ip: { rate: 2/min, burst: 2 }
rules:
  - name: per-ip
    key: client_ip
    bucket: per-ip
refusal:
  status: 429
  body: 'slow down'
)";

// /tight: one request an hour; anything else: plenty. Refusals keep the
// connection open (the default after_answer).
inline constexpr std::string_view kKeepPolicy = R"(sluice: 1
name: keep
service_ports: [80]
header_style: seed
buckets:
  tight: { rate: 1/hour, burst: 1 }
  loose: { rate: 1000/min, burst: 1000 }
rules:
  - name: tight
    path: /tight
    key: client_ip
    bucket: tight
  - name: loose
    key: client_ip
    bucket: loose
refusal:
  status: 429
  body: 'slow down'
)";
inline constexpr std::string_view kTight = "GET /tight HTTP/1.1\r\nHost: api\r\n\r\n";
inline constexpr std::string_view kLoose = "GET /loose HTTP/1.1\r\nHost: api\r\n\r\n";

// Budgets no test reaches: only the mechanism under test ends a connection.
inline constexpr std::string_view kWidePolicy = R"(sluice: 1
name: wide
service_ports: [80]
buckets:
  all: { rate: 1000/min, burst: 1000 }
rules:
  - name: all
    key: client_ip
    bucket: all
)";

}  // namespace sluice::test
