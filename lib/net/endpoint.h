// Where a service listens, as an operator writes it: HOST:PORT,
// [IPV6]:PORT or unix:/absolute/path. Parsed strictly, once, where it is
// written (the policy loader reports a bad one at its file:line:column), and
// carried as text pieces: resolving a host name is left to whoever connects
// (the control plane's Redis link), never done by the data path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::net {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string unix_path;  // non-empty: a Unix socket, host and port unused

  [[nodiscard]] std::string to_string() const;
  bool operator==(const Endpoint&) const = default;
};

// The endpoint `text` names, or nullopt with `error` saying why.
[[nodiscard]] std::optional<Endpoint> parse_endpoint(std::string_view text, std::string& error);

}  // namespace sluice::net
