// See reclaimer.h. One region per table per step keeps each pause of new
// keys (the region is closed for two grace periods) short and spreads the
// work over the sweep.
#include "control/reclaimer.h"

#include <algorithm>
#include <memory>
#include <thread>

namespace sluice::control {

Reclaimer::Reclaimer(std::vector<Table> tables, std::function<void()> wait_for_readers)
    : tables_(std::move(tables)),
      wait_for_readers_(std::move(wait_for_readers)),
      next_region_(tables_.size(), 0),
      freed_(std::make_unique<std::atomic<uint64_t>[]>(tables_.size())) {}

size_t Reclaimer::step() {
  size_t freed = 0;
  std::vector<unsigned> closed(tables_.size());
  // Both grace periods are shared by every table of the step.
  for (size_t i = 0; i < tables_.size(); ++i) {
    closed[i] = next_region_[i];
    tables_[i].table->close_region(closed[i]);
  }
  wait_for_readers_();
  for (size_t i = 0; i < tables_.size(); ++i) {
    const size_t n = tables_[i].table->retire_idle(closed[i], tables_[i].idle());
    freed_[i].fetch_add(n, std::memory_order_relaxed);
    freed += n;
    if (tables_[i].visited) tables_[i].visited(closed[i]);
  }
  wait_for_readers_();
  bool wrapped = false;
  for (size_t i = 0; i < tables_.size(); ++i) {
    tables_[i].table->open_region(closed[i]);
    next_region_[i] = (closed[i] + 1) % tables_[i].table->regions();
    wrapped = wrapped || next_region_[i] == 0;
  }
  if (wrapped) sweeps_.fetch_add(1, std::memory_order_relaxed);
  return freed;
}

void Reclaimer::serve(const std::atomic<bool>& stop, std::chrono::milliseconds sweep) {
  unsigned regions = 1;
  for (const Table& t : tables_) regions = std::max(regions, t.table->regions());
  const auto pause = std::max(std::chrono::milliseconds(1), sweep / regions);
  while (!stop.load(std::memory_order_relaxed)) {
    (void)step();
    // Short sleeps, so a stop is noticed within 100 ms whatever the sweep.
    for (auto left = pause; left.count() > 0 && !stop.load(std::memory_order_relaxed);
         left -= std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(100)));
    }
  }
}

}  // namespace sluice::control
