// Limiter tables that outlive the process (control/table_file.h): a table
// written through one mapping is whole through the next; a file of other
// options, another layout, a damaged header or a foreign file is set aside
// with its reason and a new, empty table made; the kinds record survives a
// torn write through its second copy; and a table left in any state, a
// reclamation cut short or bytes of garbage, is made valid by recover()
// and then used without a crash.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "control/table_file.h"
#include "limiter/bucket_table.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

using limiter::BucketKey;
using limiter::BucketTable;

const BucketTable::Options kOptions{.capacity = 4096, .regions = 4, .max_probe = 32, .bucket_kinds = 4, .words = 2};

BucketKey key(uint64_t n, uint16_t kind) { return BucketKey{(uint64_t{1} << 63) | n, (n << 16) | kind}; }

// Writes `byte` at `offset` of `path`, as a stray write or a bit flip would.
void poke(const std::string& path, off_t offset, uint8_t byte) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, &byte, 1, offset), 1);
  ::close(fd);
}

TEST(TableFile, ATableWrittenThroughOneMappingIsWholeThroughTheNext) {
  test::ScratchDir dir;
  {
    TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 1);
    ASSERT_TRUE(o.file) << o.error;
    EXPECT_EQ(o.outcome, TableFile::Outcome::kCreated);
    EXPECT_EQ(o.file->generation(), 1u);
    BucketTable t(kOptions, o.file->slots());
    for (uint64_t n = 1; n <= 100; ++n) {
      const BucketTable::Found f = t.find_or_claim(key(n, n % 4));
      ASSERT_FALSE(f.overflow);
      f.slot->word(0).store(n * 10);
      f.slot->word(1).store(n * 10 + 1);
    }
    // The process ends here (the mapping and the table go, the file stays).
  }
  TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 2);
  ASSERT_TRUE(o.file) << o.error;
  EXPECT_EQ(o.outcome, TableFile::Outcome::kAttached);
  EXPECT_EQ(o.file->generation(), 2u);
  BucketTable t(kOptions, o.file->slots());
  EXPECT_EQ(t.recover(), 100u);
  EXPECT_EQ(t.live_as_of_reclaim(), 100u);
  for (uint64_t n = 1; n <= 100; ++n) {
    limiter::BucketSlot* s = t.find(key(n, n % 4));
    ASSERT_NE(s, nullptr) << n;
    EXPECT_EQ(s->load(0), n * 10);
    EXPECT_EQ(s->load(1), n * 10 + 1);
  }
  EXPECT_EQ(t.find(key(101, 1)), nullptr);
}

struct Rejected {
  const char* what;
  std::string why;  // a part of the note
  void (*spoil)(const std::string& path);
  BucketTable::Options reopen = kOptions;
};

TEST(TableFile, AFileItCannotUseIsSetAsideWithItsReasonAndANewTableMade) {
  const std::vector<Rejected> cases = {
      {"other options", "made for 4096 slots of 2 words (4 regions, probe 32, 4 kinds), this start asks for 8192 slots",
       [](const std::string&) {}, BucketTable::Options{.capacity = 8192, .regions = 4, .max_probe = 32,
                                                      .bucket_kinds = 4, .words = 2}},
      {"another layout", "layout 2, this sluiced reads layout 1", [](const std::string& p) { poke(p, 8, 2); }},
      {"a damaged header", "its header is damaged (checksum)", [](const std::string& p) { poke(p, 16, 2); }},
      {"a foreign file", "not a sluice table file", [](const std::string& p) { poke(p, 0, 'X'); }},
      {"a cut file", "its header says", [](const std::string& p) { std::filesystem::resize_file(p, 3 * 4096 * 8); }},
      {"a file too short for a header", "too short for a header",
       [](const std::string& p) { std::filesystem::resize_file(p, 10); }},
  };
  for (const Rejected& c : cases) {
    SCOPED_TRACE(c.what);
    test::ScratchDir dir;
    const std::string path = dir.path() + "/t.table";
    {
      TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 1);
      ASSERT_TRUE(o.file) << o.error;
      BucketTable t(kOptions, o.file->slots());
      (void)t.find_or_claim(key(7, 1));
    }
    c.spoil(path);
    TableFile::Opened o = TableFile::open(dir.path(), "t.table", c.reopen, 2);
    ASSERT_TRUE(o.file) << o.error;
    EXPECT_EQ(o.outcome, TableFile::Outcome::kSetAside);
    EXPECT_NE(o.note.find(c.why), std::string::npos) << o.note;
    EXPECT_NE(o.note.find(path + ".set-aside"), std::string::npos) << o.note;
    EXPECT_TRUE(std::filesystem::exists(path + ".set-aside"));
    BucketTable t(c.reopen, o.file->slots());
    EXPECT_EQ(t.recover(), 0u) << "a new table starts empty";
    EXPECT_EQ(o.file->generation(), 1u);
    // And the new one is re-attached next time.
    o.file.reset();
    TableFile::Opened again = TableFile::open(dir.path(), "t.table", c.reopen, 3);
    ASSERT_TRUE(again.file) << again.error;
    EXPECT_EQ(again.outcome, TableFile::Outcome::kAttached);
  }
}

TEST(TableFile, AnUnusableDirectoryIsAnErrorNotASilentFallback) {
  TableFile::Opened o = TableFile::open("/nonexistent-sluice-dir", "t.table", kOptions, 1);
  EXPECT_FALSE(o.file);
  EXPECT_NE(o.error.find("/nonexistent-sluice-dir/t.table"), std::string::npos) << o.error;
}

TEST(TableFile, TheKindsRecordSurvivesATornWriteThroughItsOtherCopy) {
  test::ScratchDir dir;
  const std::vector<BucketSnapshot::Kind> first = {{0, "alpha", 11}, {1, "beta", 22}};
  const std::vector<BucketSnapshot::Kind> second = {{0, "alpha", 11}, {1, "beta", 23}, {2, "gamma", 33}};
  {
    TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 1);
    ASSERT_TRUE(o.file);
    EXPECT_FALSE(o.file->kinds()) << "never recorded";
    ASSERT_TRUE(o.file->record_kinds(first));
    ASSERT_TRUE(o.file->record_kinds(second));
    EXPECT_FALSE(o.file->record_kinds({{0, std::string(80, 'x'), 1}})) << "a name too long to record";
    const auto k = o.file->kinds();
    ASSERT_TRUE(k);
    ASSERT_EQ(k->size(), 3u);
    EXPECT_EQ((*k)[2].name, "gamma");
    EXPECT_EQ((*k)[1].signature, 23u);
  }
  // The second record went to the second copy (page 1 holds the first copy,
  // 21 pages long). Damage it: the first record stands.
  const std::string path = dir.path() + "/t.table";
  poke(path, 4096 + 21 * 4096 + 16 + 5, 0xee);
  {
    TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 2);
    ASSERT_TRUE(o.file);
    const auto k = o.file->kinds();
    ASSERT_TRUE(k);
    ASSERT_EQ(k->size(), 2u);
    EXPECT_EQ((*k)[1].signature, 22u);
  }
  poke(path, 4096 + 16 + 5, 0xee);
  TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 3);
  ASSERT_TRUE(o.file);
  EXPECT_FALSE(o.file->kinds()) << "both copies damaged";
}

TEST(TableFile, RecoverFinishesAReclamationTheCrashCutShort) {
  test::ScratchDir dir;
  TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 1);
  ASSERT_TRUE(o.file);
  {
    BucketTable t(kOptions, o.file->slots());
    for (uint64_t n = 1; n <= 10; ++n) {
      const BucketTable::Found f = t.find_or_claim(key(n, 0));
      f.slot->word(0).store(n);
    }
    // Key 3 half frozen, key 4 wholly frozen, key 5 retired (a free mark
    // with frozen words): a reclamation killed between its steps.
    t.find(key(3, 0))->word(0).store(BucketTable::kFrozen);
    t.find(key(4, 0))->word(0).store(BucketTable::kFrozen);
    t.find(key(4, 0))->word(1).store(BucketTable::kFrozen);
    limiter::BucketSlot* five = t.find(key(5, 0));
    five->word(0).store(BucketTable::kFrozen);
    five->word(1).store(BucketTable::kFrozen);
    five->key[0] = 0;
    five->key[1] = 1;
    // An overflow bucket left frozen.
    t.overflow_slot(2).word(0).store(BucketTable::kFrozen);
  }
  BucketTable t(kOptions, o.file->slots());
  EXPECT_EQ(t.recover(), 7u);
  EXPECT_EQ(t.find(key(3, 0)), nullptr);
  EXPECT_EQ(t.find(key(4, 0)), nullptr);
  EXPECT_EQ(t.find(key(6, 0))->load(0), 6u) << "a live bucket past the released ones is still found";
  EXPECT_EQ(t.overflow_slot(2).load(0), 0u);
  // Released slots are claimed again, and nothing frozen is left.
  const BucketTable::Found f = t.find_or_claim(key(3, 0));
  EXPECT_FALSE(f.overflow);
  EXPECT_EQ(f.slot->load(0), 0u);
  EXPECT_EQ(f.slot->load(1), 0u);
}

TEST(TableFile, AnyBytesInTheSlotsAreMadeAValidTable) {
  // A mapping whose header is whole but whose slots are garbage (another
  // program's writes, a bad disk): recover() and then lookups, claims and
  // a reclamation pass, all within the table (the sanitizer builds check).
  test::ScratchDir dir;
  std::mt19937_64 rng(20261206);
  for (int round = 0; round < 20; ++round) {
    TableFile::Opened o = TableFile::open(dir.path(), "t.table", kOptions, 1);
    ASSERT_TRUE(o.file);
    const std::span<std::byte> bytes = o.file->slots();
    const int mode = round % 4;
    for (size_t i = 0; i < bytes.size(); i += 8) {
      uint64_t v = rng();
      if (mode == 1) v = (v & 3) == 0 ? BucketTable::kFrozen : v;                  // many frozen words
      if (mode == 2) v = (v & 1) != 0 ? 0 : v;                                      // half empty
      if (mode == 3) v = (v & 7) == 0 ? 1 : ((v & 7) == 1 ? 0 : v);                 // free marks
      std::memcpy(bytes.data() + i, &v, sizeof v);
    }
    BucketTable t(kOptions, bytes);
    const size_t live = t.recover();
    EXPECT_LE(live, t.capacity());
    EXPECT_EQ(t.live_as_of_reclaim(), live);
    for (int i = 0; i < 2000; ++i) {
      const BucketKey k = key(rng() >> 20, static_cast<uint16_t>(rng() % 8));
      const BucketTable::Found f = t.find_or_claim(k);
      ASSERT_NE(f.slot, nullptr);
      EXPECT_NE(f.slot->load(0), BucketTable::kFrozen);
    }
    for (unsigned r = 0; r < t.regions(); ++r) {
      t.close_region(r);
      (void)t.retire_idle(r, [](uint16_t, const uint64_t* w) { return (w[0] & 1) == 0; });
      t.open_region(r);
    }
    std::filesystem::remove(dir.path() + "/t.table");
  }
}

}  // namespace
}  // namespace sluice::control
