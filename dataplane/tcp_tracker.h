// The TCP tracker: a worker's flows and where each is in its life. It opens a
// flow on the client's SYN (only flows whose handshake it saw both ways are
// parsed), notes each end's latest timestamps, window and acknowledgement,
// marks FINs and resets, and expires idle flows a few slots per loop pass.
//
// Choices a reader should know:
// - A SYN on a live connection changes nothing (the origin answers it with a
//   challenge ACK and keeps the connection, RFC 5961 4.2); starting over
//   would let one stray SYN take a connection out of the limiter.
// - Timestamps only move forward: a late, older segment must not make the
//   appliance's own segments fail the peer's PAWS check (RFC 7323 5.3).
// - A full flow table takes no new flow (fail closed: an untracked
//   connection would never be limited); the engine may make room first by
//   evicting one (eviction.h) and try again.
//
// Owns: the FlowTable. Touches: a flow's TCP state (state, ISNs, MSSs,
// timestamps, window, FINs, last_seen, L2 headers); gives a flow's context
// back when the flow closes or expires.
#pragma once

#include <cstddef>
#include <cstdint>

#include "client_shares.h"
#include "context_lender.h"
#include "flow_table.h"
#include "frame.h"
#include "service_frame.h"
#include "worker_counters.h"

namespace sluice::dataplane {

class TcpTracker {
 public:
  // On `memory` if it has slots, else on a table of its own for `flows`.
  TcpTracker(size_t flows, FlowSlots memory, const FlowTimeouts& timeouts, ContextLender& lender,
             ClientShares& shares, WorkerCounters& counters);

  [[nodiscard]] TcpFlow* find(const FlowKey& key, uint64_t hash) noexcept { return flows_.find(key, hash); }
  void prefetch(uint64_t hash) const noexcept { flows_.prefetch(hash); }
  [[nodiscard]] const FlowTable& flows() const noexcept { return flows_; }

  // A client's SYN (without ACK) to a service port, `flow` its flow if one
  // is tracked. Anything but kTracked: drop it.
  enum class SynOutcome : uint8_t {
    kTracked,    // a new flow, or one the SYN changes nothing on
    kTableFull,  // no slot free: the caller may make room and try again
    kShareFull,  // the client holds its share of flows (counted)
  };
  [[nodiscard]] SynOutcome client_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                                      time::Nanos now) noexcept;
  // Any other segment of a tracked flow from the client.
  void client_seen(TcpFlow& flow, const FrameView& v, time::Nanos now) noexcept {
    flow.last_seen = now;
    if (v.options.has_timestamp && seq_lt(flow.client.tsval, v.options.tsval)) flow.client.tsval = v.options.tsval;
  }
  // True when `v` is the client's ACK of the origin's SYN-ACK on a flow in
  // kSynReceived: the flow is established and its payload parsed from here.
  [[nodiscard]] bool established_by(TcpFlow& flow, const FrameView& v) noexcept;
  // The origin's SYN-ACK (or a stray SYN) on a tracked flow.
  void origin_syn(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now) noexcept;
  // Any other segment of a tracked flow from the origin.
  void origin_seen(TcpFlow& flow, const FrameView& v, time::Nanos now) noexcept {
    flow.last_seen = now;
    if (v.options.has_timestamp && seq_lt(flow.origin.tsval, v.options.tsval)) flow.origin.tsval = v.options.tsval;
    // Not from a late, older segment; as the client reads it.
    if (!seq_lt(v.seq, flow.origin.next)) flow.origin.window = rescale_window(v.window, flow.proxy.window_to_client_shift);
    if (v.has(tcp_flag::kAck) && seq_lt(flow.origin.ack, v.ack)) flow.origin.ack = v.ack;
  }
  // A new, blank flow for `sf` (which must not be tracked) counted in its
  // client's share: kTracked, or why there is none.
  [[nodiscard]] TcpFlow* insert(const ServiceFrame& sf, SynOutcome& outcome) noexcept;
  // A flow the last process left (flow_carry.h; its key not tracked), under
  // this process's `hash`, in its client's share again. Its borrowed buffers are not
  // carried: the caller lends what it needs anew.
  [[nodiscard]] TcpFlow* resume(const TcpFlow& carried, uint64_t hash, SynOutcome& outcome) noexcept;
  // Forgets `flow` at once (its slot is needed): context and share given
  // back. Pointers to other flows may move.
  void erase(TcpFlow& flow) noexcept;
  [[nodiscard]] FlowTable& table() noexcept { return flows_; }
  // A RST either way: closed, kept briefly for stragglers.
  void reset(TcpFlow& flow) noexcept;
  // A FIN from either end went through; both: closed.
  void client_fin(TcpFlow& flow) noexcept;
  void origin_fin(TcpFlow& flow) noexcept;

  // Expires idle flows, looking at up to `slots` slots; `on_expire(flow)`
  // sees each before it goes, `on_live(flow)` each flow that stays.
  template <typename OnExpire, typename OnLive>
  void sweep(time::Nanos now, size_t slots, OnExpire&& on_expire, OnLive&& on_live) noexcept {
    flows_.sweep(
        now, timeouts_, slots,
        [&](TcpFlow& f) {
          on_expire(f);
          expire(f);
        },
        on_live);
  }

 private:
  void start_flow(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept;
  void close_if_finished(TcpFlow& flow) noexcept;
  void expire(TcpFlow& flow) noexcept;

  FlowTable flows_;
  FlowTimeouts timeouts_;
  ContextLender& lender_;
  ClientShares& shares_;
  WorkerCounters& counters_;
};

}  // namespace sluice::dataplane
