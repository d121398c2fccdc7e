// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and
// 2) a load balancer puts at the start of a TCP stream to tell the server
// whom it relays: read from the first bytes of a client's stream, without
// copying or allocating. Only what a TCP service needs is taken: a TCP
// over IPv4 or IPv6 source address and port, or a LOCAL (v2) / UNKNOWN
// (v1) header, which names nobody (the balancer's own health checks).
//
// Strict, because what it yields picks whose budget a request is charged
// to: v1 exactly as the spec writes it (single spaces, addresses of the
// stated family in their plain form, ports without leading zeros, CRLF
// within 107 bytes); v2 with the signature, version 2, a known command,
// and a length that holds the address block. Anything else is kMalformed,
// never a guess.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "net/ip_address.h"

namespace sluice::net {

struct ProxyHeader {
  enum class Status : uint8_t {
    kNone,        // the bytes do not begin a PROXY header
    kIncomplete,  // they begin one that goes on past them
    kMalformed,   // a PROXY signature, then bytes the protocol does not allow
    kRelayed,     // a header naming the client: `source`, `source_port`
    kLocal,       // a header naming nobody (v2 LOCAL, v1 UNKNOWN): the connection's own address stands
  };
  Status status = Status::kNone;
  uint8_t version = 0;  // 1 or 2, once recognised
  uint32_t length = 0;  // kRelayed, kLocal: the header's bytes, from the first
  IpAddress source{};
  uint16_t source_port = 0;
};

// The longest header read: v1's 107 bytes, or v2's 16 and what its length
// says (load balancers' TLVs: TLS facts, a VPC endpoint's id); longer is
// kMalformed.
inline constexpr size_t kMaxProxyHeader = 1024;

[[nodiscard]] ProxyHeader read_proxy_header(std::span<const char> bytes) noexcept;

}  // namespace sluice::net
