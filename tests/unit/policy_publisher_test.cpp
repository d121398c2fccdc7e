// The policy publisher without an EAL (no RCU variable, so no grace period):
// which reloads it refuses and that a refused one changes nothing, that a
// bucket keeps its kind by name across reloads (its state in the shared table
// stays its own), and which retired snapshots collect() frees.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/policy_publisher.h"
#include "http/http1_policy.h"
#include "policy/policy_loader.h"

namespace sluice::control {
namespace {

using dataplane::PolicySnapshot;

const limiter::KeyHasher& hasher() {
  static const limiter::KeyHasher h = [] {
    std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 11 + 3);
    return limiter::KeyHasher(secret);
  }();
  return h;
}

// A policy named `name` with a bucket (and a rule using it) per entry of
// `buckets`, in that order, and `limits` as its limits section if not empty.
std::string policy_text(const std::string& name, const std::vector<std::string>& buckets,
                        const std::string& limits = "") {
  std::string t = "sluice: 1\nname: " + name + "\nservice_ports: [80]\n";
  if (!limits.empty()) t += "limits: " + limits + "\n";
  t += "buckets:\n";
  for (const std::string& b : buckets) t += "  " + b + ": { rate: 10/min, burst: 10 }\n";
  t += "rules:\n";
  for (const std::string& b : buckets) {
    t += "  - name: r-" + b + "\n    path: /" + b + "\n    key: client_ip\n    bucket: " + b + "\n";
  }
  return t;
}

std::unique_ptr<PolicySnapshot> snapshot(const std::string& text) {
  policy::LoadResult loaded = policy::load_policy_text(text, "test.yaml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << e.to_string();
  if (!loaded.policy) return nullptr;
  std::vector<policy::PolicyError> errors;
  auto compiled = http::compile_http1_policy(*loaded.policy, hasher(), errors);
  for (const auto& e : errors) ADD_FAILURE() << e.to_string();
  if (!compiled) return nullptr;
  auto s = std::make_unique<PolicySnapshot>();
  s->policy = std::move(*compiled);
  for (uint16_t p : s->policy.source.service_ports) s->service_ports.set(p);
  return s;
}

std::unique_ptr<PolicySnapshot> snapshot(const std::string& name, const std::vector<std::string>& buckets,
                                         const std::string& limits = "") {
  return snapshot(policy_text(name, buckets, limits));
}

// The kind the current policy gives bucket `name`, or -1.
int kind_of(const PolicyPublisher& p, const std::string& name) {
  const limiter::CompiledBucket* b = p.current()->policy.bucket_named(name);
  return b == nullptr ? -1 : b->index;
}

// Built for the default head limits (16 KiB, 100 fields) and three kinds.
constexpr PolicyPublisher::Limits kLimits{.max_head_bytes = 16 * 1024, .max_fields = 100, .max_slots = 64,
                                          .max_kinds = 3};

struct Publisher {
  std::atomic<const PolicySnapshot*> published{nullptr};
  PolicyPublisher publisher{published, nullptr, kLimits};
  Publisher() { publisher.start(snapshot("first", {"alpha", "beta"}), "first.yaml"); }
};

TEST(PolicyPublisher, StartPublishesTheFirstPolicyWithKindsByPosition) {
  Publisher p;
  const std::shared_ptr<const PolicySnapshot> cur = p.publisher.current();
  ASSERT_NE(cur, nullptr);
  EXPECT_EQ(p.published.load(), cur.get());
  EXPECT_EQ(cur->policy.source.name, "first");
  EXPECT_EQ(cur->generation, 0u);
  EXPECT_EQ(kind_of(p.publisher, "alpha"), 0);
  EXPECT_EQ(kind_of(p.publisher, "beta"), 1);
  EXPECT_EQ(p.publisher.held(), 1u);
  EXPECT_EQ(p.publisher.reloads(), 0u);
  EXPECT_EQ(p.publisher.file(), "first.yaml");
}

TEST(PolicyPublisher, ReloadKeepsEachBucketsKindByName) {
  Publisher p;
  const PolicySnapshot* first = p.published.load();
  // Reordered, with a new bucket first: the two that stay keep their kinds
  // (a position-based kind would hand alpha's counts to gamma).
  ASSERT_TRUE(p.publisher.reload(snapshot("second", {"gamma", "beta", "alpha"}), "second.yaml").empty());
  EXPECT_EQ(kind_of(p.publisher, "alpha"), 0);
  EXPECT_EQ(kind_of(p.publisher, "beta"), 1);
  EXPECT_EQ(kind_of(p.publisher, "gamma"), 2);
  const std::shared_ptr<const PolicySnapshot> cur = p.publisher.current();
  EXPECT_EQ(cur->policy.source.name, "second");
  EXPECT_EQ(cur->generation, 1u);
  EXPECT_EQ(p.published.load(), cur.get());
  EXPECT_NE(p.published.load(), first);
  EXPECT_EQ(p.publisher.file(), "second.yaml");
  EXPECT_EQ(p.publisher.reloads(), 1u);
  EXPECT_EQ(p.publisher.held(), 2u);  // the first is retired, not freed

  // A bucket that leaves and comes back gets its old kind again, and a
  // reload that drops buckets does not free their kinds for new names.
  ASSERT_TRUE(p.publisher.reload(snapshot("third", {"gamma"}), "third.yaml").empty());
  EXPECT_EQ(kind_of(p.publisher, "gamma"), 2);
  ASSERT_TRUE(p.publisher.reload(snapshot("fourth", {"beta", "alpha"}), "fourth.yaml").empty());
  EXPECT_EQ(kind_of(p.publisher, "beta"), 1);
  EXPECT_EQ(kind_of(p.publisher, "alpha"), 0);
  EXPECT_EQ(p.publisher.current()->generation, 3u);
}

// The counter slot the current policy gives rule `name`, or -1.
int slot_of(const PolicyPublisher& p, const std::string& name) {
  const limiter::CompiledRule* r = p.current()->policy.rule_named(name);
  return r == nullptr ? -1 : r->counter_slot;
}

// Per-rule counters by name. A reload that reorders rules, drops
// one or brings one back never hands one rule's counts to another.
TEST(PolicyPublisher, ReloadKeepsEachRulesCounterSlotByName) {
  Publisher p;
  EXPECT_EQ(slot_of(p.publisher, "r-alpha"), 0);
  EXPECT_EQ(slot_of(p.publisher, "r-beta"), 1);
  ASSERT_TRUE(p.publisher.reload(snapshot("second", {"gamma", "beta", "alpha"}), "second.yaml").empty());
  EXPECT_EQ(slot_of(p.publisher, "r-gamma"), 2);
  EXPECT_EQ(slot_of(p.publisher, "r-beta"), 1);
  EXPECT_EQ(slot_of(p.publisher, "r-alpha"), 0);
  ASSERT_TRUE(p.publisher.reload(snapshot("third", {"gamma"}), "third.yaml").empty());
  EXPECT_EQ(slot_of(p.publisher, "r-gamma"), 2);
  ASSERT_TRUE(p.publisher.reload(snapshot("fourth", {"beta", "alpha"}), "fourth.yaml").empty());
  EXPECT_EQ(slot_of(p.publisher, "r-alpha"), 0) << "a rule that comes back has its old slot";
}

TEST(PolicyPublisher, RuleNamesPastTheLastCounterSlotShareIt) {
  std::string t = "sluice: 1\nname: many\nservice_ports: [80]\nbuckets:\n  b: { rate: 10/min }\nrules:\n";
  for (int i = 0; i < 70; ++i) t += "  - name: r" + std::to_string(i) + "\n    path: /" + std::to_string(i) + "\n    key: client_ip\n    bucket: b\n";
  std::atomic<const PolicySnapshot*> published{nullptr};
  PolicyPublisher publisher{published, nullptr, kLimits};
  publisher.start(snapshot(t), "many.yaml");
  EXPECT_EQ(slot_of(publisher, "r0"), 0);
  EXPECT_EQ(slot_of(publisher, "r62"), 62);
  EXPECT_EQ(slot_of(publisher, "r63"), 63);
  EXPECT_EQ(slot_of(publisher, "r69"), 63);
}

// What a refused reload must leave as it was.
void expect_unchanged(const Publisher& p, const PolicySnapshot* published, uint64_t generation) {
  EXPECT_EQ(p.published.load(), published);
  EXPECT_EQ(p.publisher.current().get(), published);
  EXPECT_EQ(p.publisher.current()->generation, generation);
  EXPECT_EQ(p.publisher.held(), 1u);
  EXPECT_EQ(p.publisher.reloads(), 0u);
  EXPECT_EQ(p.publisher.file(), "first.yaml");
}

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(PolicyPublisher, RefusesLargerHeadsThanTheBuffersWereSizedForAndChangesNothing) {
  Publisher p;
  const PolicySnapshot* before = p.published.load();
  const std::vector<std::string> refused = p.publisher.reload(
      snapshot("bigger", {"alpha", "beta"}, "{ max_head_bytes: 32768, max_fields: 200 }"), "bigger.yaml");
  ASSERT_EQ(refused.size(), 2u);  // every reason, not only the first
  EXPECT_TRUE(any_contains(refused, "bigger.yaml: max_head_bytes 32768 is larger than the 16384")) << refused[0];
  EXPECT_TRUE(any_contains(refused, "max_fields 200 is larger than the 100")) << refused[1];
  expect_unchanged(p, before, 0);

  // At the limit exactly is fine, and takes the next generation: the refused
  // reload used none.
  ASSERT_TRUE(p.publisher.reload(snapshot("same", {"alpha"}, "{ max_head_bytes: 16384, max_fields: 100 }"), "same.yaml")
                  .empty());
  EXPECT_EQ(p.publisher.current()->generation, 1u);
}

TEST(PolicyPublisher, RefusesMoreBucketKindsThanTheTableHoldsAndChangesNothing) {
  Publisher p;
  const PolicySnapshot* before = p.published.load();
  // gamma would fit as kind 2, delta would be a fourth kind of a table of three.
  const std::vector<std::string> refused =
      p.publisher.reload(snapshot("wide", {"alpha", "gamma", "delta"}), "wide.yaml");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("wide.yaml: bucket delta would be bucket kind 4"), std::string::npos) << refused[0];
  EXPECT_NE(refused[0].find("holds 3"), std::string::npos) << refused[0];
  expect_unchanged(p, before, 0);
  EXPECT_EQ(kind_of(p.publisher, "alpha"), 0);
  EXPECT_EQ(kind_of(p.publisher, "beta"), 1);

  // The refused reload did not keep gamma's kind: delta, alone, takes it.
  ASSERT_TRUE(p.publisher.reload(snapshot("narrow", {"delta"}), "narrow.yaml").empty());
  EXPECT_EQ(kind_of(p.publisher, "delta"), 2);
  // And now the table is full for new names.
  EXPECT_FALSE(p.publisher.reload(snapshot("more", {"gamma"}), "more.yaml").empty());
  EXPECT_EQ(p.publisher.current()->policy.source.name, "narrow");
}

TEST(PolicyPublisher, CollectFreesExactlyTheRetiredSnapshotsOlderThanTheBound) {
  Publisher p;
  std::vector<std::weak_ptr<const PolicySnapshot>> gen{p.publisher.current()};
  for (const char* name : {"g1", "g2", "g3"}) {
    ASSERT_TRUE(p.publisher.reload(snapshot(name, {"alpha"}), std::string(name) + ".yaml").empty());
    gen.push_back(p.publisher.current());
  }
  ASSERT_EQ(gen.size(), 4u);
  for (size_t g = 0; g < gen.size(); ++g) EXPECT_EQ(gen[g].lock()->generation, g);
  EXPECT_EQ(p.publisher.held(), 4u);

  // 0: a worker that has not finished a cycle; nothing may go.
  EXPECT_EQ(p.publisher.collect(0), 0u);
  EXPECT_EQ(p.publisher.held(), 4u);
  // Generation 1 may still be in use: only 0 goes.
  EXPECT_EQ(p.publisher.collect(1), 1u);
  EXPECT_TRUE(gen[0].expired());
  EXPECT_FALSE(gen[1].expired());
  EXPECT_EQ(p.publisher.held(), 3u);
  EXPECT_EQ(p.publisher.collect(1), 0u);  // asking again frees nothing more
  // 3 is the current one: 1 and 2 go.
  EXPECT_EQ(p.publisher.collect(3), 2u);
  EXPECT_TRUE(gen[1].expired());
  EXPECT_TRUE(gen[2].expired());
  EXPECT_FALSE(gen[3].expired());
  EXPECT_EQ(p.publisher.held(), 1u);
  // A bound past the current generation never frees the current one.
  EXPECT_EQ(p.publisher.collect(~uint64_t{0}), 0u);
  EXPECT_FALSE(gen[3].expired());
  EXPECT_EQ(p.publisher.held(), 1u);
  EXPECT_EQ(p.published.load(), gen[3].lock().get());
}

TEST(PolicyPublisher, CollectWithOnlyTheCurrentPolicyFreesNothing) {
  Publisher p;
  const std::weak_ptr<const PolicySnapshot> first = p.publisher.current();
  EXPECT_EQ(p.publisher.collect(~uint64_t{0}), 0u);
  EXPECT_FALSE(first.expired());
  EXPECT_EQ(p.publisher.held(), 1u);
}

TEST(PolicyPublisher, ASnapshotHeldThroughCurrentOutlivesItsCollection) {
  Publisher p;
  // A control command reading the policy while a reload and a collection
  // happen under it.
  std::shared_ptr<const PolicySnapshot> reader = p.publisher.current();
  const std::weak_ptr<const PolicySnapshot> watch = reader;
  ASSERT_TRUE(p.publisher.reload(snapshot("second", {"alpha"}), "second.yaml").empty());
  EXPECT_EQ(p.publisher.collect(~uint64_t{0}), 1u);
  EXPECT_EQ(p.publisher.held(), 1u);  // no longer the publisher's
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(reader->policy.source.name, "first");
  EXPECT_EQ(reader->generation, 0u);
  EXPECT_NE(reader->policy.bucket_named("beta"), nullptr);
  reader.reset();
  EXPECT_TRUE(watch.expired());  // freed with its last holder
}

}  // namespace
}  // namespace sluice::control
