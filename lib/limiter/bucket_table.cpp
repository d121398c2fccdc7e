// See bucket_table.h.
#include "limiter/bucket_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace sluice::limiter {

namespace {

__extension__ typedef unsigned __int128 u128;

uint64_t load(const uint64_t& w) noexcept { return __atomic_load_n(&w, __ATOMIC_ACQUIRE); }

// One 16-byte compare-and-swap (cmpxchg16b): keys appear and go whole.
bool swap_key(BucketSlot& s, uint64_t e0, uint64_t e1, uint64_t d0, uint64_t d1) noexcept {
  u128 expected = (u128{e1} << 64) | e0;
  const u128 desired = (u128{d1} << 64) | d0;
  return __atomic_compare_exchange_n(reinterpret_cast<u128*>(s.key), &expected, desired, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

constexpr uint64_t kFreeMark = 1;  // k1 of a free slot (k0 == 0)

}  // namespace

namespace {

// What Options make of a table: the stride and words of a slot, the regions,
// the slots in all (a power of two) and the bytes of slots with the overflow
// buckets. One place, since a table on memory it was given must agree with
// the table that left it there.
struct Geometry {
  unsigned words;
  size_t stride;
  unsigned regions;
  unsigned max_probe;
  uint16_t kinds;
  size_t total;
  size_t bytes;
};

Geometry geometry(const BucketTable::Options& o) {
  Geometry g{};
  g.words = std::max(2u, o.words + (o.words & 1u));
  if (g.words > BucketTable::kMaxWords) throw std::invalid_argument("a bucket table slot holds at most 64 state words");
  g.stride = sizeof(BucketSlot) + 8 * size_t{g.words};
  g.regions = std::bit_ceil(std::max(1u, o.regions));
  g.kinds = std::max<uint16_t>(1, o.bucket_kinds);
  g.total = std::bit_ceil(std::max<size_t>(o.capacity, size_t{g.regions} * 64));
  g.max_probe = static_cast<unsigned>(std::min<uint64_t>(std::max(1u, o.max_probe), g.total / g.regions));
  g.bytes = (g.total + g.kinds) * g.stride;
  return g;
}

}  // namespace

size_t BucketTable::bytes_for(const Options& options) noexcept {
  try {
    return geometry(options).bytes;
  } catch (const std::invalid_argument&) {
    return 0;
  }
}

size_t BucketTable::lay_out(const Options& o) {
  const Geometry g = geometry(o);
  stride_ = g.stride;
  words_ = g.words;
  regions_ = g.regions;
  max_probe_ = g.max_probe;
  bucket_kinds_ = g.kinds;
  region_slots_ = g.total / g.regions;
  return g.bytes;
}

BucketTable::BucketTable(const Options& o) {
  const size_t bytes = lay_out(o);
  // Anonymous memory comes zeroed (every slot empty). Huge pages where the
  // kernel has them (a random lookup in a large table otherwise misses the
  // TLB as well as the cache), and every page touched now, so no page fault
  // lands on the hot path later.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw std::bad_alloc();
  }
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  for (size_t off = 0; off < bytes; off += 4096) static_cast<volatile char*>(p)[off] = 0;
  mapped_bytes_ = bytes;
  base_ = static_cast<char*>(p);
  allocate_bookkeeping();
}

BucketTable::BucketTable(const Options& o, std::span<std::byte> memory) {
  const size_t bytes = lay_out(o);
  if (memory.size() < bytes) throw std::invalid_argument("a bucket table's memory is smaller than its options need");
  owns_memory_ = false;
  mapped_bytes_ = bytes;
  base_ = reinterpret_cast<char*>(memory.data());
  allocate_bookkeeping();
}

void BucketTable::allocate_bookkeeping() {
  closed_ = new std::atomic<uint8_t>[regions_];
  for (unsigned r = 0; r < regions_; ++r) closed_[r].store(0, std::memory_order_relaxed);
  retired_ = new uint8_t[capacity()]();
  live_in_region_ = new std::atomic<uint64_t>[regions_];
  for (unsigned r = 0; r < regions_; ++r) live_in_region_[r].store(0, std::memory_order_relaxed);
}

BucketTable::~BucketTable() {
  if (owns_memory_) munmap(base_, mapped_bytes_);
  delete[] closed_;
  delete[] retired_;
  delete[] live_in_region_;
}

size_t BucketTable::recover() noexcept {
  size_t live_total = 0;
  for (unsigned r = 0; r < regions_; ++r) {
    size_t live = 0;
    const size_t base = size_t{r} * region_slots_;
    for (uint64_t i = 0; i < region_slots_; ++i) {
      BucketSlot& s = *slot_at(base + i);
      if (s.key[0] == 0 && s.key[1] == 0) continue;
      bool frozen = false;
      for (unsigned w = 0; w < words_; ++w) frozen = frozen || s.load(w) == kFrozen;
      if (s.key[0] == 0 || frozen) {
        // A reclamation's leftover: retired (a free mark) or being retired.
        s.key[0] = 0;
        s.key[1] = kFreeMark;
        for (unsigned w = 0; w < words_; ++w) s.word(w).store(0, std::memory_order_relaxed);
        continue;
      }
      ++live;
    }
    live_in_region_[r].store(live, std::memory_order_relaxed);
    live_total += live;
  }
  // An overflow bucket is never frozen; one a damaged file left frozen would
  // send every charge of its kind to a bucket that reads as frozen.
  for (uint16_t k = 0; k < bucket_kinds_; ++k) {
    BucketSlot& s = overflow_slot(k);
    for (unsigned w = 0; w < words_; ++w) {
      if (s.load(w) == kFrozen) s.word(w).store(0, std::memory_order_relaxed);
    }
  }
  return live_total;
}

void BucketTable::clear() noexcept {
  std::memset(base_, 0, mapped_bytes_);
  for (unsigned r = 0; r < regions_; ++r) live_in_region_[r].store(0, std::memory_order_relaxed);
}

BucketSlot* BucketTable::find(const BucketKey& key) noexcept {
  const unsigned r = static_cast<unsigned>(key.k0) & (regions_ - 1);
  const size_t base = size_t{r} * region_slots_;
  const uint64_t mask = region_slots_ - 1;
  uint64_t i = (key.k1 >> 16) & mask;
  for (unsigned probe = 0; probe < max_probe_; ++probe, i = (i + 1) & mask) {
    BucketSlot& s = *slot_at(base + i);
    const uint64_t k0 = load(s.key[0]);
    const uint64_t k1 = load(s.key[1]);
    if (k0 == key.k0 && k1 == key.k1) return &s;
    if (k0 == 0 && k1 == 0) return nullptr;  // empty: the probe sequence ends here
  }
  return nullptr;
}

BucketTable::Found BucketTable::find_or_claim(const BucketKey& key) noexcept {
  const unsigned r = static_cast<unsigned>(key.k0) & (regions_ - 1);
  const size_t base = size_t{r} * region_slots_;
  const uint64_t mask = region_slots_ - 1;
  const uint64_t home = (key.k1 >> 16) & mask;
  for (;;) {
    // Look the key up, remembering the first slot it could claim: a key is
    // only ever placed in the first free or empty slot of its sequence, so
    // threads claiming the same new key race for the same slot.
    BucketSlot* candidate = nullptr;
    uint64_t c0 = 0, c1 = 0;
    uint64_t i = home;
    for (unsigned probe = 0; probe < max_probe_; ++probe, i = (i + 1) & mask) {
      BucketSlot& s = *slot_at(base + i);
      const uint64_t k0 = load(s.key[0]);
      const uint64_t k1 = load(s.key[1]);
      if (k0 == key.k0 && k1 == key.k1) return {&s, false};
      if (k0 == 0) {
        if (candidate == nullptr) {
          candidate = &s;
          c0 = k0;
          c1 = k1;
        }
        if (k1 == 0) break;  // empty: the key is not further on
      }
    }
    if (candidate == nullptr || closed_[r].load(std::memory_order_acquire) != 0) {
      overflows_.fetch_add(1, std::memory_order_relaxed);
      return {&overflow_slot(key.bucket()), true};
    }
    if (swap_key(*candidate, c0, c1, key.k0, key.k1)) return {candidate, false};
    // Another thread took that slot, perhaps for this very key: look again.
  }
}

void BucketTable::close_region(unsigned r) noexcept { closed_[r].store(1, std::memory_order_release); }

size_t BucketTable::retire_idle(unsigned r, const IdlePredicate& idle) noexcept {
  size_t retired = 0;
  size_t live = 0;
  const size_t base = size_t{r} * region_slots_;
  uint64_t seen[kMaxWords];
  for (uint64_t i = 0; i < region_slots_; ++i) {
    BucketSlot& s = *slot_at(base + i);
    const uint64_t k0 = load(s.key[0]);
    const uint64_t k1 = load(s.key[1]);
    if (k0 == 0) continue;
    bool frozen = false;
    for (unsigned w = 0; w < words_; ++w) {
      seen[w] = s.load(w);
      frozen = frozen || seen[w] == kFrozen;
    }
    if (frozen || !idle(static_cast<uint16_t>(k1), seen)) {
      ++live;
      continue;
    }
    // Freeze every word if and only if it still holds what the predicate saw:
    // a thread charging the bucket meanwhile makes one swap fail, and then the
    // words frozen so far are thawed and the bucket stays.
    unsigned done = 0;
    for (; done < words_; ++done) {
      uint64_t expected = seen[done];
      if (!s.word(done).compare_exchange_strong(expected, kFrozen, std::memory_order_acq_rel)) break;
    }
    if (done < words_) {
      while (done > 0) {
        --done;
        s.word(done).store(seen[done], std::memory_order_release);
      }
      ++live;
      continue;
    }
    swap_key(s, k0, k1, 0, kFreeMark);
    retired_[base + i] = 1;
    ++retired;
  }
  live_in_region_[r].store(live, std::memory_order_relaxed);
  return retired;
}

void BucketTable::open_region(unsigned r) noexcept {
  const size_t base = size_t{r} * region_slots_;
  const uint64_t mask = region_slots_ - 1;
  for (uint64_t i = 0; i < region_slots_; ++i) {
    if (retired_[base + i] == 0) continue;
    BucketSlot& s = *slot_at(base + i);
    for (unsigned w = 0; w < words_; ++w) s.word(w).store(0, std::memory_order_relaxed);
    retired_[base + i] = 0;
  }
  // Free marks right before an empty slot become empty themselves, so the
  // lookup of a key that is not there stops early again instead of probing
  // max_probe slots past a region's worth of marks. Safe because no key lies
  // past an empty slot in its probe sequence (a key takes the first free or
  // empty slot, and slots only became empty here, before any key could be
  // placed past them); no claim is in flight in a closed region.
  for (uint64_t e = 0; e < region_slots_; ++e) {
    BucketSlot& empty = *slot_at(base + e);
    if (load(empty.key[0]) != 0 || load(empty.key[1]) != 0) continue;
    for (uint64_t j = (e + mask) & mask; j != e; j = (j + mask) & mask) {
      BucketSlot& s = *slot_at(base + j);
      if (load(s.key[0]) != 0 || load(s.key[1]) != kFreeMark) break;
      swap_key(s, 0, kFreeMark, 0, 0);
    }
  }
  closed_[r].store(0, std::memory_order_release);
}

size_t BucketTable::count_free_marks() const noexcept {
  size_t n = 0;
  for (size_t i = 0; i < capacity(); ++i) n += load(slot_at(i)->key[0]) == 0 && load(slot_at(i)->key[1]) == kFreeMark;
  return n;
}

void BucketTable::visit_region(unsigned r, const SlotVisitor& visit) const {
  const size_t base = size_t{r} * region_slots_;
  uint64_t words[kMaxWords];
  for (uint64_t i = 0; i < region_slots_; ++i) {
    const BucketSlot& s = *slot_at(base + i);
    const BucketKey key{load(s.key[0]), load(s.key[1])};
    if (key.k0 == 0) continue;
    bool frozen = false;
    for (unsigned w = 0; w < words_; ++w) {
      words[w] = s.load(w);
      frozen = frozen || words[w] == kFrozen;
    }
    if (!frozen) visit(key, words);
  }
}

bool BucketTable::restore(const BucketKey& key, const uint64_t* words) noexcept {
  const Found f = find_or_claim(key);
  if (f.overflow) return false;
  for (unsigned w = 0; w < words_; ++w) f.slot->word(w).store(words[w], std::memory_order_relaxed);
  return true;
}

size_t BucketTable::live_as_of_reclaim() const noexcept {
  size_t n = 0;
  for (unsigned r = 0; r < regions_; ++r) n += live_in_region_[r].load(std::memory_order_relaxed);
  return n;
}

size_t BucketTable::count_live() const noexcept {
  size_t n = 0;
  for (size_t i = 0; i < capacity(); ++i) n += load(slot_at(i)->key[0]) != 0;
  return n;
}

}  // namespace sluice::limiter
