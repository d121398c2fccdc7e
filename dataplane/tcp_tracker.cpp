// Flows opened, tracked and expired; see tcp_tracker.h.
#include "tcp_tracker.h"

#include <algorithm>
#include <cstring>

namespace sluice::dataplane {

namespace flag = tcp_flag;

namespace {

FlowTable table_on(size_t flows, FlowSlots memory) {
  if (memory.slots.empty()) return FlowTable(flows);
  return FlowTable(memory);
}

}  // namespace

TcpTracker::TcpTracker(size_t flows, FlowSlots memory, const FlowTimeouts& timeouts, ContextLender& lender,
                       ClientShares& shares, WorkerCounters& counters)
    : flows_(table_on(flows, memory)), timeouts_(timeouts), lender_(lender), shares_(shares), counters_(counters) {}

TcpTracker::SynOutcome TcpTracker::client_syn(TcpFlow* flow, const ServiceFrame& sf, const uint8_t* frame, const FrameView& v,
                            time::Nanos now) noexcept {
  if (flow != nullptr && flow->client.isn == v.seq) {
    // The SYN again (retransmitted, duplicated or replayed), in whatever
    // state the flow is: it changes nothing.
    flow->last_seen = now;
    return SynOutcome::kTracked;
  }
  if (flow != nullptr && flow->state != FlowState::kSynSent && flow->state != FlowState::kSynReceived &&
      flow->state != FlowState::kClosed && flow->state != FlowState::kAnswered) {
    // A SYN with another sequence number on a live connection (see the
    // header): the appliance keeps tracking it as it is.
    flow->last_seen = now;
    return SynOutcome::kTracked;
  }
  if (flow != nullptr) {
    // The client reuses the ports of a connection that is over (or whose
    // handshake it abandoned): a new connection, tracked from scratch.
    lender_.give_back_all(*flow);
    const FlowKey key = flow->key;
    const uint64_t hash = flow->hash;
    const int32_t share = flow->share;  // the same client
    *flow = TcpFlow{};
    flow->key = key;
    flow->hash = hash;
    flow->share = share;
  } else {
    SynOutcome o = SynOutcome::kTracked;
    flow = insert(sf, o);
    if (flow == nullptr) return o;
  }
  start_flow(*flow, frame, v);
  flow->last_seen = now;
  counters_.flows_created.add();
  return SynOutcome::kTracked;
}

TcpFlow* TcpTracker::insert(const ServiceFrame& sf, SynOutcome& outcome) noexcept {
  const int32_t share = shares_.open_flow(sf.key.client);
  if (share == ClientShares::kNoShare) {
    counters_.share_flows_refused.add();
    outcome = SynOutcome::kShareFull;
    return nullptr;
  }
  TcpFlow* flow = flows_.insert(sf.key, sf.hash);
  if (flow == nullptr) {
    shares_.close_flow(share);
    outcome = SynOutcome::kTableFull;
    return nullptr;
  }
  flow->share = share;
  outcome = SynOutcome::kTracked;
  return flow;
}

TcpFlow* TcpTracker::resume(const TcpFlow& carried, uint64_t hash, SynOutcome& outcome) noexcept {
  ServiceFrame sf{};
  sf.key = carried.key;
  sf.hash = hash;
  TcpFlow* flow = insert(sf, outcome);
  if (flow == nullptr) return nullptr;
  const int32_t share = flow->share;
  *flow = carried;
  flow->hash = hash;
  flow->share = share;
  flow->context = -1;
  flow->hold = -1;
  flow->stash = -1;
  return flow;
}

void TcpTracker::start_flow(TcpFlow& flow, const uint8_t* frame, const FrameView& v) noexcept {
  flow.state = FlowState::kSynSent;
  flow.ip_version = v.ip_version;
  flow.client.isn = v.seq;
  flow.client.mss = v.options.mss != 0 ? v.options.mss : 536;
  flow.timestamps = v.options.has_timestamp;
  flow.client.tsval = v.options.tsval;
  flow.client.l2_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.client.l2, frame, flow.client.l2_len);
}

bool TcpTracker::established_by(TcpFlow& flow, const FrameView& v) noexcept {
  if (!v.has(flag::kAck) || v.ack != flow.origin.isn + 1) return false;
  flow.state = FlowState::kEstablished;
  flow.client.progress = flow.last_seen;  // the first head's deadline runs from here
  flow.client.next = flow.client.isn + 1;
  flow.origin.next = flow.origin.isn + 1;
  counters_.flows_established.add();
  return true;
}

void TcpTracker::origin_syn(TcpFlow& flow, const uint8_t* frame, const FrameView& v, time::Nanos now) noexcept {
  flow.last_seen = now;
  if (!v.has(flag::kAck) || flow.state != FlowState::kSynSent || v.ack != flow.client.isn + 1) return;
  flow.origin.isn = v.seq;
  flow.origin.ack = v.ack;
  flow.origin.tsval = v.options.tsval;
  flow.origin.window = v.window;
  flow.origin.mss = v.options.mss != 0 ? v.options.mss : 536;
  flow.state = FlowState::kSynReceived;
  flow.timestamps = flow.timestamps && v.options.has_timestamp;
  flow.origin.l2_len = static_cast<uint8_t>(std::min<size_t>(v.l3_offset, kMaxL2Header));
  std::memcpy(flow.origin.l2, frame, flow.origin.l2_len);
}

void TcpTracker::reset(TcpFlow& flow) noexcept {
  // Nothing after the SYN was judged: any payload on the closed flow is
  // past its end.
  if (flow.state == FlowState::kSynSent || flow.state == FlowState::kSynReceived) flow.client.next = flow.client.isn + 1;
  flow.state = FlowState::kClosed;
  lender_.give_back_all(flow);
}

void TcpTracker::client_fin(TcpFlow& flow) noexcept {
  flow.client.fin = true;
  close_if_finished(flow);
}

void TcpTracker::origin_fin(TcpFlow& flow) noexcept {
  flow.origin.fin = true;
  close_if_finished(flow);
}

void TcpTracker::close_if_finished(TcpFlow& flow) noexcept {
  // Both sides have closed: keep the flow only briefly, for the last ACKs.
  if (flow.client.fin && flow.origin.fin &&
      (flow.state == FlowState::kEstablished || flow.state == FlowState::kPassThrough)) {
    flow.state = FlowState::kClosed;
    lender_.give_back(flow);
  }
}

void TcpTracker::expire(TcpFlow& flow) noexcept {
  lender_.give_back_all(flow);
  shares_.close_flow(flow.share);
  counters_.flows_expired.add();
}

void TcpTracker::erase(TcpFlow& flow) noexcept {
  lender_.give_back_all(flow);
  shares_.close_flow(flow.share);
  flows_.erase(&flow);
}

}  // namespace sluice::dataplane
