// Publication order: kinds assigned and limits checked on the new snapshot
// while nobody can see it, then one release store, then the grace period.
#include "policy_publisher.h"

#include <rte_rcu_qsbr.h>

namespace sluice::control {

PolicyPublisher::PolicyPublisher(std::atomic<const dataplane::PolicySnapshot*>& published, rte_rcu_qsbr* qsbr,
                                 Limits limits)
    : published_(published), qsbr_(qsbr), limits_(limits) {}

void PolicyPublisher::start(std::unique_ptr<dataplane::PolicySnapshot> first, std::string file) {
  std::lock_guard lock(mu_);
  for (const auto& b : first->policy.buckets) kinds_.emplace(b.name, b.index);
  give_counter_slots(first->policy);
  published_.store(first.get(), std::memory_order_release);
  snapshots_.push_back(std::shared_ptr<const dataplane::PolicySnapshot>(std::move(first)));
  file_ = std::move(file);
}

std::vector<std::string> PolicyPublisher::reload(std::unique_ptr<dataplane::PolicySnapshot> next, std::string file) {
  std::lock_guard lock(mu_);
  std::vector<std::string> refused;
  const http::Http1Policy& p = next->policy;
  if (p.stream.head.max_head_bytes > limits_.max_head_bytes) {
    refused.push_back(file + ": max_head_bytes " + std::to_string(p.stream.head.max_head_bytes) +
                      " is larger than the " + std::to_string(limits_.max_head_bytes) +
                      " sluiced's buffers were sized for at start; restart to raise it");
  }
  if (p.stream.head.max_fields > limits_.max_fields) {
    refused.push_back(file + ": max_fields " + std::to_string(p.stream.head.max_fields) + " is larger than the " +
                      std::to_string(limits_.max_fields) + " sluiced was started with; restart to raise it");
  }
  if (p.max_slots > limits_.max_slots) {
    refused.push_back(file + ": a credential-slot ceiling of " + std::to_string(p.max_slots) + " is larger than the " +
                      std::to_string(limits_.max_slots) + " the slot table was built for; restart to raise it");
  }
  // Buckets keep the kind their name had; new names take new kinds.
  std::map<std::string, uint16_t, std::less<>> kinds = kinds_;
  for (auto& b : next->policy.buckets) {
    auto it = kinds.find(b.name);
    if (it == kinds.end()) {
      if (kinds.size() >= limits_.max_kinds) {
        refused.push_back(file + ": bucket " + b.name + " would be bucket kind " + std::to_string(kinds.size() + 1) +
                          " of this run; the table holds " + std::to_string(limits_.max_kinds) + "; restart to clear");
        continue;
      }
      it = kinds.emplace(b.name, static_cast<uint16_t>(kinds.size())).first;
    }
    b.index = it->second;
  }
  if (!refused.empty()) return refused;

  kinds_ = std::move(kinds);
  give_counter_slots(next->policy);
  next->generation = snapshots_.back()->generation + 1;
  published_.store(next.get(), std::memory_order_release);
  snapshots_.push_back(std::shared_ptr<const dataplane::PolicySnapshot>(std::move(next)));
  // Every worker that was in a loop pass holding the old pointer has left it.
  if (qsbr_ != nullptr) rte_rcu_qsbr_synchronize(qsbr_, RTE_QSBR_THRID_INVALID);
  file_ = std::move(file);
  ++reloads_;
  return {};
}

void PolicyPublisher::give_counter_slots(limiter::CompiledPolicy& p) {
  // A rule keeps the slot its name had; a new name takes the next slot
  // never given to another, or shares the last one once they are used up.
  for (limiter::CompiledRule& r : p.rules) {
    auto it = rule_slots_.find(r.name);
    if (it == rule_slots_.end()) {
      const size_t next = std::min(rule_slots_.size(), limiter::kRuleCounterSlots - 1);
      it = rule_slots_.emplace(r.name, static_cast<uint8_t>(next)).first;
    }
    r.counter_slot = it->second;
  }
}

std::shared_ptr<const dataplane::PolicySnapshot> PolicyPublisher::current() const {
  std::lock_guard lock(mu_);
  return snapshots_.back();
}

size_t PolicyPublisher::collect(uint64_t oldest_in_use) {
  std::lock_guard lock(mu_);
  // Workers read a snapshot only through the published pointer (gone for
  // every retired one after reload()'s grace period) and through parse
  // contexts, which the workers' reports cover.
  const size_t before = snapshots_.size();
  const std::shared_ptr<const dataplane::PolicySnapshot> current = snapshots_.back();
  std::erase_if(snapshots_, [&](const auto& s) { return s != current && s->generation < oldest_in_use; });
  return before - snapshots_.size();
}

size_t PolicyPublisher::held() const {
  std::lock_guard lock(mu_);
  return snapshots_.size();
}

std::string PolicyPublisher::file() const {
  std::lock_guard lock(mu_);
  return file_;
}

uint64_t PolicyPublisher::reloads() const {
  std::lock_guard lock(mu_);
  return reloads_;
}

}  // namespace sluice::control
