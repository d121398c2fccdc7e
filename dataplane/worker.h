// One worker lcore, shaped like DPDK's l3fwd: all of its state in one
// struct, and a loop of burst in (both ports' queue i, then frames other
// workers handed over), process, burst out, report a quiescent state.
// Frames that are not TCP to a service port are bridged to the other port
// untouched; service-port frames of a flow another worker owns are handed to
// that worker through its ring, so no flow is ever processed by two workers.
// Flows between the same two addresses have one owner: the receive queue
// symmetric RSS picks for them where the ports have it (RssOwner: hand-offs
// are then rare), else a keyed hash of the addresses (rss_owner.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>

#include "flow_engine.h"
#include "refusal_sampler.h"
#include "rss_owner.h"
#include "time/clock.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_rcu_qsbr;

namespace sluice::dataplane {

inline constexpr uint16_t kBurst = 32;

struct WorkerShared {
  const std::atomic<const PolicySnapshot*>* policy = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;
  std::span<rte_ring* const> inboxes;  // one per worker, indexed by worker
  const std::atomic<bool>* stop = nullptr;
  const time::Clock* clock = nullptr;
};

struct WorkerSetup {
  unsigned index = 0;    // the RCU thread id, the inbox, and (unless `queue` says) the queue on both ports
  unsigned workers = 1;
  // The receive and transmit queue on both ports, where it is not `index`
  // (perf/packet_rate spaces its ring ports' queues apart, so that the ring
  // driver's per-queue counters of two workers share no cache line).
  std::optional<uint16_t> queue;
  uint16_t client_port = 0;
  uint16_t origin_port = 1;
  rte_mempool* pool = nullptr;
  unsigned idle_sleep_us = 0;  // after many empty polls, sleep this long (0: busy-poll)
  uint64_t flow_seed = 0;      // keys the flow hash (flow_key.h): the same for every worker
  // The queue symmetric RSS gives a flow names its owner; null (ports without
  // it, such as AF_PACKET's): a keyed hash of its addresses does (address_owner()).
  const RssOwner* rss = nullptr;
  // The refusal log (--refusal-log): refusals sampled a second for the whole box,
  // this worker keeping its share (refusal_sampler.h); 0: none.
  unsigned refusal_rate = 0;
  EngineConfig engine;
  // Test-only (SLUICE_TEST_STALL_WORKER, src/sluiced_notify.h): this long
  // after run() begins, the worker stops passing through its loop, as a
  // stuck one would. 0: never.
  time::Nanos test_stall_after = 0;
  // Test-only: the worker kills the process (SIGKILL) in the middle of its
  // change number N for a client segment with payload, after the engine
  // changed the flow, before the segment goes on (change_undo.h). 0: never.
  uint32_t test_die_in_change = 0;
};

class Worker {
 public:
  Worker(const WorkerSetup& setup, const WorkerShared& shared, limiter::LimiterState& limiter,
         WorkerCounters& counters);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs the loop until the stop flag is set.
  void run() noexcept;
  // One pass of the loop; returns the frames received.
  unsigned poll_once() noexcept;

  [[nodiscard]] const FlowEngine& engine() const noexcept { return engine_; }
  [[nodiscard]] FlowEngine& engine() noexcept { return engine_; }
  // The refusals this worker sampled, for the control thread that logs them.
  [[nodiscard]] RefusalSampler& refusals() noexcept { return refusals_; }
  // The keys this worker boxed, for the control thread that lists them.
  [[nodiscard]] PenaltyLog& penalties() noexcept { return penalties_; }

 private:
  class TxQueue {
   public:
    void init(uint16_t port, uint16_t queue) noexcept {
      port_ = port;
      queue_ = queue;
    }
    // Queues `m`; sends the queue first if it is full, telling `marker`
    // (a change under way can then no longer be undone).
    void push(rte_mbuf* m, Counter& sent, Counter& dropped, WorkMarker& marker) noexcept;
    void flush(Counter& sent, Counter& dropped) noexcept;
    // Before a change: room for the frames one change writes without a send
    // in its middle (a refusal's answer split at a small MSS may still need
    // one).
    [[nodiscard]] bool room_for_a_change() const noexcept { return count_ <= kBurst * 2; }

   private:
    uint16_t port_ = 0, queue_ = 0, count_ = 0;
    rte_mbuf* frames_[kBurst * 3];
  };

  // The PacketSink the engine writes answers into: mbufs from the worker's
  // pool, queued behind whatever was forwarded before them.
  class Sink final : public PacketSink {
   public:
    explicit Sink(Worker& w) noexcept : w_(w) {}
    std::span<uint8_t> allocate(Side to, size_t len) noexcept override;
    void send(Side to, size_t len) noexcept override;

   private:
    Worker& w_;
    rte_mbuf* pending_ = nullptr;
  };

  // A frame of this burst that this worker's flow engine handles.
  struct Owned {
    rte_mbuf* m;
    Side from;
    FrameView v;
    ServiceFrame sf;
  };

  // Classifies one received frame: bridged, handed to its owner, or (true)
  // staged in `owned` for the engine.
  [[nodiscard]] bool receive(rte_mbuf* m, Side from, const PolicySnapshot& snap, Owned& owned) noexcept;
  void receive_burst(rte_mbuf** frames, uint16_t n, Side from, const PolicySnapshot& snap, time::Nanos now) noexcept;
  // Flushes the transmit queues if a change's frames might not fit.
  void make_room_for_a_change() noexcept;
  void handle_owned(rte_mbuf* m, Side from, FrameView& v, const ServiceFrame& sf, const PolicySnapshot& snap,
                    time::Nanos now) noexcept;
  [[nodiscard]] unsigned owner_of(const ServiceFrame& sf) const noexcept {
    return setup_.rss != nullptr ? setup_.rss->owner(sf.key)
                                 : address_owner(sf.key, setup_.flow_seed, setup_.workers);
  }
  // The frame may grow into its buffer's tailroom (it is one buffer).
  [[nodiscard]] static uint32_t room_of(const rte_mbuf* m) noexcept;
  void forward(rte_mbuf* m, Side from) noexcept;
  [[nodiscard]] Side side_of(const rte_mbuf* m) const noexcept;

  // Test-only: true once `stall_at` has passed, after the worker sat out of
  // its loop until the stop flag (see WorkerSetup::test_stall_after).
  [[nodiscard]] bool stalled_for_test(time::Nanos stall_at) noexcept;

  [[nodiscard]] uint16_t queue() const noexcept { return setup_.queue.value_or(static_cast<uint16_t>(setup_.index)); }

  WorkerSetup setup_;
  WorkerShared shared_;
  WorkerCounters& counters_;
  RefusalSampler refusals_;  // before engine_, which is given it
  PenaltyLog penalties_;     // the same
  FlowEngine engine_;
  Sink sink_;
  TxQueue tx_[2];
  uint32_t empty_polls_ = 0;
  uint32_t die_countdown_ = 0;  // WorkerSetup::test_die_in_change, counted down
};

}  // namespace sluice::dataplane
