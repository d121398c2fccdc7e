// The multi-worker packet rate (see packet_rate_workers.h).
//
// Three rigs live side by side and take turns, repetition by repetition, so
// drift on a shared machine falls on all of them alike:
//   1 worker                 every frame on queue 0;
//   N workers, RSS queue     the owner is the queue the frame arrived on
//                            (dataplane::RssOwner, as on a NIC with RSS);
//   N workers, keyed hash    the owner is a keyed hash of the addresses
//                            (sluiced's way on ports without RSS, such as
//                            AF_PACKET's): about (N-1)/N of the frames reach
//                            another worker first and are handed over.
// Each worker runs on its own lcore (lane), builds its own queue's frames
// (untimed, so they are warm in that core's cache, as after DDIO), then all
// lanes are released at once and the time runs until every frame of the
// chunk is out of the transmit rings, whichever lane sent it. A baseline pass
// moves the same frames through the same queues with no processing.
#include "packet_rate_workers.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/ports.h"
#include "dataplane/rss_owner.h"
#include "dataplane/worker.h"
#include "median.h"
#include "packet_limiter.h"
#include "packet_wire.h"

namespace sluice::perf {
namespace {

using dataplane::kBurst;
using dataplane::Worker;
using dataplane::WorkerCounters;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Lanes: a task run on lcores 0 .. n-1 at once, lane 0 on this thread.

class Crew {
 public:
  explicit Crew(unsigned lanes) : seats_(lanes) {
    unsigned lcore = rte_get_next_lcore(-1, 1, 0);
    for (unsigned lane = 1; lane < lanes; ++lane) {
      if (lcore >= RTE_MAX_LCORE) die(std::to_string(lanes) + " lanes need as many lcores");
      seats_[lane] = Seat{this, lane};
      if (rte_eal_remote_launch(&Crew::seat_main, &seats_[lane], lcore) != 0) die("cannot launch a lane");
      lcore = rte_get_next_lcore(lcore, 1, 0);
    }
  }
  ~Crew() {
    quit_.store(true, std::memory_order_release);
    rte_eal_mp_wait_lcore();
  }
  Crew(const Crew&) = delete;
  Crew& operator=(const Crew&) = delete;

  // Runs task(lane) for lanes [0, n) at once; returns the ns from their
  // release until the last is done.
  uint64_t run(unsigned n, const std::function<void(unsigned)>& task) {
    task_ = &task;
    n_ = n;
    done_.store(0, std::memory_order_relaxed);
    const auto t0 = Clock::now();
    generation_.fetch_add(1, std::memory_order_release);
    task(0);
    while (done_.load(std::memory_order_acquire) != n - 1) rte_pause();
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  }

 private:
  struct Seat {
    Crew* crew = nullptr;
    unsigned lane = 0;
  };
  static int seat_main(void* arg) {
    const Seat& seat = *static_cast<Seat*>(arg);
    Crew& c = *seat.crew;
    uint64_t seen = c.generation_.load(std::memory_order_acquire);
    uint64_t idle_since = rte_rdtsc();
    while (!c.quit_.load(std::memory_order_acquire)) {
      const uint64_t g = c.generation_.load(std::memory_order_acquire);
      if (g == seen) {
        // Spin a millisecond after a task (the next is usually near), then
        // nap, so a crew waiting on the main thread leaves its core alone.
        if (rte_rdtsc() - idle_since > rte_get_tsc_hz() / 1000) usleep(100);
        else rte_pause();
        continue;
      }
      seen = g;
      if (seat.lane < c.n_) {  // else a task for fewer lanes: stay napping, off the others' cores
        (*c.task_)(seat.lane);
        c.done_.fetch_add(1, std::memory_order_acq_rel);
        idle_since = rte_rdtsc();
      }
    }
    return 0;
  }

  std::vector<Seat> seats_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> done_{0};
  std::atomic<bool> quit_{false};
  const std::function<void(unsigned)>* task_ = nullptr;
  unsigned n_ = 0;
};

// ---------------------------------------------------------------------------
// A rig: two ring ports with a queue pair per worker, and the workers.

enum class Ownership { kSingle, kRssQueue, kKeyedHash };

class WorkerRig {
 public:
  WorkerRig(unsigned id, unsigned workers, Ownership ownership, size_t flow_slots, size_t contexts, size_t chunk)
      : workers_(workers), nic_(dataplane::RssOwner::even_table(dataplane::RssOwner::kMaxEntries, workers)) {
    std::string tag = "w";  // (not "w" + to_string: GCC 12 warns wrongly, -Wrestrict)
    tag += std::to_string(id);
    worker_pool_ = rte_pktmbuf_pool_create((tag + "_worker").c_str(), 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                           static_cast<int>(rte_socket_id()));
    if (worker_pool_ == nullptr) die(std::string("mempool: ") + rte_strerror(rte_errno));
    // A lane builds two frames per request, a chunk at a time, for its worker
    // and then for the baseline.
    const auto lane_frames = static_cast<unsigned>(std::max<size_t>(8 * chunk, 4096) - 1);
    for (unsigned l = 0; l < workers; ++l) {
      lanes_.push_back(std::make_unique<Lane>());
      // A pool per lane, as a NIC's queues each have their descriptors'
      // buffers: lanes that shared one met in its ring once their caches
      // overflowed (a chunk is thousands of frames).
      lanes_[l]->pool = rte_pktmbuf_pool_create((tag + "_lane" + std::to_string(l)).c_str(), lane_frames, 256, 0,
                                                RTE_PKTMBUF_HEADROOM + 512, static_cast<int>(rte_socket_id()));
      if (lanes_[l]->pool == nullptr) die(std::string("mempool: ") + rte_strerror(rte_errno));
    }
    // The ring driver keeps its per-queue counters side by side (24 bytes
    // each) and writes them on every burst: lane l takes queue kQueueStride
    // * l, and the queues between stay unused, so two lanes never write one
    // cache line (which held both lanes' harness to less than one lane's).
    const char* sides[2] = {"client", "origin"};
    for (int s = 0; s < 2; ++s) {
      std::vector<rte_ring*> rx, tx;
      for (unsigned q = 0; q < workers * kQueueStride; ++q) {
        const unsigned l = q / kQueueStride;
        if (q % kQueueStride != 0) {
          // An idle queue: its own small rings, never used.
          const std::string name = tag + sides[s] + "idle" + std::to_string(q);
          rte_ring* r = rte_ring_create((name + "_rx").c_str(), 64, static_cast<int>(rte_socket_id()),
                                        RING_F_SP_ENQ | RING_F_SC_DEQ);
          rte_ring* t = rte_ring_create((name + "_tx").c_str(), 64, static_cast<int>(rte_socket_id()),
                                        RING_F_SP_ENQ | RING_F_SC_DEQ);
          if (r == nullptr || t == nullptr) die(std::string("ring: ") + rte_strerror(rte_errno));
          idle_rings_.push_back(r);
          idle_rings_.push_back(t);
          rx.push_back(r);
          tx.push_back(t);
          continue;
        }
        const std::string name = tag + sides[s] + std::to_string(l);
        Lane& lane = *lanes_[l];
        lane.rx[s] = rte_ring_create((name + "_rx").c_str(), 1024, static_cast<int>(rte_socket_id()),
                                     RING_F_SP_ENQ | RING_F_SC_DEQ);
        lane.tx[s] = rte_ring_create((name + "_tx").c_str(), 4096, static_cast<int>(rte_socket_id()),
                                     RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (lane.rx[s] == nullptr || lane.tx[s] == nullptr) die(std::string("ring: ") + rte_strerror(rte_errno));
        rx.push_back(lane.rx[s]);
        tx.push_back(lane.tx[s]);
      }
      const unsigned queues = workers * kQueueStride;
      const int port = rte_eth_from_rings((tag + sides[s]).c_str(), rx.data(), queues, tx.data(), queues,
                                          rte_socket_id());
      if (port < 0) die(std::string("rte_eth_from_rings: ") + rte_strerror(rte_errno));
      port_[s] = static_cast<uint16_t>(port);
      dataplane::PortInfo info;
      const std::string err = dataplane::start_port(
          port_[s], dataplane::PortSetup{static_cast<uint16_t>(workers * kQueueStride), 1024, 1024},
          lanes_[0]->pool, info);  // the ring driver allocates nothing from it
      if (!err.empty()) die(err);
    }
    if (workers > 1) {
      for (unsigned l = 0; l < workers; ++l) {
        rte_ring* r = rte_ring_create((tag + "_inbox" + std::to_string(l)).c_str(), 8192,
                                      static_cast<int>(rte_socket_id()), RING_F_SC_DEQ);
        if (r == nullptr) die(std::string("ring: ") + rte_strerror(rte_errno));
        inboxes_.push_back(r);
      }
    }
    qsbr_ = static_cast<rte_rcu_qsbr*>(
        rte_zmalloc((tag + "_qsbr").c_str(), rte_rcu_qsbr_get_memsize(workers), RTE_CACHE_LINE_SIZE));
    if (qsbr_ == nullptr || rte_rcu_qsbr_init(qsbr_, workers) != 0) die("no memory for the RCU state");
    const dataplane::WorkerShared shared{limiter_.published(), qsbr_, inboxes_, &stop_, &clock_};
    for (unsigned l = 0; l < workers; ++l) {
      rte_rcu_qsbr_thread_register(qsbr_, l);
      rte_rcu_qsbr_thread_online(qsbr_, l);
      dataplane::WorkerSetup ws;
      ws.index = l;
      ws.queue = static_cast<uint16_t>(l * kQueueStride);
      ws.workers = workers;
      ws.client_port = port_[0];
      ws.origin_port = port_[1];
      ws.pool = worker_pool_;
      ws.rss = ownership == Ownership::kRssQueue ? &nic_ : nullptr;
      ws.engine.flows = flow_slots;
      ws.engine.contexts = contexts;
      ws.engine.max_head_bytes = limiter_.snapshot().policy.stream.head.max_head_bytes;
      ws.engine.max_fields = limiter_.snapshot().policy.stream.head.max_fields;
      ws.engine.insert_fields = false;  // plain forwarding, as the one-worker admitted scenario
      lanes_[l]->worker = std::make_unique<Worker>(ws, shared, limiter_.state(), lanes_[l]->counters);
    }
  }

  ~WorkerRig() {
    for (auto& lane : lanes_) lane->worker.reset();
    for (unsigned l = 0; l < workers_; ++l) {
      rte_rcu_qsbr_thread_offline(qsbr_, l);
      rte_rcu_qsbr_thread_unregister(qsbr_, l);
    }
    rte_free(qsbr_);
    for (int s = 0; s < 2; ++s) dataplane::stop_port(port_[s]);
    for (auto& lane : lanes_) {
      for (int s = 0; s < 2; ++s) {
        rte_pktmbuf_free_bulk(lane->in[s].data(), static_cast<unsigned>(lane->in[s].size()));
        rte_ring_free(lane->rx[s]);
        rte_ring_free(lane->tx[s]);
      }
    }
    for (rte_ring* r : inboxes_) rte_ring_free(r);
    for (rte_ring* r : idle_rings_) rte_ring_free(r);
    for (auto& lane : lanes_) rte_mempool_free(lane->pool);
    rte_mempool_free(worker_pool_);
  }
  WorkerRig(const WorkerRig&) = delete;
  WorkerRig& operator=(const WorkerRig&) = delete;

  [[nodiscard]] unsigned workers() const { return workers_; }

  // The lane (receive queue) the NIC gives segment `t`: its symmetric RSS hash.
  [[nodiscard]] unsigned nic_lane(const Tcp& t) const {
    return nic_.owner(dataplane::FlowKey{net::IpAddress::v4(t.client_ip), net::IpAddress::v4(kOriginIp),
                                         t.client_port, t.origin_port});
  }
  // Queues `t` for lane `lane`'s receive queue (on the port of its side).
  void add(unsigned lane, const Tcp& t) {
    rte_mbuf* m = rte_pktmbuf_alloc(lanes_[lane]->pool);
    if (m == nullptr) die("the frame pool is empty");
    m->port = port_[static_cast<int>(t.from)];
    const size_t len = write_tcp(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m), t);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    lanes_[lane]->in[static_cast<int>(t.from)].push_back(m);
  }
  [[nodiscard]] size_t queued() const {
    size_t n = 0;
    for (const auto& lane : lanes_) n += lane->in[0].size() + lane->in[1].size();
    return n;
  }

  // Lane `l`'s share of a timed pass: feeds its queued frames, polls (the
  // worker, or a bare bridge), and drains its transmit rings until `expected`
  // frames have left the rig from all lanes together. Each lane counts its
  // own frames out; the others' counts are read only when this lane has
  // nothing left to do (a frame handed over may still come its way).
  void pass_lane(unsigned l, bool bridge, uint64_t expected) {
    Lane& lane = *lanes_[l];
    size_t next[2] = {0, 0};
    const uint64_t deadline = rte_rdtsc() + 10 * rte_get_tsc_hz();
    unsigned rounds = 0;
    for (;;) {
      for (int s = 0; s < 2; ++s) {
        const size_t n = std::min<size_t>(kBurst, lane.in[s].size() - next[s]);
        if (n != 0) {
          next[s] += rte_ring_sp_enqueue_burst(lane.rx[s], reinterpret_cast<void* const*>(lane.in[s].data() + next[s]),
                                               static_cast<unsigned>(n), nullptr);
        }
      }
      const unsigned received = bridge ? bridge_once(l) : lane.worker->poll_once();
      drain(lane);
      const bool fed = next[0] == lane.in[0].size() && next[1] == lane.in[1].size();
      if (fed && received == 0 && frames_out() >= expected) break;
      if (++rounds % 1024 == 0 && rte_rdtsc() > deadline) {
        die("a pass stalled: " + std::to_string(frames_out()) + " of " + std::to_string(expected) + " frames out");
      }
    }
    lane.in[0].clear();
    lane.in[1].clear();
  }
  void start_pass() {
    for (auto& lane : lanes_) lane->out.store(0, std::memory_order_relaxed);
  }
  [[nodiscard]] uint64_t frames_out() const {
    uint64_t n = 0;
    for (const auto& lane : lanes_) n += lane->out.load(std::memory_order_relaxed);
    return n;
  }

  // Untimed, on this thread alone: every lane's frames through, lanes taking
  // turns until nothing is left anywhere.
  void serial_pass() {
    size_t next[kMaxLanes][2] = {};
    for (;;) {
      bool busy = false;
      for (unsigned l = 0; l < workers_; ++l) {
        Lane& lane = *lanes_[l];
        for (int s = 0; s < 2; ++s) {
          const size_t n = std::min<size_t>(kBurst, lane.in[s].size() - next[l][s]);
          if (n != 0) {
            next[l][s] += rte_ring_sp_enqueue_burst(
                lane.rx[s], reinterpret_cast<void* const*>(lane.in[s].data() + next[l][s]), static_cast<unsigned>(n),
                nullptr);
          }
          busy = busy || next[l][s] < lane.in[s].size() || rte_ring_count(lane.rx[s]) != 0;
        }
        const unsigned received = lane.worker->poll_once();
        busy = busy || received != 0;
        drain(lane);
      }
      if (!busy) break;
    }
    for (auto& lane : lanes_) {
      lane->in[0].clear();
      lane->in[1].clear();
    }
  }

  // The sum of one counter over the workers.
  [[nodiscard]] uint64_t total(dataplane::Counter WorkerCounters::* c) const {
    uint64_t n = 0;
    for (const auto& lane : lanes_) n += (lane->counters.*c).get();
    return n;
  }
  [[nodiscard]] bool contexts_all_free() const {
    for (const auto& lane : lanes_) {
      if (lane->worker->engine().contexts().free_count() != lane->worker->engine().contexts().size()) return false;
    }
    return true;
  }

  static constexpr unsigned kMaxLanes = 64;
  static constexpr unsigned kQueueStride = 3;

 private:
  struct Lane {
    rte_ring* rx[2] = {};
    rte_ring* tx[2] = {};
    std::vector<rte_mbuf*> in[2];
    rte_mempool* pool = nullptr;  // the frames this lane receives
    alignas(64) std::atomic<uint64_t> out{0};  // frames this lane took from its transmit rings in this pass
    WorkerCounters counters;
    std::unique_ptr<Worker> worker;
  };

  unsigned bridge_once(unsigned l) {
    unsigned received = 0;
    rte_mbuf* burst[kBurst];
    for (int s = 0; s < 2; ++s) {
      const auto q = static_cast<uint16_t>(l * kQueueStride);
      const uint16_t n = rte_eth_rx_burst(port_[s], q, burst, kBurst);
      if (n == 0) continue;
      received += n;
      const uint16_t sent = rte_eth_tx_burst(port_[1 - s], q, burst, n);
      if (sent < n) rte_pktmbuf_free_bulk(burst + sent, n - sent);
    }
    return received;
  }
  void drain(Lane& lane) {
    void* out[64];
    for (int s = 0; s < 2; ++s) {
      for (;;) {
        const unsigned n = rte_ring_sc_dequeue_burst(lane.tx[s], out, 64, nullptr);
        if (n == 0) break;
        lane.out.store(lane.out.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
        rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(out), n);
      }
    }
  }

  unsigned workers_;
  dataplane::RssOwner nic_;  // what the emulated NIC's RSS does; also the workers' owner under kRssQueue
  PacketLimiter limiter_;
  time::TscClock clock_;
  std::atomic<bool> stop_{false};
  rte_mempool* worker_pool_ = nullptr;
  uint16_t port_[2] = {};
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<rte_ring*> inboxes_;
  std::vector<rte_ring*> idle_rings_;
  rte_rcu_qsbr* qsbr_ = nullptr;
};

// ---------------------------------------------------------------------------
// The admitted pattern (as packet_rate's one-worker scenario): request k on
// flow k % flows, the origin's response right behind it.

void add_request_and_response(WorkerRig& rig, unsigned lane, size_t flows, uint64_t k) {
  const Exchange e = admitted_exchange(kAdmitNet, flows, k);
  if (rig.nic_lane(e.request) != lane) return;
  rig.add(lane, e.request);
  rig.add(lane, e.response);
}

void handshake(WorkerRig& rig, size_t flows, size_t chunk) {
  for (size_t first = 0; first < flows; first += chunk) {
    const size_t n = std::min(chunk, flows - first);
    for (int step = 0; step < 2; ++step) {
      for (size_t f = first; f < first + n; ++f) {
        const Handshake h = handshake_of(flow_id(kAdmitNet, f, 0));
        const unsigned lane = rig.nic_lane(h.syn);
        if (step == 0) {
          rig.add(lane, h.syn);
          rig.add(lane, h.syn_ack);
        } else {
          rig.add(lane, h.ack);
        }
      }
      rig.serial_pass();
    }
  }
  const uint64_t established = rig.total(&WorkerCounters::flows_established);
  if (established != flows) {
    die("workers: " + std::to_string(established) + " of " + std::to_string(flows) + " flows established");
  }
}

struct Config {
  std::string name;
  std::unique_ptr<WorkerRig> rig;
  Ownership ownership;
  uint64_t next_request = 0;
  std::vector<double> rate, baseline, handed;  // per repetition: requests/s, harness requests/s, hand-off share
};

// One repetition of `requests` requests (and responses) through `c`'s rig.
void repetition(Crew& crew, Config& c, const WorkersRun& run) {
  WorkerRig& rig = *c.rig;
  const unsigned n = rig.workers();
  auto counter = [&](dataplane::Counter WorkerCounters::* x) { return rig.total(x); };
  const uint64_t admitted0 = counter(&WorkerCounters::admitted), handed0 = counter(&WorkerCounters::handed_off);
  const uint64_t service0 = counter(&WorkerCounters::service_frames);
  const uint64_t trouble0 = counter(&WorkerCounters::backpressure) + counter(&WorkerCounters::out_of_order) +
                            counter(&WorkerCounters::retransmits) + counter(&WorkerCounters::contexts_exhausted) +
                            counter(&WorkerCounters::handoff_dropped) + counter(&WorkerCounters::tx_dropped);
  uint64_t worker_ns = 0, baseline_ns = 0;
  const size_t step = run.chunk * n;
  for (size_t first = 0; first < run.requests; first += step) {
    const size_t count = std::min(step, run.requests - first);
    const uint64_t base = c.next_request + first;
    auto fill = [&](unsigned lane) {
      for (size_t k = 0; k < count; ++k) add_request_and_response(rig, lane, run.flows, base + k);
    };
    for (int baseline = 0; baseline < 2; ++baseline) {
      crew.run(n, fill);
      const uint64_t frames = rig.queued();
      rig.start_pass();
      const uint64_t ns = crew.run(n, [&](unsigned lane) { rig.pass_lane(lane, baseline != 0, frames); });
      (baseline != 0 ? baseline_ns : worker_ns) += ns;
    }
  }
  c.next_request += run.requests;
  const uint64_t admitted = counter(&WorkerCounters::admitted) - admitted0;
  const uint64_t handed = counter(&WorkerCounters::handed_off) - handed0;
  const uint64_t service = counter(&WorkerCounters::service_frames) - service0;
  const uint64_t trouble = counter(&WorkerCounters::backpressure) + counter(&WorkerCounters::out_of_order) +
                           counter(&WorkerCounters::retransmits) + counter(&WorkerCounters::contexts_exhausted) +
                           counter(&WorkerCounters::handoff_dropped) + counter(&WorkerCounters::tx_dropped) - trouble0;
  if (admitted != run.requests) {
    die(c.name + ": admitted " + std::to_string(admitted) + " of " + std::to_string(run.requests));
  }
  if (trouble != 0) die(c.name + ": back-pressure, reordering, drops or no context: the harness is wrong");
  if (c.ownership != Ownership::kKeyedHash && handed != 0) {
    die(c.name + ": " + std::to_string(handed) + " frames handed over, where each worker owns what its queue gets");
  }
  if (!rig.contexts_all_free()) die(c.name + ": parse contexts still held after every response");
  c.rate.push_back(static_cast<double>(run.requests) * 1e9 / static_cast<double>(worker_ns));
  c.baseline.push_back(static_cast<double>(run.requests) * 1e9 / static_cast<double>(baseline_ns));
  // Frames the engines handled, counted once each (a handed-over frame is
  // seen by the engine of its owner only).
  c.handed.push_back(service == 0 ? 0.0 : static_cast<double>(handed) / static_cast<double>(service));
}

}  // namespace

int run_workers(const WorkersRun& run) {
  const unsigned n = run.workers;
  if (rte_lcore_count() < n) die(std::to_string(n) + " workers need " + std::to_string(n) + " lcores");
  const size_t flow_slots = std::bit_ceil((run.flows + 1024) * 8 / 7 + 16);
  std::vector<Config> configs;
  configs.push_back(Config{"1 worker", std::make_unique<WorkerRig>(0, 1, Ownership::kSingle, flow_slots, run.contexts,
                                                                  run.chunk),
                           Ownership::kSingle});
  configs.push_back(Config{std::to_string(n) + " workers, owner = RSS queue",
                           std::make_unique<WorkerRig>(1, n, Ownership::kRssQueue, flow_slots, run.contexts, run.chunk),
                           Ownership::kRssQueue});
  configs.push_back(Config{std::to_string(n) + " workers, owner = keyed hash",
                           std::make_unique<WorkerRig>(2, n, Ownership::kKeyedHash, flow_slots, run.contexts, run.chunk),
                           Ownership::kKeyedHash});
  std::printf(
      "packet_rate --workers %u: the admitted pattern (%zu requests + responses per repetition on %zu flows),\n"
      "ring PMD ports with a queue pair per worker, frames on the queue symmetric RSS gives them,\n"
      "%zu requests per worker built (on its own lcore), then timed, at a time; %u repetitions\n",
      n, run.requests, run.flows, run.chunk, run.repetitions);
  std::fflush(stdout);
  for (Config& c : configs) handshake(*c.rig, run.flows, run.chunk);
  {
    Crew crew(n);
    for (unsigned rep = 0; rep < run.repetitions; ++rep) {
      for (Config& c : configs) repetition(crew, c, run);
    }
  }
  // Scaling is paired: each repetition's rate over the one-worker rate of
  // the same repetition (run just before it), then the median of those.
  auto scaling = [&](const Config& c) {
    std::vector<double> ratio;
    for (size_t i = 0; i < c.rate.size(); ++i) ratio.push_back(c.rate[i] / configs[0].rate[i]);
    return median(ratio);
  };
  std::printf("\n%-34s %12s %13s %12s %9s %12s %13s\n", "configuration", "requests/s", "(min-max)", "per worker",
              "scaling", "handed over", "harness req/s");
  for (const Config& c : configs) {
    const double r = median(c.rate);
    const unsigned w = c.rig->workers();
    const auto [lo, hi] = std::minmax_element(c.rate.begin(), c.rate.end());
    char range[40];
    std::snprintf(range, sizeof range, "(%.2f-%.2fM)", *lo / 1e6, *hi / 1e6);
    std::printf("%-34s %11.2fM %13s %11.2fM %8.2fx %11.1f%% %12.2fM\n", c.name.c_str(), r / 1e6, range, r / w / 1e6,
                scaling(c), 100.0 * median(c.handed), median(c.baseline) / 1e6);
  }
  std::printf(
      "\nMedians of %u repetitions; each repetition runs the three configurations in turn. 'scaling' is\n"
      "the median over repetitions of requests/s against the same repetition's one worker (paired, so\n"
      "drift between repetitions cancels); 'handed over' the share of service frames that reached a worker\n"
      "other than their flow's owner first; 'harness' the same frames moved through the same queues with\n"
      "no processing.\n",
      run.repetitions);
  return 0;
}

}  // namespace sluice::perf
