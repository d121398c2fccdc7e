// See bucket_snapshot.h for the format and what is restored.
#include "control/bucket_snapshot.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "control/crc32c.h"
#include "control/state_dir.h"

namespace sluice::control {
namespace {

constexpr std::string_view kMagic = "SLUICEBK";
constexpr uint32_t kVersion = 1;
// A table of 2^28 slots of 8 words is far past any --buckets: a count above
// this is damage, not a table.
constexpr uint64_t kMaxSlots = uint64_t{1} << 28;

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads little-endian fields off the front of a byte string.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  [[nodiscard]] bool take(int n, uint64_t& v) {
    if (bytes_.size() < static_cast<size_t>(n)) return false;
    v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(bytes_[static_cast<size_t>(i)])} << (8 * i);
    bytes_.remove_prefix(static_cast<size_t>(n));
    return true;
  }
  [[nodiscard]] bool take_text(size_t n, std::string& s) {
    if (bytes_.size() < n) return false;
    s.assign(bytes_.substr(0, n));
    bytes_.remove_prefix(n);
    return true;
  }
  [[nodiscard]] size_t left() const { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

uint64_t fnv1a(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::optional<std::string> read_file(const std::string& path, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno != ENOENT) error = "cannot read " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = "cannot read " + path + ": " + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace

uint64_t bucket_signature(const limiter::CompiledBucket& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, b.calendar ? 1 : 0);
  h = fnv1a(h, b.gcra.interval);
  h = fnv1a(h, b.gcra.burst);
  h = fnv1a(h, b.window.requests);
  h = fnv1a(h, b.window.tokens);
  if (b.penalty) h = fnv1a(h, 0x70656e);  // its second word is when a box ends
  // Only where not a UTC minute, so that the signatures of buckets
  // written before hour and day windows stay what they were.
  if (!(b.window.calendar == limiter::Calendar{})) {
    h = fnv1a(h, b.window.calendar.span_minutes);
    h = fnv1a(h, static_cast<uint32_t>(b.window.calendar.offset_minutes));
  }
  // Per-key quotas in key order, so that the map's own order does not count.
  std::map<std::string_view, limiter::WindowLimit> quotas(b.quotas.begin(), b.quotas.end());
  for (const auto& [key, limit] : quotas) {
    for (const char c : key) h = fnv1a(h, static_cast<uint8_t>(c));
    h = fnv1a(h, limit.requests);
    h = fnv1a(h, limit.tokens);
  }
  return h;
}

std::string encode_bucket_snapshot(const BucketSnapshot& s) {
  std::string out(kMagic);
  put(out, kVersion, 4);
  put(out, s.words, 4);
  put(out, s.taken_at, 8);
  put(out, s.kinds.size(), 4);
  for (const BucketSnapshot::Kind& k : s.kinds) {
    put(out, k.kind, 2);
    put(out, k.name.size(), 2);
    out += k.name;
    put(out, k.signature, 8);
  }
  const size_t per_slot = 2 + s.words;
  put(out, s.slots.size() / per_slot, 8);
  out.reserve(out.size() + s.slots.size() * 8 + 4);
  for (const uint64_t v : s.slots) put(out, v, 8);
  put(out, crc32c(out), 4);
  return out;
}

std::optional<BucketSnapshot> decode_bucket_snapshot(std::string_view bytes, std::string& error) {
  if (bytes.size() < kMagic.size() + 4 || bytes.substr(0, kMagic.size()) != kMagic) {
    error = "not a bucket snapshot";
    return std::nullopt;
  }
  const std::string_view body = bytes.substr(0, bytes.size() - 4);
  Reader crc_reader(bytes.substr(bytes.size() - 4));
  uint64_t crc = 0;
  if (!crc_reader.take(4, crc) || crc != crc32c(body)) {
    error = "damaged (its checksum does not match)";
    return std::nullopt;
  }
  Reader r(body.substr(kMagic.size()));
  BucketSnapshot s;
  uint64_t version = 0, words = 0, kinds = 0, slots = 0;
  if (!r.take(4, version) || version != kVersion) {
    error = "version " + std::to_string(version) + ", this sluiced reads version " + std::to_string(kVersion);
    return std::nullopt;
  }
  if (!r.take(4, words) || words == 0 || words > limiter::BucketTable::kMaxWords || !r.take(8, s.taken_at) ||
      !r.take(4, kinds)) {
    error = "damaged (its header is cut short or out of range)";
    return std::nullopt;
  }
  s.words = static_cast<unsigned>(words);
  for (uint64_t i = 0; i < kinds; ++i) {
    BucketSnapshot::Kind k;
    uint64_t kind = 0, len = 0;
    if (!r.take(2, kind) || !r.take(2, len) || !r.take_text(len, k.name) || !r.take(8, k.signature)) {
      error = "damaged (its bucket list is cut short)";
      return std::nullopt;
    }
    k.kind = static_cast<uint16_t>(kind);
    s.kinds.push_back(std::move(k));
  }
  if (!r.take(8, slots) || slots > kMaxSlots || r.left() != slots * (2 + words) * 8) {
    error = "damaged (its slot count does not match its length)";
    return std::nullopt;
  }
  s.slots.resize(slots * (2 + words));
  for (uint64_t& v : s.slots) (void)r.take(8, v);
  return s;
}

BucketRestore restore_buckets(const std::string& dir, const limiter::CompiledPolicy& policy,
                              limiter::BucketTable& table) {
  BucketRestore out;
  const std::string path = dir + "/" + std::string(kBucketSnapshotFile);
  const std::optional<std::string> bytes = read_file(path, out.error);
  if (!bytes) return out;
  out.found = true;
  std::string error;
  const std::optional<BucketSnapshot> s = decode_bucket_snapshot(*bytes, error);
  if (!s) {
    out.error = path + ": " + error + "; no bucket restored";
    return out;
  }
  out = restore_snapshot(*s, policy, table);
  if (!out.error.empty()) out.error = path + ": " + out.error;
  return out;
}

BucketRestore restore_snapshot(const BucketSnapshot& s, const limiter::CompiledPolicy& policy,
                               limiter::BucketTable& table) {
  BucketRestore out;
  out.found = true;
  if (s.words != table.words()) {
    out.error = std::to_string(s.words) + " words per slot, the table has " + std::to_string(table.words()) +
                "; no bucket restored";
    return out;
  }
  out.taken_at = s.taken_at;
  // The snapshot's kinds to this policy's, through the buckets' names; -1:
  // changed, -2: gone.
  std::map<uint16_t, int> kind_now;
  for (const BucketSnapshot::Kind& k : s.kinds) {
    const limiter::CompiledBucket* b = policy.bucket_named(k.name);
    kind_now[k.kind] = b == nullptr ? -2 : (bucket_signature(*b) == k.signature ? b->index : -1);
  }
  const size_t per_slot = 2 + s.words;
  for (size_t i = 0; i + per_slot <= s.slots.size(); i += per_slot) {
    limiter::BucketKey key{s.slots[i], s.slots[i + 1]};
    const auto it = kind_now.find(key.bucket());
    const int now = it == kind_now.end() ? -2 : it->second;
    if (now == -2) {
      ++out.gone;
    } else if (now == -1) {
      ++out.changed;
    } else {
      key.k1 = (key.k1 & ~uint64_t{0xffff}) | static_cast<uint16_t>(now);
      if (table.restore(key, &s.slots[i + 2])) {
        ++out.restored;
      } else {
        ++out.no_room;
      }
    }
  }
  return out;
}

BucketSnapshot snapshot_of(const limiter::BucketTable& table, std::vector<BucketSnapshot::Kind> kinds, uint64_t now) {
  BucketSnapshot s;
  s.taken_at = now;
  s.words = table.words();
  s.kinds = std::move(kinds);
  for (unsigned r = 0; r < table.regions(); ++r) {
    table.visit_region(r, [&](const limiter::BucketKey& key, const uint64_t* w) {
      s.slots.push_back(key.k0);
      s.slots.push_back(key.k1);
      s.slots.insert(s.slots.end(), w, w + s.words);
    });
  }
  return s;
}

std::vector<BucketSnapshot::Kind> kinds_of(const limiter::CompiledPolicy& policy) {
  std::vector<BucketSnapshot::Kind> kinds;
  for (const limiter::CompiledBucket& b : policy.buckets) kinds.push_back({b.index, b.name, bucket_signature(b)});
  return kinds;
}

BucketSnapshotter::BucketSnapshotter(limiter::BucketTable& table, std::string dir, CurrentPolicy current, Now now)
    : table_(table), dir_(std::move(dir)), current_(std::move(current)), now_(std::move(now)),
      regions_(table.regions()), visited_at_(table.regions(), 0) {}

void BucketSnapshotter::region_visited(unsigned region) {
  std::vector<uint64_t>& slots = regions_[region];
  slots.clear();
  visited_at_[region] = now_();
  const unsigned words = table_.words();
  table_.visit_region(region, [&](const limiter::BucketKey& key, const uint64_t* w) {
    slots.push_back(key.k0);
    slots.push_back(key.k1);
    slots.insert(slots.end(), w, w + words);
  });
}

std::string BucketSnapshotter::write() {
  const std::shared_ptr<const dataplane::PolicySnapshot> policy = current_();
  BucketSnapshot s;
  // As old as the oldest region copied (the first write follows a whole
  // sweep, so every region has been).
  s.taken_at = now_();
  for (uint64_t at : visited_at_) s.taken_at = std::min(s.taken_at, at != 0 ? at : s.taken_at);
  s.words = table_.words();
  s.kinds = kinds_of(policy->policy);
  size_t total = 0;
  for (const auto& r : regions_) total += r.size();
  s.slots.reserve(total);
  for (const auto& r : regions_) s.slots.insert(s.slots.end(), r.begin(), r.end());
  const std::string err = write_file_atomically(dir_, std::string(kBucketSnapshotFile), encode_bucket_snapshot(s));
  if (!err.empty()) return err;
  written_at_.store(s.taken_at, std::memory_order_relaxed);
  slots_written_.store(s.slots.size() / (2 + s.words), std::memory_order_relaxed);
  return {};
}

std::string BucketSnapshotter::write_all() {
  for (unsigned r = 0; r < table_.regions(); ++r) region_visited(r);
  return write();
}

}  // namespace sluice::control
