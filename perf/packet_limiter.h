// The limiter as sluiced sets it up, for packet_rate's built-in policy
// (packet_wire.h's kPolicy): the policy compiled, the bucket and record
// tables, the run and credential maps, and the state the workers share.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "dataplane/policy_snapshot.h"
#include "http/http1_policy.h"
#include "limiter/decide.h"
#include "packet_wire.h"
#include "policy/policy_loader.h"

namespace sluice::perf {

class PacketLimiter {
 public:
  PacketLimiter() {
    bucket_hasher_ = std::make_unique<limiter::KeyHasher>(limiter::KeyHasher::random());
    credential_hasher_ = std::make_unique<limiter::KeyHasher>(limiter::KeyHasher::random());
    policy::LoadResult loaded = policy::load_policy_text(kPolicy, "packet-rate.yaml");
    std::vector<policy::PolicyError> errors = std::move(loaded.errors);
    std::optional<http::Http1Policy> compiled;
    if (loaded.policy) compiled = http::compile_http1_policy(*loaded.policy, *credential_hasher_, errors);
    if (!errors.empty() || !compiled) {
      for (const auto& e : errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
      die("the built-in policy does not load");
    }
    snap_ = std::make_unique<dataplane::PolicySnapshot>();
    snap_->policy = std::move(*compiled);
    for (uint16_t p : snap_->policy.source.service_ports) snap_->service_ports.set(p);
    buckets_ = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 1 << 16, .bucket_kinds = static_cast<uint16_t>(snap_->policy.buckets.size())});
    records_ = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 4096, .bucket_kinds = 1, .words = std::max(2u, (snap_->policy.max_slots + 1) & ~1u)});
    runs_ = std::make_unique<limiter::DigestMap>(1 << 10);
    users_ = std::make_unique<limiter::DigestMap>(1 << 10);
    state_ = std::make_unique<limiter::LimiterState>(
        limiter::LimiterState{*buckets_, *records_, *runs_, *users_, *bucket_hasher_, *credential_hasher_});
    published_.store(snap_.get());
  }
  PacketLimiter(const PacketLimiter&) = delete;
  PacketLimiter& operator=(const PacketLimiter&) = delete;

  [[nodiscard]] limiter::LimiterState& state() { return *state_; }
  [[nodiscard]] dataplane::PolicySnapshot& snapshot() { return *snap_; }
  [[nodiscard]] const dataplane::PolicySnapshot& snapshot() const { return *snap_; }
  // What the workers read the policy through.
  [[nodiscard]] const std::atomic<const dataplane::PolicySnapshot*>* published() const { return &published_; }

 private:
  std::unique_ptr<limiter::KeyHasher> bucket_hasher_, credential_hasher_;
  std::unique_ptr<dataplane::PolicySnapshot> snap_;
  std::unique_ptr<limiter::BucketTable> buckets_, records_;
  std::unique_ptr<limiter::DigestMap> runs_, users_;
  std::unique_ptr<limiter::LimiterState> state_;
  std::atomic<const dataplane::PolicySnapshot*> published_{nullptr};
};

}  // namespace sluice::perf
