// A limiter table file (control/table_file.h) left in any state, re-attached:
// the input is a list of patches (offset, bytes) laid over a valid file, so
// that the header, the two copies of the kinds record and the slots are
// damaged in every way the fuzzer finds. Whatever the bytes, opening it
// either re-attaches it or sets it aside with a reason and makes a new one;
// never crashes. A re-attached table, after recover(), holds no frozen word,
// counts its live slots within its capacity, and is charged, looked up and
// reclaimed within its memory (ASan and UBSan watch).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "control/table_file.h"
#include "limiter/bucket_table.h"

namespace {

using sluice::control::TableFile;
using sluice::limiter::BucketKey;
using sluice::limiter::BucketTable;

const BucketTable::Options kOptions{.capacity = 256, .regions = 4, .max_probe = 16, .bucket_kinds = 4, .words = 2};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "table_file_fuzz: %s\n", what);
  std::abort();
}

void remove_files(const std::string& path) {
  (void)::unlink(path.c_str());
  (void)::unlink((path + ".set-aside").c_str());
  (void)::unlink((path + ".new").c_str());
}

// A directory of its own for the process, removed when it exits.
const std::string& scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sluice-table-fuzz-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) fail("mkdtemp");
    return std::string(tmpl);
  }();
  static const bool cleaned_at_exit = [] {
    return std::atexit([] {
      remove_files(dir + "/t.table");
      (void)::rmdir(dir.c_str());
    }) == 0;
  }();
  (void)cleaned_at_exit;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = scratch();
  const std::string path = dir + "/t.table";
  remove_files(path);
  {
    TableFile::Opened made = TableFile::open(dir, "t.table", kOptions, 1);
    if (!made.file) fail(made.error.c_str());
    if (!made.file->record_kinds({{0, "alpha", 1}, {1, "beta", 2}})) fail("record_kinds");
    BucketTable t(kOptions, made.file->slots());
    for (uint64_t n = 1; n <= 40; ++n) (void)t.find_or_claim(BucketKey{n << 8 | 1, (n << 16) | (n & 3)});
  }
  {
    const int fd = ::open(path.c_str(), O_RDWR);
    if (fd < 0) fail("reopen");
    const off_t end = ::lseek(fd, 0, SEEK_END);
    // Patches: u32 offset (into the file, or past it by up to a page to
    // grow it), u8 length, then that many bytes; a patch at offset
    // 0xffffffff cuts the file to the offset its next 4 bytes give.
    size_t i = 0;
    while (i + 5 <= size) {
      uint32_t off;
      std::memcpy(&off, data + i, 4);
      const size_t len = data[i + 4];
      i += 5;
      if (off == 0xffffffffu && i + 4 <= size) {
        uint32_t cut;
        std::memcpy(&cut, data + i, 4);
        i += 4;
        if (::ftruncate(fd, static_cast<off_t>(cut % static_cast<uint32_t>(end + 4096))) != 0) fail("ftruncate");
        continue;
      }
      const size_t n = len < size - i ? len : size - i;
      const off_t at = static_cast<off_t>(off % static_cast<uint32_t>(end + 4096));
      if (::pwrite(fd, data + i, n, at) != static_cast<ssize_t>(n)) fail("pwrite");
      i += n;
    }
    ::close(fd);
  }
  TableFile::Opened o = TableFile::open(dir, "t.table", kOptions, 2);
  if (!o.file) fail(o.error.c_str());
  if (o.outcome == TableFile::Outcome::kSetAside && o.note.empty()) fail("set aside without a reason");
  BucketTable t(kOptions, o.file->slots());
  const size_t live = t.recover();
  if (live > t.capacity()) fail("more live slots than the capacity");
  for (unsigned r = 0; r < t.regions(); ++r) {
    t.visit_region(r, [](const BucketKey&, const uint64_t* w) {
      if (w[0] == BucketTable::kFrozen || w[1] == BucketTable::kFrozen) fail("a frozen word after recover()");
    });
  }
  for (uint16_t k = 0; k < 4; ++k) {
    if (t.overflow_slot(k).load(0) == BucketTable::kFrozen) fail("a frozen overflow bucket after recover()");
  }
  (void)o.file->kinds();
  for (uint64_t n = 1; n <= 64; ++n) {
    const BucketTable::Found f = t.find_or_claim(BucketKey{n * 0x9e3779b97f4a7c15ull | 1, (n << 16) | (n & 7)});
    f.slot->word(0).store(n);
  }
  for (unsigned r = 0; r < t.regions(); ++r) {
    t.close_region(r);
    (void)t.retire_idle(r, [](uint16_t, const uint64_t* w) { return (w[0] & 1) == 0; });
    t.open_region(r);
  }
  if (!o.file->record_kinds({{0, "alpha", 1}})) fail("record_kinds after re-attach");
  return 0;
}
