// The poll loop. Nothing here allocates from the heap, locks, or makes a
// system call while frames flow; the only sleep is after a long run of empty
// polls, when idle_sleep_us asks for it (useful where cores are shared, as in
// CI; a dedicated box busy-polls). Each pass ends with a heartbeat, which
// the main thread watches for systemd's watchdog.
#include "worker.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <sys/prctl.h>
#include <csignal>
#include <unistd.h>

#include "receive_checksum.h"

namespace sluice::dataplane {
namespace {

constexpr time::Nanos kNeverStall = ~time::Nanos{0};

EngineConfig with_logs(EngineConfig config, RefusalSampler& refusals, PenaltyLog& penalties) noexcept {
  config.refusals = &refusals;
  config.penalties = &penalties;
  return config;
}

}  // namespace

Worker::Worker(const WorkerSetup& setup, const WorkerShared& shared, limiter::LimiterState& limiter,
               WorkerCounters& counters)
    : setup_(setup),
      shared_(shared),
      counters_(counters),
      refusals_(RefusalSampler::capacity_for(setup.refusal_rate, setup.workers),
                RefusalSampler::interval_for(setup.refusal_rate, setup.workers)),
      penalties_(kPenaltyLogRecords),
      engine_(with_logs(setup.engine, refusals_, penalties_), limiter, counters,
              0x9e3779b97f4a7c15ull ^ (uint64_t{setup.index} << 32) ^ rte_rdtsc()),
      sink_(*this),
      die_countdown_(setup.test_die_in_change) {
  tx_[static_cast<int>(Side::kClient)].init(setup.client_port, queue());
  tx_[static_cast<int>(Side::kOrigin)].init(setup.origin_port, queue());
}

void Worker::TxQueue::push(rte_mbuf* m, Counter& sent, Counter& dropped, WorkMarker& marker) noexcept {
  if (count_ == sizeof frames_ / sizeof frames_[0]) {
    marker.sending();
    flush(sent, dropped);
  }
  frames_[count_++] = m;
}

void Worker::TxQueue::flush(Counter& sent, Counter& dropped) noexcept {
  if (count_ == 0) return;
  uint16_t done = rte_eth_tx_burst(port_, queue_, frames_, count_);
  // One retry: a queue that is momentarily full often drains within a burst.
  if (done < count_) done = static_cast<uint16_t>(done + rte_eth_tx_burst(port_, queue_, frames_ + done, count_ - done));
  sent.add(done);
  if (done < count_) {
    dropped.add(count_ - done);
    rte_pktmbuf_free_bulk(frames_ + done, count_ - done);
  }
  count_ = 0;
}

std::span<uint8_t> Worker::Sink::allocate(Side /*to*/, size_t len) noexcept {
  if (pending_ != nullptr) rte_pktmbuf_free(pending_);
  pending_ = rte_pktmbuf_alloc(w_.setup_.pool);
  if (pending_ == nullptr) return {};
  char* p = rte_pktmbuf_append(pending_, static_cast<uint16_t>(len));
  if (p == nullptr) {
    rte_pktmbuf_free(pending_);
    pending_ = nullptr;
    return {};
  }
  return {reinterpret_cast<uint8_t*>(p), len};
}

void Worker::Sink::send(Side to, size_t len) noexcept {
  rte_mbuf* m = pending_;
  pending_ = nullptr;
  if (m == nullptr) return;
  if (len == 0) {
    rte_pktmbuf_free(m);
    return;
  }
  if (len < rte_pktmbuf_data_len(m)) rte_pktmbuf_trim(m, static_cast<uint16_t>(rte_pktmbuf_data_len(m) - len));
  Counter& sent = to == Side::kClient ? w_.counters_.tx_client : w_.counters_.tx_origin;
  w_.tx_[static_cast<int>(to)].push(m, sent, w_.counters_.tx_dropped, w_.engine_.marker());
}

Side Worker::side_of(const rte_mbuf* m) const noexcept {
  return m->port == setup_.client_port ? Side::kClient : Side::kOrigin;
}

void Worker::forward(rte_mbuf* m, Side from) noexcept {
  const Side to = other(from);
  Counter& sent = to == Side::kClient ? counters_.tx_client : counters_.tx_origin;
  tx_[static_cast<int>(to)].push(m, sent, counters_.tx_dropped, engine_.marker());
}

bool Worker::receive(rte_mbuf* m, Side from, const PolicySnapshot& snap, Owned& owned) noexcept {
  if (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) {
    // Put the tag back where it was on the wire: the frame is forwarded as
    // received, and the parser looks inside VLAN tags itself.
    if (rte_vlan_insert(&m) != 0) {
      rte_pktmbuf_free(m);
      counters_.tx_dropped.add();
      return false;
    }
    m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED);
  }
  if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
    // A frame spread over several buffers is parsed from one; one that does
    // not fit is bridged only if nothing in it could be TCP.
    FrameView first = parse_frame({rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)});
    if (first.kind != FrameKind::kNonIp && first.kind != FrameKind::kIpOther) {
      counters_.tx_dropped.add();
      rte_pktmbuf_free(m);
      return false;
    }
  }
  FrameView v = parse_frame({rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)});
  switch (v.kind) {
    case FrameKind::kNonIp:
      counters_.bridged_non_ip.add();
      forward(m, from);
      return false;
    case FrameKind::kIpOther:
      counters_.bridged_ip_other.add();
      forward(m, from);
      return false;
    case FrameKind::kOpaque:
      // Fail closed: it could carry a service-port segment nobody judged.
      counters_.dropped_opaque.add();
      rte_pktmbuf_free(m);
      return false;
    case FrameKind::kMalformed:
      counters_.dropped_malformed.add();
      rte_pktmbuf_free(m);
      return false;
    case FrameKind::kTcp:
    case FrameKind::kTcpFragment:
      break;
  }
  ServiceFrame sf;
  if (!service_frame(v, from, snap.service_ports, sf, setup_.flow_seed)) {
    counters_.bridged_tcp_other.add();
    forward(m, from);
    return false;
  }
  if (v.kind == FrameKind::kTcp && !received_checksums_right(m->ol_flags, rte_pktmbuf_mtod(m, const uint8_t*), v)) {
    // A host drops it; so does the appliance, before anything is judged or
    // recorded: its bytes are not the client's, and an edit would have given
    // them a checksum of the appliance's own.
    counters_.dropped_bad_checksum.add();
    rte_pktmbuf_free(m);
    return false;
  }
  if (setup_.workers > 1) {
    const unsigned owner = owner_of(sf);
    if (owner != setup_.index) {
      if (rte_ring_mp_enqueue(shared_.inboxes[owner], m) != 0) {
        counters_.handoff_dropped.add();
        rte_pktmbuf_free(m);
      } else {
        counters_.handed_off.add();
      }
      return false;
    }
  }
  sf.room = room_of(m);
  owned = Owned{m, from, v, sf};
  engine_.prefetch(sf);
  return true;
}

uint32_t Worker::room_of(const rte_mbuf* m) noexcept {
  // One buffer (a chain was linearized on receipt): the frame may grow into its tailroom.
  return static_cast<uint32_t>(rte_pktmbuf_data_len(m)) + rte_pktmbuf_tailroom(m);
}

void Worker::receive_burst(rte_mbuf** frames, uint16_t n, Side from, const PolicySnapshot& snap,
                           time::Nanos now) noexcept {
  // Two passes, as l3fwd does with its lookups: classify every frame (and
  // start loading its flow's slot), then run the engine on the staged ones,
  // in arrival order.
  Owned owned[kBurst];
  unsigned staged = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 2 < n) rte_prefetch0(rte_pktmbuf_mtod(frames[i + 2], void*));
    if (receive(frames[i], from, snap, owned[staged])) ++staged;
  }
  for (unsigned i = 0; i < staged; ++i) handle_owned(owned[i].m, owned[i].from, owned[i].v, owned[i].sf, snap, now);
}

void Worker::make_room_for_a_change() noexcept {
  // Nothing of a change leaves before it ends, so that a kill in its middle
  // can be undone (change_undo.h): the queues are sent first if they are
  // fuller than a burst's frames.
  if (!tx_[0].room_for_a_change() || !tx_[1].room_for_a_change()) {
    tx_[0].flush(counters_.tx_client, counters_.tx_dropped);
    tx_[1].flush(counters_.tx_origin, counters_.tx_dropped);
  }
}

void Worker::handle_owned(rte_mbuf* m, Side from, FrameView& v, const ServiceFrame& sf, const PolicySnapshot& snap,
                          time::Nanos now) noexcept {
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t before = v.frame_len;
  make_room_for_a_change();
  engine_.marker().flow(sf.hash);
  const bool client_payload = from == Side::kClient && v.payload_len != 0;
  const FrameResult r = engine_.on_frame(sf, frame, v, snap, now, sink_);
  if (die_countdown_ != 0 && client_payload && --die_countdown_ == 0) [[unlikely]] {
    (void)raise(SIGKILL);  // test-only (WorkerSetup::test_die_in_change)
  }
  if (r.action == FrameAction::kDrop) {
    rte_pktmbuf_free(m);
  } else {
    const uint32_t have = rte_pktmbuf_data_len(m);
    if (r.frame_len < before) {
      rte_pktmbuf_trim(m, static_cast<uint16_t>(have - r.frame_len));
    } else if (r.frame_len > have) {
      // Grown in place (inserted fields): within the room sf.room gave.
      (void)rte_pktmbuf_append(m, static_cast<uint16_t>(r.frame_len - have));
    }
    forward(m, from);
  }
  if (r.answer_after != nullptr) engine_.send_answer(*r.answer_after, sink_);
  engine_.marker().done();
}

unsigned Worker::poll_once() noexcept {
  const PolicySnapshot& snap = *shared_.policy->load(std::memory_order_acquire);
  const time::Nanos now = shared_.clock->now();
  rte_mbuf* frames[kBurst];
  unsigned received = 0;
  const uint16_t q = queue();

  uint16_t n = rte_eth_rx_burst(setup_.client_port, q, frames, kBurst);
  counters_.rx_client.add(n);
  received += n;
  receive_burst(frames, n, Side::kClient, snap, now);

  n = rte_eth_rx_burst(setup_.origin_port, q, frames, kBurst);
  counters_.rx_origin.add(n);
  received += n;
  receive_burst(frames, n, Side::kOrigin, snap, now);

  if (setup_.workers > 1) {
    void* handed[kBurst];
    const unsigned h = rte_ring_sc_dequeue_burst(shared_.inboxes[setup_.index], handed, kBurst, nullptr);
    received += h;
    for (unsigned i = 0; i < h; ++i) {
      rte_mbuf* m = static_cast<rte_mbuf*>(handed[i]);
      const Side from = side_of(m);
      FrameView v = parse_frame({rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)});
      ServiceFrame sf;
      if (!service_frame(v, from, snap.service_ports, sf, setup_.flow_seed)) {
        forward(m, from);  // the policy changed in between: bridge it
        continue;
      }
      sf.room = room_of(m);
      handle_owned(m, from, v, sf, snap, now);
    }
  }

  // Delayed heads whose time has come, each a change of its own.
  while (engine_.delays().due(now)) {
    make_room_for_a_change();
    if (!engine_.release_delayed(now, sink_)) break;
  }
  // Before the flush: what a missed deadline sends leaves in this pass.
  engine_.sweep(now, 64, snap, sink_);
  tx_[0].flush(counters_.tx_client, counters_.tx_dropped);
  tx_[1].flush(counters_.tx_origin, counters_.tx_dropped);
  counters_.flows_active.store(engine_.flows().size(), std::memory_order_relaxed);
  counters_.flows_unbound.store(engine_.unbound_flows(), std::memory_order_relaxed);
  counters_.oldest_policy_generation.store(engine_.policy_generation_in_use(snap.generation),
                                           std::memory_order_relaxed);
  if (shared_.qsbr != nullptr) rte_rcu_qsbr_quiescent(shared_.qsbr, setup_.index);
  counters_.heartbeat.add();  // a relaxed store to this worker's own counters
  return received;
}

void Worker::run() noexcept {
  if (shared_.qsbr != nullptr) {
    rte_rcu_qsbr_thread_register(shared_.qsbr, setup_.index);
    rte_rcu_qsbr_thread_online(shared_.qsbr, setup_.index);
  }
  const time::Nanos stall_at =
      setup_.test_stall_after != 0 ? shared_.clock->now() + setup_.test_stall_after : kNeverStall;
  // An idle sleep of a few microseconds lasts the thread's timer slack on
  // top (50 us by default): a segment that arrives meanwhile waits that long.
  // One system call, before the loop.
  if (setup_.idle_sleep_us != 0) (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  while (!shared_.stop->load(std::memory_order_relaxed)) {
    if (stall_at != kNeverStall && stalled_for_test(stall_at)) break;
    if (poll_once() != 0) {
      empty_polls_ = 0;
      continue;
    }
    if (setup_.idle_sleep_us != 0 && ++empty_polls_ > 1024) {
      // Idle: let a shared core do other work. Offline while asleep, so a
      // grace period never waits for a sleeping worker.
      if (shared_.qsbr != nullptr) rte_rcu_qsbr_thread_offline(shared_.qsbr, setup_.index);
      usleep(setup_.idle_sleep_us);
      if (shared_.qsbr != nullptr) rte_rcu_qsbr_thread_online(shared_.qsbr, setup_.index);
    }
  }
  if (shared_.qsbr != nullptr) {
    rte_rcu_qsbr_thread_offline(shared_.qsbr, setup_.index);
    rte_rcu_qsbr_thread_unregister(shared_.qsbr, setup_.index);
  }
}

// The stalled worker goes offline for RCU first, so that reloads, the
// reclaimer and the clean stop go on without it: what the test looks at is
// the watchdog, which stops being fed because the heartbeat stops.
bool Worker::stalled_for_test(time::Nanos stall_at) noexcept {
  if (shared_.clock->now() < stall_at) return false;
  if (shared_.qsbr != nullptr) rte_rcu_qsbr_thread_offline(shared_.qsbr, setup_.index);
  while (!shared_.stop->load(std::memory_order_relaxed)) usleep(10000);
  if (shared_.qsbr != nullptr) rte_rcu_qsbr_thread_online(shared_.qsbr, setup_.index);
  return true;
}

}  // namespace sluice::dataplane
