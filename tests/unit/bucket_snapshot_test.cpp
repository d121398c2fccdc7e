// Buckets that survive a restart: the snapshot's format round
// trips and refuses damage; restored slots keep their state under the kind
// their bucket's name has now; buckets whose limits changed, or that are
// gone, start full.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "control/bucket_snapshot.h"
#include "control/state_dir.h"
#include "http/http1_policy.h"
#include "policy/policy_loader.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

using limiter::BucketKey;
using limiter::BucketTable;

const limiter::KeyHasher& hasher() {
  static const limiter::KeyHasher h = [] {
    std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
    for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 5);
    return limiter::KeyHasher(secret);
  }();
  return h;
}

http::Http1Policy compiled(const std::string& buckets) {
  const std::string text = "sluice: 1\nname: p\nservice_ports: [80]\nbuckets:\n" + buckets +
                           "rules:\n  - name: r\n    key: client_ip\n    bucket: alpha\n";
  policy::LoadResult loaded = policy::load_policy_text(text, "p.yaml");
  for (const auto& e : loaded.errors) ADD_FAILURE() << e.to_string();
  std::vector<policy::PolicyError> errors;
  auto c = http::compile_http1_policy(*loaded.policy, hasher(), errors);
  for (const auto& e : errors) ADD_FAILURE() << e.to_string();
  return std::move(*c);
}

BucketKey key(uint64_t n, uint16_t kind) { return BucketKey{(uint64_t{1} << 63) | n, (n << 16) | kind}; }

TEST(BucketSnapshot, RoundTripsAndRefusesDamage) {
  BucketSnapshot s;
  s.taken_at = 1'800'000'000'000'000'000ull;
  s.words = 2;
  s.kinds = {{0, "alpha", 11}, {3, "beta", 22}};
  s.slots = {key(1, 0).k0, key(1, 0).k1, 100, 200, key(2, 3).k0, key(2, 3).k1, 300, 400};
  const std::string bytes = encode_bucket_snapshot(s);
  std::string error;
  const std::optional<BucketSnapshot> back = decode_bucket_snapshot(bytes, error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->taken_at, s.taken_at);
  EXPECT_EQ(back->words, 2u);
  ASSERT_EQ(back->kinds.size(), 2u);
  EXPECT_EQ(back->kinds[1].name, "beta");
  EXPECT_EQ(back->kinds[1].kind, 3);
  EXPECT_EQ(back->kinds[1].signature, 22u);
  EXPECT_EQ(back->slots, s.slots);

  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  EXPECT_FALSE(decode_bucket_snapshot(flipped, error));
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
  EXPECT_FALSE(decode_bucket_snapshot(bytes.substr(0, bytes.size() - 9), error));
  EXPECT_FALSE(decode_bucket_snapshot("SLUICE", error));
  EXPECT_FALSE(decode_bucket_snapshot(std::string(64, 'x'), error));
  EXPECT_EQ(error, "not a bucket snapshot");
}

TEST(BucketSnapshot, OnlyUnchangedBucketsAreRestoredUnderTheirKindsOfNow) {
  test::ScratchDir dir("sluice-snap");
  auto snapshot = std::make_shared<dataplane::PolicySnapshot>();
  snapshot->policy = compiled(
      "  alpha: { rate: 10/min, burst: 5 }\n  beta: { rate: 10/min, burst: 5 }\n  gone: { rate: 1/min }\n");
  const http::Http1Policy& before = snapshot->policy;
  BucketTable table({.capacity = 1 << 10, .regions = 4, .bucket_kinds = 8});
  const uint64_t state[2] = {123456789, 0};
  for (uint64_t n = 1; n <= 30; ++n) {
    ASSERT_TRUE(table.restore(key(n, static_cast<uint16_t>(n % 3)), state));  // alpha, beta, gone: kinds 0, 1, 2
  }
  BucketSnapshotter keeper(table, dir.path(), [&] { return snapshot; }, [] { return uint64_t{42}; });
  ASSERT_EQ(keeper.write_all(), "");
  EXPECT_EQ(keeper.slots_written(), 30u);

  // Now alpha is listed second (another kind), beta's burst changed, gone is gone.
  const http::Http1Policy after =
      compiled("  beta: { rate: 10/min, burst: 6 }\n  alpha: { rate: 10/min, burst: 5 }\n");
  const uint16_t alpha_now = after.bucket_named("alpha")->index;
  ASSERT_NE(alpha_now, before.bucket_named("alpha")->index);
  BucketTable fresh({.capacity = 1 << 10, .regions = 4, .bucket_kinds = 8});
  const BucketRestore r = restore_buckets(dir.path(), after, fresh);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.taken_at, 42u);
  EXPECT_EQ(r.restored, 10u);
  EXPECT_EQ(r.changed, 10u);
  EXPECT_EQ(r.gone, 10u);
  for (uint64_t n = 3; n <= 30; n += 3) {  // alpha's keys
    const limiter::BucketSlot* s = fresh.find(key(n, alpha_now));
    ASSERT_NE(s, nullptr) << n;
    EXPECT_EQ(s->load(0), 123456789u);
    EXPECT_EQ(fresh.find(key(n, 0)), nullptr);
  }
  EXPECT_EQ(fresh.count_live(), 10u);
}

// A snapshot written at a sweep's end is as old as the region copied first:
// what a restore from it may give back is measured from there, not from the
// write.
TEST(BucketSnapshot, ASnapshotIsAsOldAsItsOldestRegion) {
  test::ScratchDir dir("sluice-snap");
  auto snapshot = std::make_shared<dataplane::PolicySnapshot>();
  snapshot->policy = compiled("  alpha: { rate: 10/min, burst: 5 }\n");
  BucketTable table({.capacity = 1 << 10, .regions = 4, .bucket_kinds = 8});
  uint64_t clock = 1000;
  BucketSnapshotter keeper(table, dir.path(), [&] { return snapshot; }, [&] { return clock; });
  for (unsigned r = 0; r < 4; ++r) {
    keeper.region_visited(r);
    clock += 100;
  }
  ASSERT_EQ(keeper.write(), "");
  EXPECT_EQ(keeper.written_at(), 1000u);  // region 0's copy, not the write at 1400
  BucketTable fresh({.capacity = 1 << 10, .regions = 4, .bucket_kinds = 8});
  EXPECT_EQ(restore_buckets(dir.path(), snapshot->policy, fresh).taken_at, 1000u);

  keeper.region_visited(0);  // the next sweep has passed region 0 only: region 1 is now the oldest
  ASSERT_EQ(keeper.write(), "");
  EXPECT_EQ(keeper.written_at(), 1100u);
  ASSERT_EQ(keeper.write_all(), "");  // a clean stop: every region copied now
  EXPECT_EQ(keeper.written_at(), 1400u);
}

TEST(BucketSnapshot, ADamagedFileRestoresNothingAndSaysWhy) {
  test::ScratchDir dir("sluice-snap");
  ASSERT_EQ(write_file_atomically(dir.path(), std::string(kBucketSnapshotFile), "SLUICEBK garbage"), "");
  BucketTable table({.capacity = 1 << 10, .regions = 4, .bucket_kinds = 8});
  const BucketRestore r = restore_buckets(dir.path(), compiled("  alpha: { rate: 10/min }\n"), table);
  EXPECT_TRUE(r.found);
  EXPECT_NE(r.error.find("damaged"), std::string::npos) << r.error;
  EXPECT_EQ(table.count_live(), 0u);
  const BucketRestore none = restore_buckets(dir.path() + "/nothing", compiled("  alpha: { rate: 10/min }\n"), table);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.error, "");
}

}  // namespace
}  // namespace sluice::control
