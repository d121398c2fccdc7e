// See endpoint.h.
#include "net/endpoint.h"

#include <charconv>

namespace sluice::net {

std::string Endpoint::to_string() const {
  if (!unix_path.empty()) return "unix:" + unix_path;
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<Endpoint> parse_endpoint(std::string_view text, std::string& error) {
  Endpoint e;
  if (text.starts_with("unix:")) {
    e.unix_path = std::string(text.substr(5));
    if (e.unix_path.empty() || e.unix_path.front() != '/') {
      error = "a Unix socket endpoint is unix:/absolute/path";
      return std::nullopt;
    }
    return e;
  }
  std::string_view host, port;
  if (text.starts_with("[")) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      error = "an IPv6 endpoint is [ADDRESS]:PORT";
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      error = "an endpoint is HOST:PORT, [IPV6]:PORT or unix:/path";
      return std::nullopt;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (host.empty() || port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    error = "an endpoint needs a host and a port from 1 to 65535";
    return std::nullopt;
  }
  e.host = std::string(host);
  e.port = static_cast<uint16_t>(value);
  return e;
}

}  // namespace sluice::net
