// The state directory: made like mkdir -p, files in it replaced whole, and a
// secret that is never silently redrawn.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "control/state_dir.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

// A fresh directory under /tmp per test, removed afterwards.
class StateDirTest : public ::testing::Test {
 protected:
  test::ScratchDir scratch_{"sluice-state-dir-test"};
  std::string root_ = scratch_.path();

  static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void spit(const std::string& path, const std::string& bytes, mode_t mode) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }
  static mode_t mode_of(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(root_)) names.insert(e.path().filename().string());
    return names;
  }

};

TEST_F(StateDirTest, CreatesMissingDirectoryAndParents) {
  const mode_t old_umask = ::umask(022);
  const std::string dir = root_ + "/a/b/state";
  const std::string error = prepare_state_dir(dir + "/");
  ::umask(old_umask);
  ASSERT_EQ(error, "");
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(root_ + "/a"), 0755u);
  EXPECT_EQ(mode_of(root_ + "/a/b"), 0755u);
  EXPECT_EQ(prepare_state_dir(dir), "");  // and again, now that it exists
}

// An existing directory that others may read or enter is
// refused, with the reason and the fix, and left as it was.
TEST_F(StateDirTest, RefusesAnExistingDirectoryWithAWiderMode) {
  const std::string dir = root_ + "/state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0750), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  const std::string error = prepare_state_dir(dir);
  EXPECT_NE(error.find("has mode 0750; it must be 0700 (chmod 700 " + dir + ")"), std::string::npos) << error;
  EXPECT_EQ(mode_of(dir), 0750u);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_EQ(prepare_state_dir(dir), "");
}

TEST_F(StateDirTest, RefusesAnExistingDirectoryOfAnotherOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory away";
  const std::string dir = root_ + "/state";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  const std::string error = prepare_state_dir(dir);
  EXPECT_NE(error.find("is owned by uid 65534, not by uid 0"), std::string::npos) << error;
}

TEST_F(StateDirTest, RefusesWhatIsNotADirectory) {
  spit(root_ + "/file", "x", 0600);
  const std::string error = prepare_state_dir(root_ + "/file");
  EXPECT_NE(error.find("not a directory"), std::string::npos) << error;
  EXPECT_NE(prepare_state_dir(root_ + "/file/below"), "");
  EXPECT_NE(prepare_state_dir(""), "");
}

TEST_F(StateDirTest, RefusesAnUnwritableDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes everywhere";
  const std::string dir = root_ + "/ro";
  ASSERT_EQ(::mkdir(dir.c_str(), 0500), 0);
  const std::string error = prepare_state_dir(dir);
  EXPECT_NE(error.find("not writable"), std::string::npos) << error;
}

TEST_F(StateDirTest, AtomicWriteReplacesAndLeavesNoTmp) {
  ASSERT_EQ(write_file_atomically(root_, "f", "first"), "");
  EXPECT_EQ(slurp(root_ + "/f"), "first");
  EXPECT_EQ(mode_of(root_ + "/f"), 0600u);
  ASSERT_EQ(write_file_atomically(root_, "f", std::string_view("second\0x", 8)), "");
  EXPECT_EQ(slurp(root_ + "/f"), std::string("second\0x", 8));
  EXPECT_EQ(entries(), (std::set<std::string>{"f"}));
}

TEST_F(StateDirTest, AtomicWriteReplacesAStaleTmp) {
  spit(root_ + "/f.tmp", "left by a crash", 0644);
  ASSERT_EQ(write_file_atomically(root_, "f", "new"), "");
  EXPECT_EQ(slurp(root_ + "/f"), "new");
  EXPECT_EQ(mode_of(root_ + "/f"), 0600u);
  EXPECT_EQ(entries(), (std::set<std::string>{"f"}));
}

TEST_F(StateDirTest, FailedAtomicWriteLeavesTheOldFile) {
  ASSERT_EQ(write_file_atomically(root_, "f", "old"), "");
  // A directory where the tmp file goes: it cannot be removed or opened.
  ASSERT_EQ(::mkdir((root_ + "/f.tmp").c_str(), 0700), 0);
  spit(root_ + "/f.tmp/keep", "x", 0600);
  EXPECT_NE(write_file_atomically(root_, "f", "new"), "");
  EXPECT_EQ(slurp(root_ + "/f"), "old");

  EXPECT_NE(write_file_atomically(root_ + "/missing", "f", "new"), "");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/missing"));
  for (const char* bad : {"", ".", "..", "a/b"}) EXPECT_NE(write_file_atomically(root_, bad, "x"), "") << bad;
  EXPECT_NE(write_file_atomically("", "f", "x"), "");
}

TEST_F(StateDirTest, SecretIsCreatedThenReadBack) {
  const Secret made = load_or_create_secret(root_, "secret");
  ASSERT_EQ(made.error, "");
  EXPECT_TRUE(made.created);
  EXPECT_NE(made.bytes, (std::array<uint8_t, kSecretSize>{}));
  EXPECT_EQ(std::filesystem::file_size(root_ + "/secret"), kSecretSize);
  EXPECT_EQ(mode_of(root_ + "/secret"), 0600u);
  EXPECT_EQ(entries(), (std::set<std::string>{"secret"}));

  const Secret read = load_or_create_secret(root_, "secret");
  ASSERT_EQ(read.error, "");
  EXPECT_FALSE(read.created);
  EXPECT_EQ(read.bytes, made.bytes);
  const std::string on_disk = slurp(root_ + "/secret");
  EXPECT_EQ(on_disk, std::string(reinterpret_cast<const char*>(made.bytes.data()), made.bytes.size()));

  // Drawn, not fixed: another directory gets another secret.
  const std::string other = root_ + "/other";
  ASSERT_EQ(prepare_state_dir(other), "");
  const Secret second = load_or_create_secret(other, "secret");
  ASSERT_EQ(second.error, "");
  EXPECT_NE(second.bytes, made.bytes);
}

TEST_F(StateDirTest, SecretOfTheWrongSizeIsRefusedNotRedrawn) {
  for (const size_t size : {size_t{0}, size_t{100}, kSecretSize - 1, kSecretSize + 1}) {
    const std::string path = root_ + "/secret";
    spit(path, std::string(size, 'k'), 0600);
    const Secret s = load_or_create_secret(root_, "secret");
    EXPECT_NE(s.error.find(path), std::string::npos) << s.error;
    EXPECT_NE(s.error.find(" " + std::to_string(size) + " bytes"), std::string::npos) << s.error;
    EXPECT_FALSE(s.created);
    EXPECT_EQ(slurp(path), std::string(size, 'k'));
  }
}

TEST_F(StateDirTest, SecretReadableByOthersIsRefused) {
  ASSERT_EQ(load_or_create_secret(root_, "secret").error, "");
  for (const mode_t mode : {0644, 0640, 0604, 0660}) {
    ASSERT_EQ(::chmod((root_ + "/secret").c_str(), mode), 0);
    const Secret s = load_or_create_secret(root_, "secret");
    EXPECT_NE(s.error.find("chmod 600"), std::string::npos) << s.error;
    EXPECT_FALSE(s.created);
  }
  ASSERT_EQ(::chmod((root_ + "/secret").c_str(), 0400), 0);
  EXPECT_EQ(load_or_create_secret(root_, "secret").error, "");
}

TEST_F(StateDirTest, SecretThatIsNotAFileIsRefused) {
  ASSERT_EQ(::mkdir((root_ + "/secret").c_str(), 0700), 0);
  EXPECT_NE(load_or_create_secret(root_, "secret").error, "");
}

// A second sluiced on one state directory is refused, told who holds it;
// the lock goes with its holder.
TEST_F(StateDirTest, ASecondHolderOfTheDirectoryIsRefused) {
  std::string pid = std::to_string(::getpid());
  {
    StateDirLock first;
    ASSERT_EQ(first.acquire(root_), "");
    StateDirLock second;
    const std::string err = second.acquire(root_);
    EXPECT_NE(err.find("in use by another sluiced (pid " + pid + ")"), std::string::npos) << err;
  }
  StateDirLock again;
  EXPECT_EQ(again.acquire(root_), "");
}

}  // namespace
}  // namespace sluice::control
