// See table_file.h. Control plane only: runs at start and at a reload.
#include "control/table_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "control/crc32c.h"
#include "control/mapped_file.h"

namespace sluice::control {

namespace {

constexpr size_t kPage = kFilePage;
constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'T', 'B'};

struct Header {
  char magic[8];
  uint32_t layout;
  uint32_t crc;  // CRC-32C of the header with this field 0
  // The table's options as asked for, and what they make.
  uint64_t capacity;
  uint32_t regions;
  uint32_t max_probe;
  uint32_t words;
  uint32_t bucket_kinds;
  uint64_t slots_offset;
  uint64_t slots_bytes;
  uint64_t file_bytes;
  uint64_t generation;
  uint64_t created_at;  // UTC ns
};
static_assert(sizeof(Header) <= kPage);

struct KindEntry {
  uint64_t signature;
  uint16_t kind;
  uint8_t name_len;
  char name[69];
};
static_assert(sizeof(KindEntry) == 80);

struct KindsCopy {
  uint64_t seq;  // 0: never written
  uint32_t count;
  uint32_t crc;  // of seq, count and the count entries, with this field 0
  KindEntry entries[TableFile::kMaxKinds];
};

constexpr size_t kKindsCopyBytes = round_to_page(sizeof(KindsCopy));
constexpr size_t kKindsOffset = kPage;
constexpr size_t kSlotsOffset = kKindsOffset + 2 * kKindsCopyBytes;

uint32_t header_crc(Header h) {
  h.crc = 0;
  return crc32c({reinterpret_cast<const char*>(&h), sizeof h});
}

uint32_t kinds_crc(const KindsCopy& c) {
  const size_t n = std::min<size_t>(c.count, TableFile::kMaxKinds);
  const uint32_t head = crc32c({reinterpret_cast<const char*>(&c), offsetof(KindsCopy, crc)});
  const uint32_t body = crc32c({reinterpret_cast<const char*>(c.entries), n * sizeof(KindEntry)});
  return head ^ (body * 0x9e3779b1u);
}

Header header_for(const limiter::BucketTable::Options& o, uint64_t now) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.layout = TableFile::kLayout;
  h.capacity = o.capacity;
  h.regions = o.regions;
  h.max_probe = o.max_probe;
  h.words = o.words;
  h.bucket_kinds = o.bucket_kinds;
  h.slots_offset = kSlotsOffset;
  h.slots_bytes = limiter::BucketTable::bytes_for(o);
  h.file_bytes = kSlotsOffset + round_to_page(h.slots_bytes);
  h.generation = 1;
  h.created_at = now;
  h.crc = header_crc(h);
  return h;
}

std::string shape(uint64_t capacity, uint32_t words, uint32_t regions, uint32_t probe, uint32_t kinds) {
  return std::to_string(capacity) + " slots of " + std::to_string(words) + " words (" + std::to_string(regions) +
         " regions, probe " + std::to_string(probe) + ", " + std::to_string(kinds) + " kinds)";
}

// "" if the file open on `fd` is a table this process can attach, else why not.
std::string check(int fd, const Header& want) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return std::string("cannot stat it: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  Header h{};
  if (static_cast<size_t>(st.st_size) < sizeof h || !read_start(fd, &h, sizeof h)) {
    return "too short for a header (" + std::to_string(st.st_size) + " bytes)";
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return "not a sluice table file (no SLUICETB at its start)";
  if (h.layout != want.layout) {
    return "layout " + std::to_string(h.layout) + ", this sluiced reads layout " + std::to_string(want.layout);
  }
  if (h.crc != header_crc(h)) return "its header is damaged (checksum)";
  if (h.capacity != want.capacity || h.words != want.words || h.regions != want.regions ||
      h.max_probe != want.max_probe || h.bucket_kinds != want.bucket_kinds || h.slots_bytes != want.slots_bytes ||
      h.slots_offset != want.slots_offset) {
    return "made for " + shape(h.capacity, h.words, h.regions, h.max_probe, h.bucket_kinds) + ", this start asks for " +
           shape(want.capacity, want.words, want.regions, want.max_probe, want.bucket_kinds);
  }
  if (h.file_bytes != want.file_bytes || static_cast<uint64_t>(st.st_size) != stored_size(fd, h.file_bytes)) {
    return "it is " + std::to_string(st.st_size) + " bytes, its header says " + std::to_string(h.file_bytes);
  }
  return {};
}

Header& header_of(std::byte* map) { return *reinterpret_cast<Header*>(map); }
KindsCopy& copy_of(std::byte* map, int i) {
  return *reinterpret_cast<KindsCopy*>(map + kKindsOffset + static_cast<size_t>(i) * kKindsCopyBytes);
}
bool copy_valid(const KindsCopy& c) { return c.seq != 0 && c.count <= TableFile::kMaxKinds && c.crc == kinds_crc(c); }

}  // namespace

TableFile::Opened TableFile::open(const std::string& dir, const std::string& name,
                                  const limiter::BucketTable::Options& options, uint64_t now) {
  Opened out;
  const std::string path = dir + "/" + name;
  const Header want = header_for(options, now);
  if (want.slots_bytes == 0) {
    out.error = path + ": the table's options cannot be laid out";
    return out;
  }
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    const std::string why = check(fd, want);
    if (why.empty()) {
      std::byte* map = map_shared(fd, want.file_bytes, Populate::kForReading);
      if (map == nullptr) {
        out.error = path + ": cannot map it: " + std::strerror(errno);
        ::close(fd);
        return out;
      }
      Header& h = header_of(map);
      h.generation += 1;
      h.crc = header_crc(h);
      out.file.reset(new TableFile(path, fd, map, want.file_bytes));
      out.outcome = Outcome::kAttached;
      return out;
    }
    ::close(fd);
    SetAside aside = set_aside(path, why);
    if (!aside.error.empty()) {
      out.error = std::move(aside.error);
      return out;
    }
    out.outcome = Outcome::kSetAside;
    out.note = std::move(aside.note);
  } else if (errno != ENOENT) {
    out.error = path + ": cannot open it: " + std::strerror(errno);
    return out;
  }
  const MadeFile made = make_file(path, want.file_bytes, std::as_bytes(std::span(&want, 1)));
  if (made.fd < 0) {
    out.error = made.error;
    return out;
  }
  fd = made.fd;
  std::byte* map = map_shared(fd, want.file_bytes, Populate::kForReading);
  if (map == nullptr) {
    out.error = path + ": cannot map it: " + std::strerror(errno);
    ::close(fd);
    return out;
  }
  out.file.reset(new TableFile(path, fd, map, want.file_bytes));
  return out;
}

std::span<std::byte> TableFile::slots() const noexcept {
  const Header& h = header_of(map_);
  return {map_ + h.slots_offset, h.slots_bytes};
}

uint64_t TableFile::generation() const noexcept { return header_of(map_).generation; }

std::optional<std::vector<BucketSnapshot::Kind>> TableFile::kinds() const {
  const KindsCopy* best = nullptr;
  for (int i = 0; i < 2; ++i) {
    const KindsCopy& c = copy_of(map_, i);
    if (copy_valid(c) && (best == nullptr || c.seq > best->seq)) best = &c;
  }
  if (best == nullptr) return std::nullopt;
  std::vector<BucketSnapshot::Kind> out;
  out.reserve(best->count);
  for (uint32_t i = 0; i < best->count; ++i) {
    const KindEntry& e = best->entries[i];
    out.push_back({e.kind, std::string(e.name, std::min<size_t>(e.name_len, sizeof e.name)), e.signature});
  }
  return out;
}

bool TableFile::record_kinds(const std::vector<BucketSnapshot::Kind>& kinds) {
  if (kinds.size() > kMaxKinds) return false;
  for (const BucketSnapshot::Kind& k : kinds) {
    if (k.name.size() > sizeof(KindEntry::name)) return false;
  }
  // The copy that is not the newest valid one is written; the newest stands
  // until this one is whole.
  KindsCopy& a = copy_of(map_, 0);
  KindsCopy& b = copy_of(map_, 1);
  const bool a_valid = copy_valid(a), b_valid = copy_valid(b);
  const uint64_t newest = std::max(a_valid ? a.seq : 0, b_valid ? b.seq : 0);
  KindsCopy& c = (a_valid && (!b_valid || a.seq >= b.seq)) ? b : a;
  c.crc = 0;
  c.seq = newest + 1;
  c.count = static_cast<uint32_t>(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    KindEntry& e = c.entries[i];
    e = KindEntry{};
    e.signature = kinds[i].signature;
    e.kind = kinds[i].kind;
    e.name_len = static_cast<uint8_t>(kinds[i].name.size());
    std::memcpy(e.name, kinds[i].name.data(), kinds[i].name.size());
  }
  c.crc = kinds_crc(c);
  return true;
}

}  // namespace sluice::control
