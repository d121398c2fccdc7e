// The owners of what sluiced acquires at start-up (the EAL, the packet
// buffers, the ports, the RCU variable, the hand-off rings, the worker
// lcores, the control-plane threads, the telemetry commands): each one
// releases what it holds exactly once, when it ends, so that every exit path
// of start-up and shutdown releases in reverse order of acquisition just by
// declaring the owners in acquisition order. An owner starts empty and is
// acquired by one call that says whether it worked; an empty owner releases
// nothing.
#pragma once

#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/telemetry.h"
#include "dataplane/ports.h"
#include "dataplane/worker.h"

struct rte_ring;

namespace sluice::sluiced {

// rte_eal_init .. rte_eal_cleanup.
class Eal {
 public:
  Eal() = default;
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;
  ~Eal();

  // `args` is the EAL's command line, the program name first; it is kept for
  // the EAL's life, since the EAL may keep pointers into it. false: rte_errno
  // says why.
  [[nodiscard]] bool init(std::vector<std::string> args);

 private:
  std::vector<std::string> args_;
  bool initialized_ = false;
};

struct MempoolFree {
  void operator()(rte_mempool* p) const noexcept { rte_mempool_free(p); }
};
using Mempool = std::unique_ptr<rte_mempool, MempoolFree>;

struct RteFree {
  void operator()(void* p) const noexcept { rte_free(p); }
};
using RcuVariable = std::unique_ptr<rte_rcu_qsbr, RteFree>;

// The client port and the origin port, configured and started; stopped and
// closed, the origin's first, when the object ends. A port that did not
// start is not stopped.
class StartedPorts {
 public:
  StartedPorts() = default;
  StartedPorts(const StartedPorts&) = delete;
  StartedPorts& operator=(const StartedPorts&) = delete;
  ~StartedPorts();

  // Starts the client port, then the origin port. "" or what went wrong.
  [[nodiscard]] std::string start(uint16_t client, uint16_t origin, const dataplane::PortSetup& setup,
                                  rte_mempool* pool);
  // Client first, then origin (what sluiced::DaemonView::ports expects).
  [[nodiscard]] const dataplane::PortInfo* info() const noexcept { return info_.data(); }
  // Where both ports spread flows with symmetric RSS over one redirection
  // table: which worker owns a flow. Null otherwise (the workers use the flow
  // hash), and rss_note() says why when RSS was there but the table could
  // not be aligned.
  [[nodiscard]] const dataplane::RssOwner* rss_owner() const noexcept { return rss_ ? &*rss_ : nullptr; }
  [[nodiscard]] const std::string& rss_note() const noexcept { return rss_note_; }
  [[nodiscard]] uint16_t client() const noexcept { return ids_[0]; }
  [[nodiscard]] uint16_t origin() const noexcept { return ids_[1]; }

 private:
  std::array<dataplane::PortInfo, 2> info_{};
  std::array<uint16_t, 2> ids_{};
  size_t started_ = 0;
  std::optional<dataplane::RssOwner> rss_;
  std::string rss_note_;
};

// One hand-off ring per worker (frames that reached a worker other than the
// flow's owner go to the owner through its ring). A single worker has no one
// to hand off to, so its one entry stays null.
class HandOffRings {
 public:
  HandOffRings() = default;
  HandOffRings(const HandOffRings&) = delete;
  HandOffRings& operator=(const HandOffRings&) = delete;
  ~HandOffRings();

  // false: no memory for one of them (those made are freed with the object).
  [[nodiscard]] bool create(unsigned workers, unsigned size, int socket);
  // One per worker, indexed by worker.
  [[nodiscard]] std::span<rte_ring* const> rings() const noexcept { return rings_; }

 private:
  std::vector<rte_ring*> rings_;
};

// The workers running on their lcores. When the object ends (or stop() is
// called) the stop flag is raised and every lcore is waited for, so no
// worker outlives what it reads.
class LaunchedWorkers {
 public:
  LaunchedWorkers() = default;
  LaunchedWorkers(const LaunchedWorkers&) = delete;
  LaunchedWorkers& operator=(const LaunchedWorkers&) = delete;
  ~LaunchedWorkers() { stop(); }

  // One worker on each worker lcore, in lcore order. `stop` is the flag the
  // workers poll; it must outlive this object.
  void launch(std::span<const std::unique_ptr<dataplane::Worker>> workers, std::atomic<bool>& stop) noexcept;
  void stop() noexcept;

 private:
  std::atomic<bool>* stop_ = nullptr;  // non-null while launched
};

// A control-plane thread that serves until the stop flag is raised. When the
// object ends (or stop() is called) the flag is raised and the thread joined.
class ServiceThread {
 public:
  ServiceThread() = default;
  ServiceThread(const ServiceThread&) = delete;
  ServiceThread& operator=(const ServiceThread&) = delete;
  ~ServiceThread() { stop(); }

  // Runs `serve`, which must return soon after `stop` is raised; `stop` must
  // outlive this object. Throws std::system_error if no thread can be had.
  void start(std::atomic<bool>& stop, std::function<void()> serve);
  void stop() noexcept;

 private:
  std::atomic<bool>* stop_ = nullptr;
  std::thread thread_;
};

// sluiced's commands on DPDK's telemetry socket, answering null again when
// the object ends: the source reads state the appliance owns, so it must go
// before that state does.
class TelemetryRegistration {
 public:
  TelemetryRegistration() = default;
  TelemetryRegistration(const TelemetryRegistration&) = delete;
  TelemetryRegistration& operator=(const TelemetryRegistration&) = delete;
  ~TelemetryRegistration();

  // "" or why not. Call after the EAL is up.
  [[nodiscard]] std::string register_source(control::TelemetrySource source);

 private:
  bool registered_ = false;
};

}  // namespace sluice::sluiced
