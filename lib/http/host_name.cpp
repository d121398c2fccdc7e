// See host_name.h.
#include "http/host_name.h"

namespace sluice::http {

uint16_t default_port(const RequestHead& head) noexcept {
  // An absolute-form target begins "http://" or "https://" (request_line.cpp);
  // a CONNECT target is an authority and has no scheme.
  if (head.method_kind == Method::kConnect || head.authority.empty()) return 80;
  return head.target.size() > 4 && (head.target[4] | 0x20) == 's' ? 443 : 80;
}

}  // namespace sluice::http
