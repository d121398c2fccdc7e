// packet_rate: frames per second through one real worker loop
// (sluice::dataplane::Worker::poll_once()), without a NIC or the kernel.
//
// The EAL runs without huge pages, shared config, PCI or telemetry; the two
// ports are made of rte_rings with rte_eth_from_rings() (the net_ring PMD), so
// nothing touches a network. The worker runs on the main lcore and this
// program calls poll_once() itself. It owns the rings' other ends: it puts
// pre-built frames into each port's receive ring, lets the worker poll, and
// takes (and frees) whatever the worker transmitted from each port's transmit
// ring.
//
// Scenarios:
//   bridged   UDP, ICMP echo, and TCP to a port that is not a service port
//             (60-66 bytes), on both ports: forwarded untouched.
//   admitted  4096 established flows (--flows; handshakes run through the
//             worker first, untimed), one 87-byte curl GET per packet, each
//             admitted by a budget of a billion a second, and the origin's
//             149-byte response to each in the same poll, so no flow ever has
//             more than one request outstanding. Counted per request (each
//             with its response) and per frame.
//   fields    inserting the RateLimit fields: the admitted pattern on two sets of flows
//             (at most half as many as contexts: an edited flow keeps its
//             context until its next request acknowledges the edit),
//             alternately with the RateLimit fields inserted into each
//             response (written again, the flow shifted from then on, the
//             client's acknowledgements shifted back) and with insertion off;
//             the two rows compare them in one run.
//   syn       the SYN proxy's cost (the policy's syn_proxy turned
//             on for it): a fresh batch of client SYNs per repetition, each
//             answered with a cookie SYN-ACK (cookies sent per second), then
//             the clients' ACKs carrying those cookies (computed here with
//             the worker's keys), each validated, a flow created and a SYN
//             sent to the origin (cookies validated per second; `binding:
//             immediate`, the path of a flow that finds no bind stash free).
//   refused   a fresh batch of flows per repetition (the same ports with new
//             sequence numbers; handshakes untimed), one GET per flow, each
//             refused by a budget spent beforehand: the worker drops the
//             request and sends a 429 with FIN to the client and a RST to the
//             origin. Every answered flow keeps a parse context until it
//             expires, so the worker gets one context per refused flow.
//
// What is timed: enqueueing a burst (32) per port into the receive rings,
// poll_once(), and draining and freeing what the worker sent, until the chunk
// is through. Frames are built into mbufs (write_segment(), checksums right,
// though the engine does not verify them) chunk by chunk, --chunk per port
// (default 1024), outside the timed region; the chunk is then still warm in
// cache, as frames are after a NIC's DMA with DDIO. A baseline pass in the
// same repetition moves the same frames through the same rings with
// rte_eth_rx_burst() / rte_eth_tx_burst() and no processing, so the reader
// sees the harness's own cost next to the worker's. Every repetition checks
// the worker's counters (every frame bridged, admitted or refused as meant,
// nothing dropped) and the program fails if they disagree; after the refused
// repetitions one more refusal is taken apart (429 + FIN in the flow's
// sequence space, RST at the request's first byte, checksums).
//
// Needs no huge pages and no network; about 1 GB of EAL memory is reserved
// and the worker's flow table and parse contexts take a few hundred MB.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/checksum.h"
#include "dataplane/frame.h"
#include "dataplane/policy_snapshot.h"
#include "dataplane/ports.h"
#include "dataplane/segment_writer.h"
#include "dataplane/syn_cookie.h"
#include "dataplane/syn_proxy.h"
#include "dataplane/worker.h"
#include "median.h"
#include "packet_limiter.h"
#include "packet_rate_workers.h"
#include "packet_wire.h"
#include "limiter/compiled_policy.h"
#include "limiter/decide.h"
#include "policy/policy_loader.h"
#include "time/clock.h"

namespace {

using namespace sluice;
using namespace sluice::dataplane;
using namespace sluice::perf;

// ---------------------------------------------------------------------------
// What goes on the wire: packet_wire.h.
size_t g_chunk = 1024;  // frames per port built, then timed, at a time (--chunk)

// The three bridged frames: UDP (60 bytes), ICMP echo (64), TCP ACK to 443 (66).
std::vector<std::vector<uint8_t>> bridged_templates() {
  auto ipv4 = [](std::vector<uint8_t>& f, uint8_t proto, size_t l4_len, uint32_t dst) {
    f.assign(kL2.to_origin, kL2.to_origin + 14);
    f.resize(14 + 20 + l4_len, 0);
    uint8_t* ip = f.data() + 14;
    ip[0] = 0x45;
    store16(ip + 2, static_cast<uint16_t>(20 + l4_len));
    store16(ip + 4, 0x1234);
    store16(ip + 6, 0x4000);
    ip[8] = 64;
    ip[9] = proto;
    store32(ip + 12, kAdmitNet + 7);
    store32(ip + 16, dst);
    set_ipv4_checksum(ip, 20);
    return f.data() + 34;
  };
  std::vector<std::vector<uint8_t>> t(3);
  uint8_t* udp = ipv4(t[0], 17, 8 + 18, 0xc6130035);
  store16(udp, 40000);
  store16(udp + 2, 53);
  store16(udp + 4, 8 + 18);  // checksum 0: none (IPv4)
  for (int i = 0; i < 18; ++i) udp[8 + i] = static_cast<uint8_t>('a' + i);
  uint8_t* icmp = ipv4(t[1], 1, 8 + 22, kOriginIp);
  icmp[0] = 8;  // echo request
  store16(icmp + 4, 0x4242);
  store16(icmp + 6, 1);
  for (int i = 0; i < 22; ++i) icmp[8 + i] = static_cast<uint8_t>(i);
  store16(icmp + 2, static_cast<uint16_t>(~checksum_fold(checksum_add(0, icmp, 8 + 22))));
  t[2].resize(128);
  t[2].resize(write_tcp(t[2].data(), t[2].size(),
                        Tcp{Side::kClient, kAdmitNet + 7, 40001, 443, 12345, 67890, tcp_flag::kAck, ""}));
  for (const auto& f : t) {
    const FrameView v = parse_frame(f);
    if (v.kind == FrameKind::kMalformed || v.kind == FrameKind::kNonIp) die("a bridged template does not parse");
  }
  return t;
}

// ---------------------------------------------------------------------------
// The rig: EAL objects, the limiter's state, the worker.

struct Options {
  unsigned repetitions = 5;
  size_t frames = 0;  // 0: each scenario's default
  size_t flows = 4096;
  size_t contexts = 2048;  // sluiced's default
  long cpu = -1;        // -1: the lcore may run on every CPU
  std::string scenario = "all";
  unsigned workers = 0;  // --workers: the multi-worker comparison instead of the scenarios
};

constexpr size_t kDefaultBridged = 1 << 20;
constexpr size_t kDefaultAdmitted = 1 << 18;  // requests (and as many responses)
constexpr size_t kDefaultRefused = 1 << 16;   // flows, one refused request each
constexpr size_t kDefaultSyn = 1 << 14;       // SYNs, then as many cookie ACKs
// The SYN cookies' keys: fixed, so the scenario computes the cookies the
// worker sends.
constexpr std::array<uint8_t, 32> kCookieSeed = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3,
                                                 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5};

using Clock = std::chrono::steady_clock;

class Rig {
 public:
  Rig(size_t flow_slots, size_t contexts) {
    frames_pool_ = rte_pktmbuf_pool_create("pr_frames", static_cast<unsigned>(std::max<size_t>(4 * g_chunk, 4096) - 1),
                                           256, 0, RTE_PKTMBUF_HEADROOM + 512, static_cast<int>(rte_socket_id()));
    worker_pool_ = rte_pktmbuf_pool_create("pr_worker", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                           static_cast<int>(rte_socket_id()));
    if (frames_pool_ == nullptr || worker_pool_ == nullptr) die(std::string("mempool: ") + rte_strerror(rte_errno));
    const char* names[2] = {"pr_client", "pr_origin"};
    for (int s = 0; s < 2; ++s) {
      rx_[s] = rte_ring_create((std::string(names[s]) + "_rx").c_str(), 1024, static_cast<int>(rte_socket_id()),
                               RING_F_SP_ENQ | RING_F_SC_DEQ);
      tx_[s] = rte_ring_create((std::string(names[s]) + "_tx").c_str(), 4096, static_cast<int>(rte_socket_id()),
                               RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (rx_[s] == nullptr || tx_[s] == nullptr) die(std::string("ring: ") + rte_strerror(rte_errno));
      const int id = rte_eth_from_rings(names[s], &rx_[s], 1, &tx_[s], 1, rte_socket_id());
      if (id < 0) die(std::string("rte_eth_from_rings: ") + rte_strerror(rte_errno));
      port_[s] = static_cast<uint16_t>(id);
      PortInfo info;
      const std::string err = start_port(port_[s], PortSetup{1, 1024, 1024}, frames_pool_, info);
      if (!err.empty()) die(err);
    }


    qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("pr_qsbr", rte_rcu_qsbr_get_memsize(1), RTE_CACHE_LINE_SIZE));
    if (qsbr_ == nullptr || rte_rcu_qsbr_init(qsbr_, 1) != 0) die("no memory for the RCU state");
    rte_rcu_qsbr_thread_register(qsbr_, 0);
    rte_rcu_qsbr_thread_online(qsbr_, 0);

    WorkerShared shared{limiter_.published(), qsbr_, {}, &stop_, &clock_};
    WorkerSetup ws;
    ws.index = 0;
    ws.workers = 1;
    ws.client_port = port_[0];
    ws.origin_port = port_[1];
    ws.pool = worker_pool_;
    ws.engine.flows = flow_slots;
    ws.engine.contexts = contexts;
    ws.engine.cookie_seed = kCookieSeed;
    ws.engine.max_head_bytes = limiter_.snapshot().policy.stream.head.max_head_bytes;
    ws.engine.max_fields = limiter_.snapshot().policy.stream.head.max_fields;
    // Plain forwarding, as the admitted and refused scenarios measure it;
    // the fields scenario turns insertion on and off itself.
    ws.engine.insert_fields = false;
    worker_ = std::make_unique<Worker>(ws, shared, limiter_.state(), counters_);
  }

  ~Rig() {
    worker_.reset();
    rte_rcu_qsbr_thread_offline(qsbr_, 0);
    rte_rcu_qsbr_thread_unregister(qsbr_, 0);
    rte_free(qsbr_);
    for (int s = 0; s < 2; ++s) {
      stop_port(port_[s]);
      rte_ring_free(rx_[s]);
      rte_ring_free(tx_[s]);
    }
    rte_mempool_free(frames_pool_);
    rte_mempool_free(worker_pool_);
  }

  // A fresh mbuf for a frame arriving on `side`, `len` bytes written by `write`.
  template <typename Write>
  void add(Side side, Write&& write) {
    rte_mbuf* m = rte_pktmbuf_alloc(frames_pool_);
    if (m == nullptr) die("the frame pool is empty");
    m->port = port_[static_cast<int>(side)];
    uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
    const size_t len = write(p, rte_pktmbuf_tailroom(m));
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    in_[static_cast<int>(side)].push_back(m);
  }
  void add_tcp(const Tcp& t) {
    add(t.from, [&](uint8_t* p, size_t room) { return write_tcp(p, room, t); });
  }
  void add_copy(Side side, const std::vector<uint8_t>& frame) {
    add(side, [&](uint8_t* p, size_t room) {
      if (frame.size() > room) die("a frame does not fit its buffer");
      std::memcpy(p, frame.data(), frame.size());
      return frame.size();
    });
  }
  [[nodiscard]] size_t pending() const { return in_[0].size() + in_[1].size(); }

  struct Pass {
    uint64_t ns = 0;
    uint64_t out[2] = {0, 0};  // frames taken from each port's transmit ring
  };

  // Moves the frames added since the last pass through the rings: each round
  // enqueues up to a burst per port, polls (the worker, or the bare bridge of
  // the baseline), and drains both transmit rings. Returns the time it took.
  Pass pass(bool worker) {
    Pass r;
    size_t next[2] = {0, 0};
    const size_t total[2] = {in_[0].size(), in_[1].size()};
    const auto t0 = Clock::now();
    while (next[0] < total[0] || next[1] < total[1]) {
      for (int s = 0; s < 2; ++s) {
        const size_t n = std::min<size_t>(kBurst, total[s] - next[s]);
        if (n != 0) {
          next[s] += rte_ring_sp_enqueue_burst(rx_[s], reinterpret_cast<void* const*>(in_[s].data() + next[s]),
                                               static_cast<unsigned>(n), nullptr);
        }
      }
      if (worker) {
        worker_->poll_once();
      } else {
        bridge_once();
      }
      drain(r);
    }
    // Whatever a port still holds (nothing, unless a ring filled).
    while (rte_ring_count(rx_[0]) != 0 || rte_ring_count(rx_[1]) != 0) {
      if (worker) {
        worker_->poll_once();
      } else {
        bridge_once();
      }
      drain(r);
    }
    r.ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    in_[0].clear();
    in_[1].clear();
    return r;
  }

  // Frees the frames added since the last pass, unsent (for a baseline that
  // is not wanted after all).
  void discard() {
    for (auto& v : in_) {
      rte_pktmbuf_free_bulk(v.data(), static_cast<unsigned>(v.size()));
      v.clear();
    }
  }

  // Called on every frame the worker sent, before it is freed (checks only:
  // never set while a pass is timed).
  std::function<void(Side, rte_mbuf*)> tap;

  [[nodiscard]] const WorkerCounters& counters() const { return counters_; }
  [[nodiscard]] const Worker& worker() const { return *worker_; }
  [[nodiscard]] Worker& worker() { return *worker_; }
  [[nodiscard]] const PolicySnapshot& snapshot() const { return limiter_.snapshot(); }
  // For the syn scenario: the worker reads the snapshot afresh every pass,
  // and only this thread runs it. Bound as the handshake completes, so that
  // every validated cookie takes the same path (with delayed binding the
  // first 256 would wait unbound, holding the worker's bind stashes, and
  // the rest be bound at once anyway).
  void set_syn_proxy(bool on) {
    limiter_.snapshot().policy.syn_proxy = on;
    limiter_.snapshot().policy.delayed_binding = false;
  }
  [[nodiscard]] time::Nanos now() { return clock_.now(); }

 private:
  void bridge_once() {
    rte_mbuf* burst[kBurst];
    for (int s = 0; s < 2; ++s) {
      const uint16_t n = rte_eth_rx_burst(port_[s], 0, burst, kBurst);
      if (n == 0) continue;
      const uint16_t sent = rte_eth_tx_burst(port_[1 - s], 0, burst, n);
      if (sent < n) rte_pktmbuf_free_bulk(burst + sent, n - sent);
    }
  }
  void drain(Pass& r) {
    void* out[64];
    for (int s = 0; s < 2; ++s) {
      for (;;) {
        const unsigned n = rte_ring_sc_dequeue_burst(tx_[s], out, 64, nullptr);
        if (n == 0) break;
        r.out[s] += n;
        if (tap) {
          for (unsigned i = 0; i < n; ++i) tap(static_cast<Side>(s), static_cast<rte_mbuf*>(out[i]));
        }
        rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(out), n);
      }
    }
  }

  rte_mempool* frames_pool_ = nullptr;
  rte_mempool* worker_pool_ = nullptr;
  rte_ring* rx_[2] = {};
  rte_ring* tx_[2] = {};
  uint16_t port_[2] = {};
  std::vector<rte_mbuf*> in_[2];

  PacketLimiter limiter_;
  std::atomic<bool> stop_{false};
  time::TscClock clock_;
  rte_rcu_qsbr* qsbr_ = nullptr;
  WorkerCounters counters_;
  std::unique_ptr<Worker> worker_;
};

// Counter snapshots, to check that every timed frame did what the scenario says.
#define PR_COUNTER_FIELD(name, help) uint64_t name;
struct Counts {
  SLUICE_WORKER_COUNTERS(PR_COUNTER_FIELD)
};
#undef PR_COUNTER_FIELD

Counts counts(const WorkerCounters& c) {
  Counts out{};
#define PR_COUNTER_COPY(name, help) out.name = c.name.get();
  SLUICE_WORKER_COUNTERS(PR_COUNTER_COPY)
#undef PR_COUNTER_COPY
  return out;
}

void expect(bool ok, const char* scenario, const std::string& what) {
  if (!ok) die(std::string(scenario) + ": " + what);
}

std::string num(uint64_t v) {
  return std::to_string(v);
}

// Runs `fill(first, count)` chunk by chunk (it adds frames to the rig), and
// passes each chunk through the worker; with `baseline`, fills the same chunk
// again and passes it through the bare bridge. Returns the summed times.
struct Timed {
  uint64_t worker_ns = 0, baseline_ns = 0;
  uint64_t out[2] = {0, 0};
};

Timed run_chunks(Rig& rig, size_t items, size_t chunk, const std::function<void(size_t, size_t)>& fill,
                 const std::function<void(size_t, size_t)>* baseline_fill) {
  Timed t;
  for (size_t first = 0; first < items; first += chunk) {
    const size_t n = std::min(chunk, items - first);
    fill(first, n);
    const Rig::Pass p = rig.pass(true);
    t.worker_ns += p.ns;
    t.out[0] += p.out[0];
    t.out[1] += p.out[1];
    if (baseline_fill != nullptr) {
      (*baseline_fill)(first, n);
      t.baseline_ns += rig.pass(false).ns;
    }
  }
  return t;
}

// Establishes flows [0, n) of `net`/`epoch`, untimed: SYN and SYN-ACK, then the ACK.
void handshake(Rig& rig, uint32_t net, size_t n, uint32_t epoch, uint16_t port_override = 0) {
  auto id = [&](size_t f) {
    FlowId i = flow_id(net, f, epoch);
    if (port_override != 0) i.client_port = port_override;
    return i;
  };
  const uint64_t established = rig.counters().flows_established.get();
  for (size_t first = 0; first < n; first += g_chunk) {
    const size_t m = std::min(g_chunk, n - first);
    for (size_t f = first; f < first + m; ++f) {
      const Handshake h = handshake_of(id(f));
      rig.add_tcp(h.syn);
      rig.add_tcp(h.syn_ack);
    }
    (void)rig.pass(true);
    for (size_t f = first; f < first + m; ++f) rig.add_tcp(handshake_of(id(f)).ack);
    (void)rig.pass(true);
  }
  expect(rig.counters().flows_established.get() - established == n, "handshake",
         num(rig.counters().flows_established.get() - established) + " of " + num(n) + " flows established");
}

// ---------------------------------------------------------------------------
// Results.

struct Row {
  std::string scenario;
  std::string per;                                 // what one rep holds
  std::string unit;                                // what is counted
  std::vector<double> worker_rate, baseline_rate;  // per second, one per repetition
};

void print_rows(const std::vector<Row>& rows, unsigned reps) {
  std::printf("\n%-9s %-30s %-22s %11s %13s %8s %12s %8s %11s\n", "scenario", "per repetition", "counted",
              "worker Mpps", "(min-max)", "ns each", "harness Mpps", "ns each", "worker-only");
  for (const Row& r : rows) {
    const double w = median(r.worker_rate), b = median(r.baseline_rate);
    const auto [lo, hi] = std::minmax_element(r.worker_rate.begin(), r.worker_rate.end());
    char range[32];
    std::snprintf(range, sizeof range, "(%.2f-%.2f)", *lo / 1e6, *hi / 1e6);
    std::printf("%-9s %-30s %-22s %11.2f %13s %8.1f %12.2f %8.1f %8.1f ns\n", r.scenario.c_str(), r.per.c_str(),
                r.unit.c_str(), w / 1e6, range, 1e9 / w, b / 1e6, 1e9 / b, 1e9 / w - 1e9 / b);
  }
  std::printf(
      "\nMedians of %u repetitions, one worker on the main lcore. 'harness' is the same frames moved\n"
      "through the same rings by rte_eth_rx_burst/rte_eth_tx_burst with no processing (enqueue, poll,\n"
      "drain, free); 'worker-only' is the difference of the two medians, ns per counted unit.\n",
      reps);
}

// ---------------------------------------------------------------------------
// The scenarios.

Row bridged(Rig& rig, const Options& o) {
  const size_t frames = o.frames != 0 ? o.frames : kDefaultBridged;
  const auto templates = bridged_templates();
  // Frame i goes to the client port if its chunk-relative burst is even, to
  // the origin port otherwise: both ports busy, three kinds in turn.
  auto fill = [&](size_t first, size_t n) {
    for (size_t i = first; i < first + n; ++i) {
      rig.add_copy((i / kBurst) % 2 ? Side::kOrigin : Side::kClient, templates[i % 3]);
    }
  };
  const std::function<void(size_t, size_t)> f = fill;
  Row row{"bridged", num(frames) + " frames", "frames/s", {}, {}};
  for (unsigned rep = 0; rep < o.repetitions; ++rep) {
    const Counts before = counts(rig.counters());
    const Timed t = run_chunks(rig, frames, 2 * g_chunk, f, &f);
    const Counts after = counts(rig.counters());
    const uint64_t bridged =
        (after.bridged_ip_other - before.bridged_ip_other) + (after.bridged_tcp_other - before.bridged_tcp_other);
    expect(bridged == frames, "bridged", "bridged " + num(bridged) + " of " + num(frames));
    expect(t.out[0] + t.out[1] == frames, "bridged", "sent " + num(t.out[0] + t.out[1]) + " of " + num(frames));
    expect(after.tx_dropped == before.tx_dropped, "bridged", "frames dropped at transmit");
    row.worker_rate.push_back(static_cast<double>(frames) * 1e9 / static_cast<double>(t.worker_ns));
    row.baseline_rate.push_back(static_cast<double>(frames) * 1e9 / static_cast<double>(t.baseline_ns));
  }
  return row;
}

// Request k of the admitted pattern and its response (packet_wire.h).
void add_request_and_response(Rig& rig, uint32_t net, size_t flows, uint64_t k, uint32_t ack_extra_per_round) {
  const Exchange e = admitted_exchange(net, flows, k, ack_extra_per_round);
  rig.add_tcp(e.request);
  rig.add_tcp(e.response);
}

std::vector<Row> admitted(Rig& rig, const Options& o) {
  const size_t requests = o.frames != 0 ? o.frames : kDefaultAdmitted;
  const size_t flows = o.flows;
  handshake(rig, kAdmitNet, flows, 0);
  const Counts start = counts(rig.counters());
  uint64_t next_request = 0;  // across repetitions: sequence numbers run on
  // Request k goes on flow k % flows, the round-th on that flow; the origin's
  // response to it comes in the same poll, right after it.
  auto fill_from = [&](uint64_t base) {
    return [&rig, &flows, base](size_t first, size_t n) {
      for (size_t i = first; i < first + n; ++i) add_request_and_response(rig, kAdmitNet, flows, base + i, 0);
    };
  };
  Row req{"admitted", num(requests) + " requests + responses", "requests/s", {}, {}};
  Row all{"admitted", num(2 * requests) + " frames", "frames/s (req + resp)", {}, {}};
  for (unsigned rep = 0; rep < o.repetitions; ++rep) {
    const Counts before = counts(rig.counters());
    const std::function<void(size_t, size_t)> fill = fill_from(next_request);
    // The baseline's frames carry the same bytes; they only pass the rings.
    const Timed t = run_chunks(rig, requests, g_chunk, fill, &fill);
    next_request += requests;
    const Counts after = counts(rig.counters());
    expect(after.admitted - before.admitted == requests, "admitted",
           "admitted " + num(after.admitted - before.admitted) + " of " + num(requests));
    expect(t.out[0] == requests && t.out[1] == requests, "admitted",
           "forwarded " + num(t.out[1]) + " requests and " + num(t.out[0]) + " responses of " + num(requests));
    expect(after.backpressure == start.backpressure && after.out_of_order == start.out_of_order &&
               after.retransmits == start.retransmits && after.contexts_exhausted == start.contexts_exhausted,
           "admitted", "back-pressure, out-of-order, retransmits or no context: the harness is wrong");
    req.worker_rate.push_back(static_cast<double>(requests) * 1e9 / static_cast<double>(t.worker_ns));
    req.baseline_rate.push_back(static_cast<double>(requests) * 1e9 / static_cast<double>(t.baseline_ns));
    all.worker_rate.push_back(2.0 * static_cast<double>(requests) * 1e9 / static_cast<double>(t.worker_ns));
    all.baseline_rate.push_back(2.0 * static_cast<double>(requests) * 1e9 / static_cast<double>(t.baseline_ns));
  }
  expect(rig.worker().engine().contexts().free_count() == rig.worker().engine().contexts().size(), "admitted",
         "parse contexts still held after every response");
  return {req, all};
}

// The admitted pattern with field insertion off and on, alternating by
// repetition on two sets of flows. Each request acknowledges the responses
// before it in the client's numbers (past every byte inserted so far), so
// an edit is acknowledged, and its flow's context returned, when the flow's
// next request comes: a flow holds its context between requests, so the
// scenario uses at most half as many flows as there are contexts.
std::vector<Row> fields(Rig& rig, const Options& o) {
  const size_t requests = o.frames != 0 ? o.frames : kDefaultAdmitted;
  const size_t flows = std::min(o.flows, rig.worker().engine().contexts().size() / 2);
  const uint32_t nets[2] = {kFieldsNet, kFieldsNet + 0x1000};  // insertion off, on
  handshake(rig, nets[0], flows, 0);
  handshake(rig, nets[1], flows, 0);
  uint64_t next_request[2] = {0, 0};
  auto fill_from = [&](uint64_t base, uint32_t net, bool insert) {
    // Past every byte inserted so far: at most kMaxInsertedFields a response.
    const uint32_t extra = insert ? static_cast<uint32_t>(dataplane::kMaxInsertedFields) : 0;
    return [&rig, flows, base, net, extra](size_t first, size_t n) {
      for (size_t i = first; i < first + n; ++i) add_request_and_response(rig, net, flows, base + i, extra);
    };
  };
  Row plain{"fields", num(requests) + " off (" + num(flows) + " flows)", "requests/s", {}, {}};
  Row with{"fields", num(requests) + " on: fields inserted", "requests/s", {}, {}};
  for (unsigned rep = 0; rep < 2 * o.repetitions; ++rep) {
    const bool insert = rep % 2 == 1;
    rig.worker().engine().set_insert_fields(insert);
    const Counts before = counts(rig.counters());
    const uint64_t inserted_before = rig.counters().fields_inserted.get();
    const std::function<void(size_t, size_t)> fill = fill_from(next_request[insert], nets[insert], insert);
    const Timed t = run_chunks(rig, requests, g_chunk, fill, &fill);
    next_request[insert] += requests;
    const Counts after = counts(rig.counters());
    expect(after.admitted - before.admitted == requests, "fields",
           "admitted " + num(after.admitted - before.admitted) + " of " + num(requests));
    expect(rig.counters().fields_inserted.get() - inserted_before == (insert ? requests : 0), "fields",
           "fields inserted into " + num(rig.counters().fields_inserted.get() - inserted_before) + " responses");
    expect(t.out[0] == requests && t.out[1] == requests, "fields",
           "sent " + num(t.out[0]) + " segments to clients and " + num(t.out[1]) + " to the origin");
    expect(after.contexts_exhausted == before.contexts_exhausted && after.out_of_order == before.out_of_order,
           "fields", "contexts exhausted or segments out of order: the harness is wrong");
    Row& row = insert ? with : plain;
    row.worker_rate.push_back(static_cast<double>(requests) * 1e9 / static_cast<double>(t.worker_ns));
    row.baseline_rate.push_back(static_cast<double>(requests) * 1e9 / static_cast<double>(t.baseline_ns));
  }
  rig.worker().engine().set_insert_fields(false);
  return {plain, with};
}

// One more refused request, untimed, on a fresh flow, with what the worker
// sends looked at: the 429 with FIN to the client right after the origin's
// SYN-ACK, acknowledging the request; the RST to the origin at the request's
// first byte; both with correct checksums.
void check_refusal(Rig& rig, uint32_t epoch) {
  handshake(rig, kRefuseNet, 1, epoch);
  const FlowId id = flow_id(kRefuseNet, 0, epoch);
  const uint32_t q = static_cast<uint32_t>(kRefuseHead.size());
  rig.add_tcp({Side::kClient, id.client_ip, id.client_port, kServicePort, id.client_isn + 1, id.origin_isn + 1,
               tcp_flag::kAck | tcp_flag::kPsh, kRefuseHead});
  int answers = 0, resets = 0;
  rig.tap = [&](Side to, rte_mbuf* m) {
    const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
    const FrameView v = parse_frame({p, rte_pktmbuf_data_len(m)});
    expect(v.kind == FrameKind::kTcp && tcp_checksum_ok(p, v) && ipv4_checksum_ok(p, v), "refused",
           "a frame the worker sent is not a TCP segment with right checksums");
    if (to == Side::kClient) {
      const std::string_view payload(reinterpret_cast<const char*>(p) + v.payload_offset, v.payload_len);
      expect(payload.starts_with("HTTP/1.1 429 ") && v.has(tcp_flag::kFin) && v.seq == id.origin_isn + 1 &&
                 v.ack == id.client_isn + 1 + q,
             "refused", "the answer to the client is not a 429 with FIN in the flow's sequence space");
      ++answers;
    } else {
      expect(v.has(tcp_flag::kRst) && v.seq == id.client_isn + 1, "refused",
             "the origin did not get a RST at the refused request's first byte");
      ++resets;
    }
  };
  (void)rig.pass(true);
  rig.tap = nullptr;
  expect(answers == 1 && resets == 1, "refused",
         "expected one answer and one reset, got " + num(answers) + " and " + num(resets));
}

Row refused(Rig& rig, const Options& o) {
  const size_t flows = o.frames != 0 ? o.frames : kDefaultRefused;
  // Spend each refused address's budget (one an hour) with one admitted
  // request on a flow of its own.
  {
    const Counts before = counts(rig.counters());
    handshake(rig, kRefuseNet, kAddresses, 0, kWarmupPort);
    for (uint32_t a = 0; a < kAddresses; ++a) {
      FlowId id = flow_id(kRefuseNet, a, 0);
      id.client_port = kWarmupPort;
      const uint32_t q = static_cast<uint32_t>(kRefuseHead.size());
      rig.add_tcp({Side::kClient, id.client_ip, id.client_port, kServicePort, id.client_isn + 1, id.origin_isn + 1,
                   tcp_flag::kAck | tcp_flag::kPsh, kRefuseHead});
      rig.add_tcp({Side::kOrigin, id.client_ip, id.client_port, kServicePort, id.origin_isn + 1, id.client_isn + 1 + q,
                   tcp_flag::kAck | tcp_flag::kPsh, kResponse});
    }
    (void)rig.pass(true);
    const Counts after = counts(rig.counters());
    expect(after.admitted - before.admitted == kAddresses, "refused", "the budget-spending requests were not admitted");
  }
  Row row{"refused", num(flows) + " flows, 1 request each", "refused requests/s", {}, {}};
  for (unsigned rep = 0; rep < o.repetitions; ++rep) {
    // A fresh batch: the same ports with new sequence numbers, so each SYN
    // replaces the flow the last repetition answered (and frees its context).
    const uint32_t epoch = rep + 1;
    handshake(rig, kRefuseNet, flows, epoch);
    const Counts before = counts(rig.counters());
    const std::function<void(size_t, size_t)> fill = [&](size_t first, size_t n) {
      for (size_t f = first; f < first + n; ++f) {
        const FlowId id = flow_id(kRefuseNet, f, epoch);
        rig.add_tcp({Side::kClient, id.client_ip, id.client_port, kServicePort, id.client_isn + 1, id.origin_isn + 1,
                     tcp_flag::kAck | tcp_flag::kPsh, kRefuseHead});
      }
    };
    const Timed t = run_chunks(rig, flows, g_chunk, fill, &fill);
    const Counts after = counts(rig.counters());
    expect(after.flows_established - before.flows_established == 0, "refused",
           "a flow was established in the timed part");
    expect(after.refused - before.refused == flows, "refused",
           "refused " + num(after.refused - before.refused) + " of " + num(flows) +
               " (contexts exhausted: " + num(after.contexts_exhausted - before.contexts_exhausted) + ")");
    expect(after.answers_sent - before.answers_sent == flows, "refused",
           "answers sent " + num(after.answers_sent - before.answers_sent));
    expect(t.out[0] == flows && t.out[1] == flows, "refused",
           "sent " + num(t.out[0]) + " answers and " + num(t.out[1]) + " resets for " + num(flows) + " requests");
    row.worker_rate.push_back(static_cast<double>(flows) * 1e9 / static_cast<double>(t.worker_ns));
    row.baseline_rate.push_back(static_cast<double>(flows) * 1e9 / static_cast<double>(t.baseline_ns));
  }
  check_refusal(rig, o.repetitions + 1);
  return row;
}

std::vector<Row> syn_cookies(Rig& rig, const Options& o) {
  const size_t n = o.frames != 0 ? o.frames : kDefaultSyn;
  rig.set_syn_proxy(true);
  const dataplane::SynCookies cookies(kCookieSeed);
  Row syn{"syn", num(n) + " SYNs", "cookies sent/s", {}, {}};
  Row ack{"syn", num(n) + " cookie ACKs", "cookies validated/s", {}, {}};
  // As write_tcp writes a client's segment: a timestamp, no other option.
  dataplane::TcpOptions options;
  options.has_timestamp = true;
  options.tsval = 1'000'000;
  for (unsigned rep = 0; rep < o.repetitions; ++rep) {
    const uint64_t base = uint64_t{rep} * n;  // new ports each repetition
    auto syns = [&](size_t first, size_t count) {
      for (size_t i = first; i < first + count; ++i) {
        const FlowId id = flow_id(kSynNet, base + i, 0);
        rig.add_tcp({Side::kClient, id.client_ip, id.client_port, kServicePort, id.client_isn, 0, tcp_flag::kSyn, ""});
      }
    };
    auto acks = [&](size_t first, size_t count) {
      const time::Nanos now = rig.now();
      for (size_t i = first; i < first + count; ++i) {
        const FlowId id = flow_id(kSynNet, base + i, 0);
        const dataplane::FlowKey key{net::IpAddress::v4(id.client_ip), net::IpAddress::v4(kOriginIp), id.client_port,
                                     kServicePort};
        const uint32_t cookie =
            cookies.offer(key, id.client_isn, options, dataplane::SynProxy::kClientWscale, now).isn;
        rig.add_tcp({Side::kClient, id.client_ip, id.client_port, kServicePort, id.client_isn + 1, cookie + 1,
                     tcp_flag::kAck, ""});
      }
    };
    const std::function<void(size_t, size_t)> fill_syns = syns, fill_acks = acks;
    Counts before = counts(rig.counters());
    const Timed s = run_chunks(rig, n, g_chunk, fill_syns, &fill_syns);
    Counts after = counts(rig.counters());
    expect(after.syn_cookies_sent - before.syn_cookies_sent == n && s.out[0] == n && s.out[1] == 0, "syn",
           "answered " + num(after.syn_cookies_sent - before.syn_cookies_sent) + " of " + num(n) + " SYNs, " +
               num(s.out[0]) + " SYN-ACKs sent, " + num(s.out[1]) + " frames to the origin");
    before = after;
    const Timed a = run_chunks(rig, n, g_chunk, fill_acks, &fill_acks);
    after = counts(rig.counters());
    expect(after.syn_cookies_validated - before.syn_cookies_validated == n && a.out[1] == n, "syn",
           "validated " + num(after.syn_cookies_validated - before.syn_cookies_validated) + " of " + num(n) +
               " cookies, " + num(a.out[1]) + " SYNs to the origin");
    syn.worker_rate.push_back(static_cast<double>(n) * 1e9 / static_cast<double>(s.worker_ns));
    syn.baseline_rate.push_back(static_cast<double>(n) * 1e9 / static_cast<double>(s.baseline_ns));
    ack.worker_rate.push_back(static_cast<double>(n) * 1e9 / static_cast<double>(a.worker_ns));
    ack.baseline_rate.push_back(static_cast<double>(n) * 1e9 / static_cast<double>(a.baseline_ns));
  }
  rig.set_syn_proxy(false);
  return {syn, ack};
}

// ---------------------------------------------------------------------------

const char kUsage[] =
    "usage: packet_rate [--repetitions N] [--frames N] [--scenario bridged|admitted|fields|refused|syn|all]\n"
    "                   [--flows N] [--contexts N] [--chunk N] [--cpu N] [--workers N]\n"
    "  --repetitions N  repetitions per scenario; medians are reported (default 5)\n"
    "  --frames N       per repetition: bridged frames (default 1048576), admitted requests, each with its\n"
    "                   response (default 262144), refused flows, one request each (default 65536),\n"
    "                   SYNs and as many cookie ACKs (default 16384)\n"
    "  --flows N        established flows the admitted requests are spread over (default 4096)\n"
    "  --contexts N     parse contexts of the worker (default 2048, as sluiced's)\n"
    "  --cpu N          pin the worker to CPU N (default: it may run on any)\n"
    "  --chunk N        frames per port built, then timed, at a time (default 1024; larger chunks are\n"
    "                   colder in cache when the worker reads them)\n"
    "  --scenario S     which to run (default all)\n"
    "  --workers N      instead of the scenarios: the admitted pattern through 1 worker, then N workers\n"
    "                   whose owner is the RSS queue, then N whose owner is a keyed hash, each worker on\n"
    "                   its own lcore (lcore i on CPU i modulo the CPUs); reports requests/s, per worker,\n"
    "                   the scaling against one worker and the share of frames handed over. --frames,\n"
    "                   --flows, --contexts and --repetitions apply; --chunk is requests per worker\n";

bool parse_size(const char* s, size_t& out, size_t lo, size_t hi) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  out = static_cast<size_t>(v);
  return true;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) die("'" + a + "' needs a value\n" + kUsage);
    const char* v = argv[++i];
    size_t n = 0;
    if (a == "--repetitions") {
      if (!parse_size(v, n, 1, 1000)) die("--repetitions wants 1 to 1000");
      o.repetitions = static_cast<unsigned>(n);
    } else if (a == "--frames") {
      if (!parse_size(v, o.frames, 1, size_t{1} << 28)) die("--frames wants 1 to 268435456");
    } else if (a == "--chunk") {
      if (!parse_size(v, g_chunk, kBurst, 8192)) die("--chunk wants 32 to 8192");
    } else if (a == "--cpu") {
      if (!parse_size(v, n, 0, 1023)) die("--cpu wants a CPU number");
      o.cpu = static_cast<long>(n);
    } else if (a == "--contexts") {
      if (!parse_size(v, o.contexts, 1, size_t{1} << 22)) die("--contexts wants 1 to 4194304");
    } else if (a == "--flows") {
      if (!parse_size(v, o.flows, 1, size_t{1} << 24)) die("--flows wants 1 to 16777216");
    } else if (a == "--workers") {
      if (!parse_size(v, n, 2, 64)) die("--workers wants 2 to 64");
      o.workers = static_cast<unsigned>(n);
    } else if (a == "--scenario") {
      o.scenario = v;
      if (o.scenario != "bridged" && o.scenario != "admitted" && o.scenario != "fields" && o.scenario != "refused" &&
          o.scenario != "syn" && o.scenario != "all") {
        die("--scenario wants bridged, admitted, fields, refused, syn or all");
      }
    } else {
      die("unknown option '" + a + "'\n" + kUsage);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  const bool run_bridged = o.scenario == "all" || o.scenario == "bridged";
  const bool run_admitted = o.scenario == "all" || o.scenario == "admitted";
  const bool run_refused = o.scenario == "all" || o.scenario == "refused";
  const bool run_fields = o.scenario == "all" || o.scenario == "fields";
  const bool run_syn = o.scenario == "all" || o.scenario == "syn";
  const size_t syn_flows = run_syn ? (o.frames != 0 ? o.frames : kDefaultSyn) * o.repetitions : 0;
  const size_t refused_flows = run_refused ? (o.frames != 0 ? o.frames : kDefaultRefused) : 0;
  if (refused_flows > (size_t{1} << 16) * kAddresses / 2) die("--frames: too many refused flows for the port range");

  // One lcore, allowed on every CPU (on a shared box the kernel places it
  // best), or pinned to --cpu.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string cpu_set =
      o.cpu >= 0 ? std::to_string(o.cpu) : "(0-" + std::to_string(cpus > 0 ? cpus - 1 : 0) + ")";
  std::vector<std::string> eal = {"packet_rate",
                                  "--no-huge",
                                  "--no-shconf",
                                  "--no-pci",
                                  "-m",
                                  "1024",
                                  "--no-telemetry",
                                  "--log-level=*:warning",
                                  "--lcores=0@" + cpu_set};
  if (o.workers != 0) {
    if (o.cpu >= 0) die("--cpu and --workers: the workers are pinned to CPUs 0, 1, ...");
    std::string lcores = "--lcores=";
    for (unsigned i = 0; i < o.workers; ++i) {
      lcores += (i ? "," : "") + std::to_string(i) + "@" + std::to_string(cpus > 0 ? i % cpus : 0);
    }
    eal.back() = lcores;
  }
  std::vector<char*> eal_argv;
  for (std::string& s : eal) eal_argv.push_back(s.data());
  eal_argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(eal_argv.size() - 1), eal_argv.data()) < 0) {
    die(std::string("DPDK would not start: ") + rte_strerror(rte_errno));
  }

  if (o.workers != 0) {
    WorkersRun run;
    run.workers = o.workers;
    run.repetitions = o.repetitions;
    if (o.frames != 0) run.requests = o.frames;
    run.flows = o.flows;
    run.contexts = o.contexts;
    run.chunk = g_chunk;
    const int rc = run_workers(run);
    rte_eal_cleanup();
    return rc;
  }

  // Flow slots for every flow any scenario keeps (7/8 of the table is usable),
  // and a parse context for every refused flow of one repetition: an answered
  // flow keeps its context until it expires or its ports are reused.
  const size_t live = (run_admitted ? o.flows : 0) + (run_fields ? 2 * o.flows : 0) +
                      (run_refused ? kAddresses + refused_flows : 0) + syn_flows + 1024;
  const size_t flow_slots = std::bit_ceil(live * 8 / 7 + 16);
  const size_t contexts = o.contexts;

  std::vector<Row> rows;
  {
    Rig rig(flow_slots, contexts);
    std::printf(
        "packet_rate: one worker, ring PMD ports, %u repetitions; frames built %zu per port at a time,\n"
        "outside the timed region; flow table %zu slots, %zu parse contexts\n",
        o.repetitions, g_chunk, flow_slots, contexts);
    std::fflush(stdout);
    if (run_bridged) rows.push_back(bridged(rig, o));
    if (run_admitted) {
      for (Row& r : admitted(rig, o)) rows.push_back(std::move(r));
    }
    if (run_fields) {
      for (Row& r : fields(rig, o)) rows.push_back(std::move(r));
    }
    if (run_refused) rows.push_back(refused(rig, o));
    if (run_syn) {
      for (Row& r : syn_cookies(rig, o)) rows.push_back(std::move(r));
    }
    const WorkerCounters& c = rig.counters();
    std::printf("worker counters: rx %" PRIu64 "/%" PRIu64 " tx %" PRIu64 "/%" PRIu64
                " (client/origin), admitted %" PRIu64 ", refused %" PRIu64 ", answers %" PRIu64 ", flows %" PRIu64
                " created, tx dropped %" PRIu64 "\n",
                c.rx_client.get(), c.rx_origin.get(), c.tx_client.get(), c.tx_origin.get(), c.admitted.get(),
                c.refused.get(), c.answers_sent.get(), c.flows_created.get(), c.tx_dropped.get());
  }
  print_rows(rows, o.repetitions);
  rte_eal_cleanup();
  return 0;
}
