// See client_ip.h.
#include "limiter/client_ip.h"

namespace sluice::limiter {

namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One element of a comma-separated list: the first or the last.
std::string_view hop(std::string_view list, policy::ClientIpSpec::Hop which) noexcept {
  if (which == policy::ClientIpSpec::Hop::kFirst) return trim(list.substr(0, list.find(',')));
  const size_t comma = list.rfind(',');
  return trim(comma == std::string_view::npos ? list : list.substr(comma + 1));
}

}  // namespace

bool trusted_proxy(const policy::ClientIpSpec& spec, const net::IpAddress& peer) noexcept {
  for (const net::IpNetwork& n : spec.trusted_proxies) {
    if (n.contains(peer)) return true;
  }
  return false;
}

net::IpAddress resolve_client_ip(const ClientIpRule& rule, const FieldValues& fields,
                                 const net::IpAddress& peer) noexcept {
  const policy::ClientIpSpec& spec = rule.spec;
  net::IpAddress chosen = peer;
  if (!rule.fields.empty() && trusted_proxy(spec, peer)) {
    std::optional<net::IpAddress> first_v4, first_any;
    for (FieldId id : rule.fields) {
      if (!fields.has(id)) continue;
      const auto a = net::parse_ip(hop(fields.value(id), spec.hop));
      if (!a) continue;
      if (!first_any) first_any = a;
      if (a->is_v4() && !first_v4) first_v4 = a;
      if (!spec.prefer_ipv4) break;
    }
    if (spec.prefer_ipv4 && first_v4) chosen = *first_v4;
    else if (first_any) chosen = *first_any;
  }
  return chosen.is_v4() ? chosen : chosen.prefix(spec.ipv6_prefix);
}

}  // namespace sluice::limiter
