// The owners of what sluiced acquires at start-up (see sluiced_guards.h).
#include "sluiced_guards.h"

#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <utility>

namespace sluice::sluiced {

Eal::~Eal() {
  if (initialized_) rte_eal_cleanup();
}

bool Eal::init(std::vector<std::string> args) {
  if (initialized_) return true;
  args_ = std::move(args);
  std::vector<char*> argv;
  argv.reserve(args_.size() + 1);
  for (std::string& s : args_) argv.push_back(s.data());
  argv.push_back(nullptr);
  initialized_ = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data()) >= 0;
  return initialized_;
}

StartedPorts::~StartedPorts() {
  while (started_ > 0) dataplane::stop_port(ids_[--started_]);
}

std::string StartedPorts::start(uint16_t client, uint16_t origin, const dataplane::PortSetup& setup,
                                rte_mempool* pool) {
  ids_ = {client, origin};
  for (; started_ < ids_.size(); ++started_) {
    if (std::string err = dataplane::start_port(ids_[started_], setup, pool, info_[started_]); !err.empty()) {
      return err;
    }
  }
  if (setup.queues > 1 && info_[0].rss && info_[1].rss) {
    std::vector<uint16_t> table;
    rss_note_ = dataplane::align_redirection(ids_, setup.queues, table);
    if (rss_note_.empty()) {
      rss_.emplace(table);
    } else {
      info_[0].rss = info_[1].rss = false;
    }
  }
  return {};
}

HandOffRings::~HandOffRings() {
  for (auto r = rings_.rbegin(); r != rings_.rend(); ++r) rte_ring_free(*r);
}

bool HandOffRings::create(unsigned workers, unsigned size, int socket) {
  rings_.assign(workers, nullptr);
  if (workers == 1) return true;
  for (unsigned i = 0; i < workers; ++i) {
    rings_[i] = rte_ring_create(("sluice_inbox" + std::to_string(i)).c_str(), size, socket, RING_F_SC_DEQ);
    if (rings_[i] == nullptr) return false;
  }
  return true;
}

void LaunchedWorkers::launch(std::span<const std::unique_ptr<dataplane::Worker>> workers,
                             std::atomic<bool>& stop) noexcept {
  stop_ = &stop;
  unsigned lcore = rte_get_next_lcore(-1, 1, 0);
  for (const std::unique_ptr<dataplane::Worker>& w : workers) {
    rte_eal_remote_launch(
        [](void* worker) -> int {
          static_cast<dataplane::Worker*>(worker)->run();
          return 0;
        },
        w.get(), lcore);
    lcore = rte_get_next_lcore(lcore, 1, 0);
  }
}

void LaunchedWorkers::stop() noexcept {
  if (stop_ == nullptr) return;
  stop_->store(true, std::memory_order_relaxed);
  rte_eal_mp_wait_lcore();
  stop_ = nullptr;
}

void ServiceThread::start(std::atomic<bool>& stop, std::function<void()> serve) {
  stop_ = &stop;
  thread_ = std::thread(std::move(serve));
}

void ServiceThread::stop() noexcept {
  if (!thread_.joinable()) return;
  stop_->store(true, std::memory_order_relaxed);
  thread_.join();
}

TelemetryRegistration::~TelemetryRegistration() {
  if (registered_) control::unregister_telemetry();
}

std::string TelemetryRegistration::register_source(control::TelemetrySource source) {
  std::string err = control::register_telemetry(std::move(source));
  registered_ = err.empty();
  return err;
}

}  // namespace sluice::sluiced
