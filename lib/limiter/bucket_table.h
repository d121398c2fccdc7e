// The bucket table: every rate-limit bucket of the box, shared by all worker
// threads, lock-free. A slot is the 16-byte bucket key and a fixed number of
// 64-bit state words: two for rate-limit buckets, so a slot is 32 bytes and two
// share a cache line (a GCRA TAT, or the request and token words of a calendar
// window); more for the per-address credential slots of TB07, which use the
// same table. Keys are claimed with one 16-byte compare-and-swap and never
// change while claimed, so a thread that found a key never sees its slot turn
// into another key's; state words change by compare-and-swap.
//
// Fixed capacity, split into regions probed independently (linear probing
// inside a region, at most `max_probe` slots). When a key finds no slot (its
// region is full around its home, or being reclaimed), it is charged to its
// bucket kind's overflow bucket, one per kind: stricter than a bucket of its
// own, never looser, so a full table never admits more than a rule allows,
// never grows and never crashes. Overflows are counted.
//
// Idle buckets are reclaimed by the control thread, region by region, in
// three steps around two grace periods it waits out itself (rte_rcu_qsbr in
// the appliance):
//   close_region(r)   new keys homed in r go to overflow from now on
//   -- grace --       every claim that began before the close has finished
//   retire_idle(r)    slots whose bucket is idle (dropping it changes no
//                     answer: a missing bucket is a full one) are frozen and
//                     their keys released
//   -- grace --       every thread that read a retired key has moved on
//   open_region(r)    retired slots are zeroed and new keys may claim them
// so memory is reused only after a grace period, and no key is ever in two
// slots at once. One consequence to know: while its region is closed (two
// grace periods, microseconds), a key just dropped is charged to the
// overflow bucket, and when the region reopens it starts full. Keys are
// dropped only after their bucket has been full for the bucket's
// idle_drop_after (a minute by default), so such a key was idle anyway.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "limiter/bucket_key.h"

namespace sluice::limiter {

// A slot's key; its state words follow it in memory.
struct alignas(16) BucketSlot {
  uint64_t key[2];  // {k0, k1}; {0, 0} empty, {0, 1} free, else a BucketKey

  [[nodiscard]] std::atomic_ref<uint64_t> word(unsigned i) noexcept {
    return std::atomic_ref<uint64_t>(reinterpret_cast<uint64_t*>(this + 1)[i]);
  }
  [[nodiscard]] uint64_t load(unsigned i) const noexcept {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t*>(reinterpret_cast<const uint64_t*>(this + 1))[i])
        .load(std::memory_order_acquire);
  }
};
static_assert(sizeof(BucketSlot) == 16);

class BucketTable {
 public:
  // A state word of a slot being retired: whoever reads it uses the overflow bucket.
  static constexpr uint64_t kFrozen = ~uint64_t{0};
  static constexpr unsigned kMaxWords = 64;

  struct Options {
    size_t capacity = 1 << 20;  // slots in all, rounded up to a power of two (at least regions * 64)
    unsigned regions = 64;      // a power of two
    unsigned max_probe = 128;   // slots examined per lookup before overflowing
    uint16_t bucket_kinds = 1;  // one overflow bucket each
    unsigned words = 2;         // state words per slot, even (keys stay 16-byte aligned)
  };

  // On anonymous memory of its own, every slot empty.
  explicit BucketTable(const Options& options);
  // On `memory`, which the caller owns and keeps for the table's life: at
  // least bytes_for(options) bytes, zeroed (every slot empty) or holding a
  // table of the same options that a process before this one left there,
  // which recover() then makes whole again (a file-backed shared mapping
  // that outlives the process: control/table_file.h).
  BucketTable(const Options& options, std::span<std::byte> memory);
  ~BucketTable();
  // The bytes of slots a table of `options` needs.
  [[nodiscard]] static size_t bytes_for(const Options& options) noexcept;
  BucketTable(const BucketTable&) = delete;
  BucketTable& operator=(const BucketTable&) = delete;

  struct Found {
    BucketSlot* slot;
    bool overflow;  // `slot` is the key's bucket kind's shared overflow bucket
  };
  // The slot of `key`, claimed for it if it has none; its kind's overflow
  // bucket if it has none and cannot get one.
  [[nodiscard]] Found find_or_claim(const BucketKey& key) noexcept;
  // The slot of `key` if it has one.
  [[nodiscard]] BucketSlot* find(const BucketKey& key) noexcept;
  // Starts loading the cache line where `key`'s lookup begins. The data plane
  // calls it for a whole burst of requests before charging any of them, so
  // the memory latency of a large table is paid once per burst, not once per
  // request.
  void prefetch(const BucketKey& key) const noexcept {
    const unsigned r = static_cast<unsigned>(key.k0) & (regions_ - 1);
    __builtin_prefetch(slot_at(size_t{r} * region_slots_ + ((key.k1 >> 16) & (region_slots_ - 1))), 0, 3);
  }
  // A bucket kind's overflow bucket; also where a thread goes that finds its
  // slot frozen (being retired, so its region is closed to new keys anyway).
  [[nodiscard]] BucketSlot& overflow_slot(uint16_t kind) noexcept {
    return *slot_at(capacity() + (kind < bucket_kinds_ ? kind : bucket_kinds_ - 1u));
  }

  // Reclamation, driven by one control thread (see the file comment).
  // Sees a bucket's kind and its state words (as read; frozen words are never shown).
  using IdlePredicate = std::function<bool(uint16_t bucket_kind, const uint64_t* words)>;
  [[nodiscard]] unsigned regions() const noexcept { return regions_; }
  void close_region(unsigned r) noexcept;
  size_t retire_idle(unsigned r, const IdlePredicate& idle) noexcept;
  void open_region(unsigned r) noexcept;

  // Figures for the operator: slot counts are exact when no thread is
  // claiming or retiring at the time.
  [[nodiscard]] size_t capacity() const noexcept { return size_t{regions_} * region_slots_; }
  [[nodiscard]] size_t count_live() const noexcept;
  // Slots in use as retire_idle() last counted them, region by region: what
  // the operator's figures show, since a whole-table scan on every scrape
  // would sweep the workers' data out of the cache (512 MB at 10 M keys).
  // As old as the reclaimer's last pass over each region (1 s in sluiced).
  [[nodiscard]] size_t live_as_of_reclaim() const noexcept;

  // Every slot of region `r` in use, with its state words as read (a bucket
  // charged meanwhile may be read between the updates of two of its words;
  // a frozen one is skipped). For the control plane's snapshots.
  using SlotVisitor = std::function<void(const BucketKey& key, const uint64_t* words)>;
  void visit_region(unsigned r, const SlotVisitor& visit) const;
  // `key` given `words` (words() of them) as its state: at start, before
  // any other thread uses the table. False if it found no slot.
  [[nodiscard]] bool restore(const BucketKey& key, const uint64_t* words) noexcept;
  // Before any other thread uses a table attached to memory a crashed
  // process left: finishes what a reclamation the crash cut short had begun
  // (a slot partly or wholly frozen was idle when its freezing began: it is
  // released and emptied), and counts each region's live slots. Returns the
  // live slots.
  size_t recover() noexcept;
  // Every slot emptied, overflow buckets included (before any other thread
  // uses the table).
  void clear() noexcept;
  [[nodiscard]] unsigned words() const noexcept { return words_; }
  // Slots freed by reclamation and not yet reused or emptied (lookups of
  // absent keys probe past them).
  [[nodiscard]] size_t count_free_marks() const noexcept;
  [[nodiscard]] uint64_t overflows() const noexcept { return overflows_.load(std::memory_order_relaxed); }
  [[nodiscard]] size_t memory_bytes() const noexcept { return mapped_bytes_; }

 private:
  [[nodiscard]] BucketSlot* slot_at(size_t i) const noexcept {
    return reinterpret_cast<BucketSlot*>(base_ + i * stride_);
  }

  // The geometry `options` make (one place for both constructors, so a table
  // on memory it was given agrees with the table that left it there);
  // returns the bytes of slots.
  size_t lay_out(const Options& options);
  void allocate_bookkeeping();

  char* base_ = nullptr;  // capacity() slots, then bucket_kinds overflow slots
  bool owns_memory_ = true;
  size_t stride_ = 32;
  unsigned words_ = 2;
  std::atomic<uint8_t>* closed_ = nullptr;
  uint8_t* retired_ = nullptr;  // per slot, control thread only: retired since the region closed
  std::atomic<uint64_t>* live_in_region_ = nullptr;  // counted by retire_idle()
  size_t mapped_bytes_ = 0;
  unsigned regions_;
  uint64_t region_slots_;
  unsigned max_probe_;
  uint16_t bucket_kinds_;
  std::atomic<uint64_t> overflows_{0};
};

}  // namespace sluice::limiter
