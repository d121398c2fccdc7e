// Which client RSTs end a tracked connection (RFC 5961 3.2, blind reset
// attacks). A RST ends a connection only at the exact sequence number the
// receiver expects next; one elsewhere in the window gets a challenge ACK
// (which a real peer answers with a RST at the number it carries) and is
// dropped; one outside the window is dropped. Either way the flow is
// untouched: a RST the appliance believed but the origin did not would
// leave the origin's connection open while the appliance stopped judging it.
//
// Where the client's stream stands is the appliance's view: `client.next`
// (every byte before it was judged; before the handshake is complete, the
// client's ISN + 1), or what the origin last acknowledged, mapped to the
// client's numbers (a RST the origin's own stack would take). The window is
// an upper estimate of the one the client was offered: a larger estimate
// only sends a challenge ACK where an exact one would drop the RST silently.
//
// Touches nothing: a pure judgement on a flow.
#pragma once

#include <cstdint>

#include "tcp_flow.h"

namespace sluice::dataplane {

enum class RstVerdict : uint8_t {
  kExact,        // at the expected number: the connection ends
  kInWindow,     // elsewhere in the window: a challenge ACK, dropped
  kOutOfWindow,  // dropped
};

// `origin_acked`: the origin's latest acknowledgement in the client's
// numbers, or `client.next` when there is none.
[[nodiscard]] RstVerdict judge_client_rst(const TcpFlow& flow, uint32_t seq, uint32_t origin_acked) noexcept;

// The window the client may send into, in bytes, as estimated above.
[[nodiscard]] uint32_t client_send_window(const TcpFlow& flow) noexcept;

}  // namespace sluice::dataplane
