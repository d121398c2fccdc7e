// The frames perf/packet_rate puts on its ring ports: the addresses, the
// built-in policy, the requests and responses, and how a TCP segment of a
// client-origin connection is written. Shared by the one-worker scenarios
// (packet_rate.cpp) and the multi-worker one (packet_rate_workers.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "dataplane/checksum.h"
#include "dataplane/frame.h"
#include "dataplane/segment_writer.h"
#include "net/ip_address.h"

namespace sluice::perf {

using dataplane::Side;
namespace tcp_flag = dataplane::tcp_flag;

// What goes on the wire.

inline constexpr uint16_t kServicePort = 80;
inline constexpr uint32_t kAddresses = 1024;        // client addresses; flows spread over them
inline constexpr uint32_t kAdmitNet = 0xc6120000;   // 198.18.0.0: clients of admitted flows
inline constexpr uint32_t kRefuseNet = 0xc6128000;  // 198.18.128.0: clients of refused flows
inline constexpr uint32_t kSynNet = 0xc6130000;     // 198.19.0.0: clients of the SYN cookie scenario
inline constexpr uint32_t kFieldsNet = 0xc6124000;  // 198.18.64.0 and 198.18.80.0: the fields scenario's two sets
inline constexpr uint32_t kOriginIp = 0xc6130050;   // 198.19.0.80
inline constexpr uint16_t kFirstClientPort = 1024;  // flow f uses port 1024 + f / kAddresses
inline constexpr uint16_t kWarmupPort = 1023;       // the flows that spend the refused addresses' budget

// A budget nobody reaches for GET /v1/models; one request an hour per client
// address for GET /v1/limits, spent before the refused scenario is timed. The
// head limit is the smallest the loader takes, because every refused flow
// keeps its parse context (and its buffers) until it expires (see the report).
inline constexpr std::string_view kPolicy = R"(sluice: 1
name: packet-rate
service_ports: [80]
syn_proxy: off
header_style: ietf
after_answer: close
limits:
  max_head_bytes: 1024
  max_fields: 32
buckets:
  open: { rate: 1000000000/s, burst: 1000000000 }
  shut: { rate: 1/hour, burst: 1 }
rules:
  - name: limited
    path: /v1/limits
    key: client_ip
    bucket: shut
  - name: per-client
    key: client_ip
    bucket: open
refusal:
  status: 429
  headers:
    Content-Type: application/json
  body: '{"error":{"code":"rate_limited","message":"Too many requests. Retry after the number of seconds in Retry-After."}}'
)";

// 87 bytes each, like perf/parser_bench's curl GET.
inline constexpr std::string_view kAdmitHead =
    "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
inline constexpr std::string_view kRefuseHead =
    "GET /v1/limits HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
// A small API response as a typical origin sends it: 149 bytes, 132 of head.
inline constexpr std::string_view kResponse =
    "HTTP/1.1 200 OK\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\nContent-Type: application/json\r\n"
    "Content-Length: 17\r\nConnection: keep-alive\r\n\r\n{\"object\":\"list\"}";

inline constexpr uint8_t kClientMac[6] = {0x02, 0, 0, 0, 0, 0x10};
inline constexpr uint8_t kOriginMac[6] = {0x02, 0, 0, 0, 0, 0x20};

struct L2 {
  uint8_t to_origin[14];
  uint8_t to_client[14];
  L2() {
    std::memcpy(to_origin, kOriginMac, 6);
    std::memcpy(to_origin + 6, kClientMac, 6);
    std::memcpy(to_client, kClientMac, 6);
    std::memcpy(to_client + 6, kOriginMac, 6);
    to_origin[12] = to_client[12] = 0x08;
    to_origin[13] = to_client[13] = 0x00;
  }
};
inline const L2 kL2;

[[noreturn]] inline void die(const std::string& msg) {
  std::fprintf(stderr, "packet_rate: %s\n", msg.c_str());
  std::exit(1);
}

// One TCP segment of a client-origin connection.
struct Tcp {
  Side from = Side::kClient;
  uint32_t client_ip = 0;
  uint16_t client_port = 0;
  uint16_t origin_port = kServicePort;
  uint32_t seq = 0, ack = 0;
  uint8_t flags = 0;
  std::string_view payload;
};

inline size_t write_tcp(uint8_t* out, size_t room, const Tcp& t) {
  const bool c = t.from == Side::kClient;
  const net::IpAddress client = net::IpAddress::v4(t.client_ip), origin = net::IpAddress::v4(kOriginIp);
  dataplane::SegmentSpec s;
  s.l2 = c ? std::span<const uint8_t>(kL2.to_origin) : std::span<const uint8_t>(kL2.to_client);
  s.ip_version = 4;
  s.src = c ? client : origin;
  s.dst = c ? origin : client;
  s.sport = c ? t.client_port : t.origin_port;
  s.dport = c ? t.origin_port : t.client_port;
  s.seq = t.seq;
  s.ack = (t.flags & tcp_flag::kAck) ? t.ack : 0;
  s.flags = t.flags;
  s.window = 502;
  s.timestamp = true;  // as Linux clients and servers send them
  s.tsval = c ? 1'000'000 : 2'000'000;
  s.tsecr = c ? 2'000'000 : 1'000'000;
  s.ip_id = static_cast<uint16_t>(t.seq);
  s.payload = {reinterpret_cast<const uint8_t*>(t.payload.data()), t.payload.size()};
  const size_t len = dataplane::write_segment({out, room}, s);
  if (len == 0) die("a frame does not fit its buffer");
  return len;
}

// Flow f of a scenario: address, port, initial sequence numbers.
struct FlowId {
  uint32_t client_ip;
  uint16_t client_port;
  uint32_t client_isn;
  uint32_t origin_isn;
};

inline FlowId flow_id(uint32_t net, uint64_t f, uint32_t epoch) {
  return FlowId{net + static_cast<uint32_t>(f % kAddresses), static_cast<uint16_t>(kFirstClientPort + f / kAddresses),
                static_cast<uint32_t>(0x10000000u + f * 7919u + epoch * 0x01000193u),
                static_cast<uint32_t>(0x50000000u + f * 104729u + epoch * 0x0100019du)};
}

// A flow's handshake as both ends send it.
struct Handshake {
  Tcp syn, syn_ack, ack;
};

inline Handshake handshake_of(const FlowId& i) {
  return {Tcp{Side::kClient, i.client_ip, i.client_port, kServicePort, i.client_isn, 0, tcp_flag::kSyn, ""},
          Tcp{Side::kOrigin, i.client_ip, i.client_port, kServicePort, i.origin_isn, i.client_isn + 1,
              tcp_flag::kSyn | tcp_flag::kAck, ""},
          Tcp{Side::kClient, i.client_ip, i.client_port, kServicePort, i.client_isn + 1, i.origin_isn + 1,
              tcp_flag::kAck, ""}};
}

// Request k of the admitted pattern on `flows` flows of `net` (flow k %
// flows, the round-th request on it) and the origin's response to it. The
// request acknowledges the origin's stream up to its last response plus
// `ack_extra_per_round` for every earlier response (bytes the client saw
// inserted, in its own numbers).
struct Exchange {
  Tcp request, response;
};

inline Exchange admitted_exchange(uint32_t net, size_t flows, uint64_t k, uint32_t ack_extra_per_round = 0) {
  const auto q = static_cast<uint32_t>(kAdmitHead.size()), a = static_cast<uint32_t>(kResponse.size());
  const FlowId id = flow_id(net, k % flows, 0);
  const auto round = static_cast<uint32_t>(k / flows);
  const uint32_t cseq = id.client_isn + 1 + round * q, oseq = id.origin_isn + 1 + round * a;
  return {Tcp{Side::kClient, id.client_ip, id.client_port, kServicePort, cseq, oseq + round * ack_extra_per_round,
              tcp_flag::kAck | tcp_flag::kPsh, kAdmitHead},
          Tcp{Side::kOrigin, id.client_ip, id.client_port, kServicePort, oseq, cseq + q, tcp_flag::kAck | tcp_flag::kPsh,
              kResponse}};
}

}  // namespace sluice::perf
