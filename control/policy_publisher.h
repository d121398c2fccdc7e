// The policy the workers read, and how a new one replaces it: validated
// first (a file that does not load, or that needs more than the tables were
// built for, changes nothing), its buckets given the kinds their names had
// before (so a bucket that stays keeps its state in the shared table), then
// published by pointer swap, and the call returns only after an RCU grace
// period (rte_rcu_qsbr): every worker has then finished any loop pass that
// could have read the old pointer. The old snapshot is freed later, once no
// request parsed under it is in flight (collect()). Reloads come from the control socket and
// from SIGHUP; a mutex orders them (control plane only, never a worker).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dataplane/policy_snapshot.h"

struct rte_rcu_qsbr;

namespace sluice::control {

class PolicyPublisher {
 public:
  // What the tables and buffers were built for at start; a policy that needs
  // more is refused until a restart.
  struct Limits {
    uint32_t max_head_bytes = 0;
    uint16_t max_fields = 0;
    unsigned max_slots = 0;
    uint16_t max_kinds = 0;
  };

  PolicyPublisher(std::atomic<const dataplane::PolicySnapshot*>& published, rte_rcu_qsbr* qsbr, Limits limits);

  // The first policy: its buckets' kinds are their positions. Published at once.
  void start(std::unique_ptr<dataplane::PolicySnapshot> first, std::string file);

  // Publishes `next` (loaded from `file`) and waits for the workers to see
  // it. Returns the reasons it was refused; empty when done.
  [[nodiscard]] std::vector<std::string> reload(std::unique_ptr<dataplane::PolicySnapshot> next, std::string file);

  // The policy published last, and where it came from. Control plane only;
  // the pointer keeps the snapshot alive for as long as the caller holds it.
  [[nodiscard]] std::shared_ptr<const dataplane::PolicySnapshot> current() const;

  // Frees the retired snapshots older than `oldest_in_use`, the oldest
  // generation any worker may still read (the minimum the workers report).
  // Returns how many were freed.
  size_t collect(uint64_t oldest_in_use);
  // Snapshots held: the current one and the retired ones not yet freed.
  [[nodiscard]] size_t held() const;
  [[nodiscard]] std::string file() const;
  [[nodiscard]] uint64_t reloads() const;

 private:
  // Each rule's counter slot, by its name (limiter::CompiledRule::counter_slot).
  void give_counter_slots(limiter::CompiledPolicy& p);

  std::atomic<const dataplane::PolicySnapshot*>& published_;
  rte_rcu_qsbr* qsbr_;
  Limits limits_;
  mutable std::mutex mu_;
  std::map<std::string, uint16_t, std::less<>> kinds_;  // bucket name -> kind, for the life of the process
  std::map<std::string, uint8_t, std::less<>> rule_slots_;  // rule name -> counter slot, likewise
  // The current policy last, before it those retired and not yet freed: a
  // request that was mid-parse across the swap finishes under the policy it
  // started with (its parse context refers to that policy's field set), so a
  // retired snapshot lives until no worker reports its generation in use.
  std::vector<std::shared_ptr<const dataplane::PolicySnapshot>> snapshots_;
  std::string file_;
  uint64_t reloads_ = 0;
};

}  // namespace sluice::control
