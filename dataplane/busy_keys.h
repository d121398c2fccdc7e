// One worker's busiest keys, for `sluicectl top`: a space-saving
// heavy-hitter table (Metwally, Agrawal and El Abbadi, "Efficient
// computation of frequent and top-k elements in data streams", ICDT 2005)
// of 32 entries, written only by its worker and read by the control thread.
//
// With N the total weight recorded, space-saving promises: an entry's count
// never under-estimates its key's weight, and over-estimates it by at most
// the entry's `error` (the count it inherited when it took its slot); every
// key whose weight exceeds N/32 holds an entry. Entries are (rule, key): the
// same material counted by two rules is two entries.
//
// Every field is a std::atomic<uint64_t> word, written with relaxed stores
// by the one writer, so a concurrent reader is race-free; but the words of
// an entry are not read as one: while the worker replaces an entry, a reader
// may see a mix of the old entry and the new (the old key's label with the
// new key's count, say). For a view refreshed every second that is noise,
// and it spares the worker the extra stores and ordering of a sequence lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "limiter/decide.h"

namespace sluice::dataplane {

class BusyKeys {
 public:
  static constexpr size_t kEntries = 32;

  struct Entry {
    uint16_t rule = 0;  // the rule's counter slot (CompiledRule::counter_slot)
    limiter::KeyLabel label;
    uint64_t count = 0;  // never below the key's true weight ...
    uint64_t error = 0;  // ... and count - error never above it
  };

  // Counts `weight` for (rule, label.key_hash): added to its entry, or, if
  // it has none, the entry with the smallest count becomes its entry with
  // that count plus `weight`. The worker's only; allocates nothing.
  void record(uint16_t rule, const limiter::KeyLabel& label, uint64_t weight) noexcept;

  // The entries in use, largest count first; for the control thread.
  [[nodiscard]] std::vector<Entry> snapshot() const;

 private:
  static constexpr size_t kLabelWords = sizeof(limiter::KeyLabel::bytes) / sizeof(uint64_t);
  using Word = std::atomic<uint64_t>;

  // The worker's own copy of what record() searches, in plain words: it is
  // their only writer, so it never needs to read the shared ones back, and
  // loops over plain words vectorise (the match and the smallest count are
  // found with no branch per entry).
  struct Searched {
    std::array<uint64_t, kEntries> key_hash{};
    std::array<uint64_t, kEntries> count{};  // 0: a free entry
    std::array<uint64_t, kEntries> rule{};
  };
  Searched own_;

  // What the control thread reads. Laid out by field, not by entry.
  std::array<Word, kEntries> key_hash_{};
  std::array<Word, kEntries> count_{};  // 0: a free entry
  std::array<Word, kEntries> meta_{};   // rule (bits 0-15), label kind (16-23), label length (24-31)
  std::array<Word, kEntries> error_{};
  std::array<std::array<Word, kLabelWords>, kEntries> bytes_{};
};

}  // namespace sluice::dataplane
