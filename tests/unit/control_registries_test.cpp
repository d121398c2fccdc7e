// The control plane's registries: live runs (TB01, TB11-TB13) and the
// credential-to-user map (RF04, RF05, RF10) as the workers see them through
// their lock-free maps, what is kept in the state directory, and that a
// refused change changes nothing.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <span>

#include "control/credential_registry.h"
#include "control/run_journal.h"
#include "control/run_registry.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

limiter::KeyHasher hasher() {
  std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 7 + 3);
  return limiter::KeyHasher(secret);
}

limiter::Digest digest_of(const limiter::KeyHasher& h, std::string_view s) {
  return h.digest(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

class TempDir : public ::testing::Test {
 protected:
  test::ScratchDir scratch_{"sluice-registry"};
  std::string dir_ = scratch_.path();
};

using RunRegistryTest = TempDir;

TEST_F(RunRegistryTest, TB01_TB13_StartAndEndAreWhatTheWorkersSee) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap runs(64);
  int graces = 0;
  RunJournal journal;
  ASSERT_EQ(journal.open(dir_).error, "");
  RunRegistry registry(runs, h, &journal, [&] { ++graces; });

  const RunRegistry::Result started = registry.start("run-a", 25, 1000);
  EXPECT_EQ(started.outcome, RunRegistry::Outcome::kStarted);
  EXPECT_EQ(runs.find(digest_of(h, "run-a")), std::optional<uint64_t>(25));
  EXPECT_EQ(graces, 1);  // visible to every worker before it returned
  EXPECT_EQ(registry.start("run-a", 25, 2000).outcome, RunRegistry::Outcome::kAlreadyLive);
  EXPECT_EQ(registry.start("run-a", 0, 3000).outcome, RunRegistry::Outcome::kBudgetChanged);
  EXPECT_EQ(runs.find(digest_of(h, "run-a")), std::optional<uint64_t>(0));
  ASSERT_EQ(registry.list().size(), 1u);
  EXPECT_EQ(registry.list()[0].started_unix, 1000);  // a budget change keeps the start

  EXPECT_EQ(registry.end("run-a").outcome, RunRegistry::Outcome::kEnded);
  EXPECT_FALSE(runs.find(digest_of(h, "run-a")).has_value());  // TB13
  EXPECT_EQ(registry.end("run-a").outcome, RunRegistry::Outcome::kNotLive);
  EXPECT_EQ(registry.size(), 0u);
}

TEST_F(RunRegistryTest, TB11_TwoRunsAreTwoEntries) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap runs(64);
  RunRegistry registry(runs, h, nullptr, [] {});
  ASSERT_TRUE(registry.start("run-a", 5, 1).ok());
  ASSERT_TRUE(registry.start("run-b", 0, 1).ok());
  EXPECT_EQ(runs.size(), 2u);
  EXPECT_EQ(registry.budget("run-a"), std::optional<uint32_t>(5));
  EXPECT_EQ(registry.budget("run-b"), std::optional<uint32_t>(0));
  EXPECT_FALSE(registry.budget("run-c").has_value());
}

TEST_F(RunRegistryTest, BadTokensAndAFullMapChangeNothing) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap runs(2);
  RunJournal journal;
  ASSERT_EQ(journal.open(dir_).error, "");
  RunRegistry registry(runs, h, &journal, [] {});
  EXPECT_EQ(registry.start("has/slash", 0, 1).outcome, RunRegistry::Outcome::kInvalidToken);
  EXPECT_EQ(registry.start("", 0, 1).outcome, RunRegistry::Outcome::kInvalidToken);
  size_t started = 0;
  for (int i = 0; i < 8; ++i) started += registry.start("run-" + std::to_string(i), 0, 1).ok();
  EXPECT_EQ(started, runs.capacity());
  EXPECT_EQ(registry.start("one-more", 0, 1).outcome, RunRegistry::Outcome::kFull);
  // The journal holds exactly what was accepted.
  RunJournal again;
  EXPECT_EQ(again.open(dir_).live.size(), started);
}

TEST_F(RunRegistryTest, ARestartRestoresTheLiveRunsFromTheJournal) {
  const limiter::KeyHasher h = hasher();
  {
    limiter::DigestMap runs(64);
    RunJournal journal;
    ASSERT_EQ(journal.open(dir_).error, "");
    RunRegistry registry(runs, h, &journal, [] {});
    ASSERT_TRUE(registry.start("kept", 7, 10).ok());
    ASSERT_TRUE(registry.start("ended", 0, 11).ok());
    ASSERT_TRUE(registry.end("ended").ok());
  }
  limiter::DigestMap runs(64);
  RunJournal journal;
  const RunJournal::Replay replay = journal.open(dir_);
  ASSERT_EQ(replay.error, "");
  RunRegistry registry(runs, h, &journal, [] {});
  EXPECT_TRUE(registry.restore(replay.live).empty());
  EXPECT_EQ(runs.find(digest_of(h, "kept")), std::optional<uint64_t>(7));
  EXPECT_FALSE(runs.find(digest_of(h, "ended")).has_value());
  ASSERT_EQ(registry.list().size(), 1u);
  EXPECT_EQ(registry.list()[0].started_unix, 10);
}

TEST_F(RunRegistryTest, AJournalThatCannotBeWrittenRefusesTheChange) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap runs(64);
  RunJournal journal;
  ASSERT_EQ(journal.open(dir_).error, "");
  RunRegistry registry(runs, h, &journal, [] {});
  ASSERT_TRUE(registry.start("live", 0, 1).ok());
  // A journal that cannot take the record (here: never opened) refuses the
  // start, and the run map is left as it was.
  RunJournal broken;
  RunRegistry unjournalled(runs, h, &broken, [] {});
  const RunRegistry::Result r = unjournalled.start("other", 0, 1);
  EXPECT_EQ(r.outcome, RunRegistry::Outcome::kJournalFailed);
  EXPECT_FALSE(runs.find(digest_of(h, "other")).has_value());
}

using CredentialRegistryTest = TempDir;

TEST_F(CredentialRegistryTest, RF04_CredentialsOfOneUserMapToOneUserId) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap users(64);
  CredentialRegistry registry(users, h, dir_, [] {});
  const limiter::Digest one = *registry.hash("Bearer alice-one");
  const limiter::Digest two = *registry.hash("Bearer alice-two");
  // TB05: the hash is of the credential as an authenticator reads it.
  EXPECT_EQ(*registry.hash("  bearer alice-one "), one);
  EXPECT_NE(one, two);
  const CredentialRegistry::Result loaded = registry.load_text(
      "# two of alice's\n" + digest_hex(one) + " alice\n" + digest_hex(two) + " alice\n", "in.txt");
  ASSERT_TRUE(loaded.ok) << loaded.message;
  EXPECT_EQ(loaded.added, 2u);
  EXPECT_EQ(users.find(one), std::optional<uint64_t>(CredentialRegistry::user_id("alice")));
  EXPECT_EQ(users.find(two), users.find(one));
  EXPECT_NE(CredentialRegistry::user_id("alice"), CredentialRegistry::user_id("bob"));
  EXPECT_EQ(registry.users().at("alice"), 2u);
}

TEST_F(CredentialRegistryTest, AddRemoveAndABrokenFileChangeExactlyWhatTheySay) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap users(64);
  int graces = 0;
  CredentialRegistry registry(users, h, dir_, [&] { ++graces; });
  const limiter::Digest a = *registry.hash("Bearer a");
  const limiter::Digest b = *registry.hash("Bearer b");
  ASSERT_TRUE(registry.add(a, "alice").ok);
  ASSERT_TRUE(registry.add(b, "bob").ok);
  EXPECT_GT(graces, 0);
  ASSERT_TRUE(registry.add(b, "alice").ok);  // moves to another user
  EXPECT_EQ(users.find(b), std::optional<uint64_t>(CredentialRegistry::user_id("alice")));
  ASSERT_TRUE(registry.remove(a).ok);
  EXPECT_FALSE(users.find(a).has_value());  // RF10: unknown from now on
  const CredentialRegistry::Result missing = registry.remove(a);
  EXPECT_FALSE(missing.ok);
  EXPECT_EQ(missing.failure, CredentialRegistry::Failure::kNotFound);

  const CredentialRegistry::Result bad = registry.load_text(digest_hex(a) + " carol\nnot-a-hash dave\n", "bad.txt");
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.failure, CredentialRegistry::Failure::kInvalidFile);
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(bad.errors[0].find("bad.txt:2:1: "), std::string::npos) << bad.errors[0];
  EXPECT_FALSE(users.find(a).has_value());  // nothing of the file applied
  EXPECT_EQ(registry.summary().credentials, 1u);
}

TEST_F(CredentialRegistryTest, TheMapIsKeptInTheStateDirectoryAndRestored) {
  const limiter::KeyHasher h = hasher();
  limiter::Digest a{}, b{};
  {
    limiter::DigestMap users(64);
    CredentialRegistry registry(users, h, dir_, [] {});
    a = *registry.hash("Bearer a");
    b = *registry.hash("Bearer b");
    ASSERT_TRUE(registry.add(a, "alice").ok);
    ASSERT_TRUE(registry.add(b, "bob").ok);
    ASSERT_TRUE(registry.remove(b).ok);
  }
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/credentials").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  limiter::DigestMap users(64);
  CredentialRegistry registry(users, h, dir_, [] {});
  EXPECT_TRUE(registry.restore().empty());
  EXPECT_EQ(users.find(a), std::optional<uint64_t>(CredentialRegistry::user_id("alice")));
  EXPECT_FALSE(users.find(b).has_value());
}

TEST_F(CredentialRegistryTest, AStateDirectoryThatCannotBeWrittenRefusesTheChange) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap users(64);
  CredentialRegistry registry(users, h, dir_ + "/does-not-exist", [] {});
  const limiter::Digest a = *registry.hash("Bearer a");
  const CredentialRegistry::Result r = registry.add(a, "alice");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, CredentialRegistry::Failure::kUnsaved);
  EXPECT_FALSE(users.find(a).has_value());
}

TEST_F(CredentialRegistryTest, MoreCredentialsThanTheMapHoldsAreRefusedWhole) {
  const limiter::KeyHasher h = hasher();
  limiter::DigestMap users(4);
  CredentialRegistry registry(users, h, dir_, [] {});
  std::string many;
  for (int i = 0; i < 40; ++i) many += digest_hex(*registry.hash("Bearer k" + std::to_string(i))) + " u" + std::to_string(i) + "\n";
  const CredentialRegistry::Result r = registry.load_text(many, "many.txt");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failure, CredentialRegistry::Failure::kFull);
  EXPECT_EQ(users.size(), 0u);
}

}  // namespace
}  // namespace sluice::control
