// Idle-bucket reclamation, driven from the control plane (design decision
// 4; RF08's 10 minutes, TB07's quiet slots): walks the shared tables region
// by region, each step the bucket table's close / grace / retire idle /
// grace / open sequence, so memory stays bounded under a flood of random
// keys and a slot is reused only after every worker has stopped looking at
// it. Runs on its own thread, never on a worker lcore.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "limiter/bucket_table.h"

namespace sluice::control {

class Reclaimer {
 public:
  struct Table {
    std::string name;
    limiter::BucketTable* table;
    // Asked once per step for the predicate to retire with, so it follows
    // the policy published now (and the clock).
    std::function<limiter::BucketTable::IdlePredicate()> idle;
    // Told of each region once it has been reclaimed (optional): where the
    // bucket snapshot reads it, while it is warm in the cache.
    std::function<void(unsigned region)> visited = {};
  };

  Reclaimer(std::vector<Table> tables, std::function<void()> wait_for_readers);

  // One region of every table; returns the slots freed.
  size_t step();
  // Steps until `stop`, so that every region of every table is visited once
  // per `sweep`.
  void serve(const std::atomic<bool>& stop, std::chrono::milliseconds sweep);

  // Slots freed since start, per table (in the order given). Any thread.
  [[nodiscard]] uint64_t freed(size_t table) const noexcept { return freed_[table].load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t sweeps() const noexcept { return sweeps_.load(std::memory_order_relaxed); }
  [[nodiscard]] const std::vector<Table>& tables() const noexcept { return tables_; }

 private:
  std::vector<Table> tables_;
  std::function<void()> wait_for_readers_;
  std::vector<unsigned> next_region_;
  std::unique_ptr<std::atomic<uint64_t>[]> freed_;
  std::atomic<uint64_t> sweeps_{0};
};

}  // namespace sluice::control
