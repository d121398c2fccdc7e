// A limiter table file (control/table_file.h) left in any state, re-attached:
// the input is a list of patches (offset, bytes) laid over a valid file, so
// that the header, the two copies of the kinds record and the slots are
// damaged in every way the fuzzer finds. Whatever the bytes, opening it
// either re-attaches it or sets it aside with a reason and makes a new one;
// never crashes. A re-attached table, after recover(), holds no frozen word,
// counts its live slots within its capacity, and is charged, looked up and
// reclaimed within its memory (ASan and UBSan watch).
//
// The same patches are laid over a flow file (control/flow_file.h) with
// flows in it: opening it carries flows, or sets it aside with a reason;
// never crashes. Whatever it carries is each key once, no more than the
// file had slots, each judged by carry_verdict() and those that carry
// taken into a table on the new file's memory, as sluiced does.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "control/flow_file.h"
#include "control/table_file.h"
#include "dataplane/flow_carry.h"
#include "dataplane/flow_key.h"
#include "dataplane/flow_table.h"
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

// Lays the input's patches over the file at `path`: u32 offset (into the
// file, or past it by up to a page to grow it), u8 length, then that many
// bytes; a patch at offset 0xffffffff cuts the file to the offset its next
// 4 bytes give.
void patch(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) fail("reopen");
  const off_t end = ::lseek(fd, 0, SEEK_END);
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

sluice::dataplane::FlowKey flow_key(uint16_t port) {
  sluice::dataplane::FlowKey k{};
  k.client.bytes[10] = 0xff;
  k.client.bytes[11] = 0xff;
  k.client.bytes[12] = 198;
  k.client.bytes[13] = 18;
  k.client.bytes[15] = 10;
  k.origin = k.client;
  k.origin.bytes[15] = 20;
  k.client_port = port;
  k.origin_port = 80;
  return k;
}

// A flow file with flows in both workers' tables, patched, opened again.
void fuzz_flow_file(const std::string& dir, const uint8_t* data, size_t size) {
  using sluice::control::FlowFile;
  namespace dp = sluice::dataplane;
  const FlowFile::Geometry g{2, 64};
  FlowFile::Seeds seeds;
  seeds.flow = 7;
  const std::string path = dir + "/flows.table";
  remove_files(path);
  {
    FlowFile::Opened made = FlowFile::open(dir, g, "boot", 1, seeds);
    if (!made.file) fail(made.error.c_str());
    for (unsigned w = 0; w < 2; ++w) {
      dp::FlowTable t(made.file->slots(w));
      for (uint16_t p = 1; p <= 40; ++p) {
        dp::TcpFlow* f = t.insert(flow_key(static_cast<uint16_t>(p + 100 * w)), p);
        if (f == nullptr) fail("flow table full");
        f->state = dp::FlowState::kEstablished;
        f->ip_version = 4;
      }
    }
    dp::WorkMarker(made.file->mark(1)).slot(3);
  }
  patch(path, data, size);
  FlowFile::Opened o = FlowFile::open(dir, g, "boot", 2, seeds);
  if (!o.file) fail(o.error.c_str());
  if (o.outcome == FlowFile::Outcome::kSetAside && o.note.empty()) fail("flow file set aside without a reason");
  if (o.carried.size() > 2 * 64) fail("more flows carried than the file had slots");
  for (size_t i = 1; i < o.carried.size(); ++i) {
    if (o.carried[i - 1].key == o.carried[i].key) fail("a key carried twice");
  }
  dp::FlowTable t(o.file->slots(0));
  for (const dp::TcpFlow& f : o.carried) {
    if (dp::carry_verdict(f) != dp::CarryVerdict::kCarries) continue;
    if (t.find(f.key, dp::flow_hash(f.key, 7)) != nullptr) fail("a carried key found before it was inserted");
    dp::TcpFlow* in = t.insert(f.key, dp::flow_hash(f.key, 7));
    if (in == nullptr) break;  // the table's 7/8
    *in = f;
  }
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
  patch(path, data, size);
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
  fuzz_flow_file(dir, data, size);
  return 0;
}
