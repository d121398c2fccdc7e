// The set of field names whose values the parser records while it scans a
// head: the built-in KnownField names plus any a policy asks for at load time.
// Built once per policy, immutable afterwards, and shared read-only by every
// parser; lookup is a single table probe for the common case of a name that is
// not tracked.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "http/ascii_case.h"
#include "http/request_head.h"

namespace sluice::http {

class FieldSet {
 public:
  static constexpr size_t kMaxNameLength = 64;

  // The built-in names only.
  FieldSet() noexcept;

  enum class AddError : uint8_t { kEmpty, kTooLong, kNotAToken, kFull };
  struct AddResult {
    std::optional<FieldId> id;  // set on success, and when the name is already tracked
    AddError error{};
  };
  // Tracks one more name (case-insensitive). Adding a name twice returns the
  // first id.
  [[nodiscard]] AddResult add(std::string_view name) noexcept;

  // The id of a tracked name, or -1. `name` is a field name as received.
  [[nodiscard, gnu::always_inline]] int find(std::string_view name) const noexcept {
    if (name.empty() || name.size() > kMaxNameLength) return -1;
    // Most names a client sends are not tracked; this filter on first letter
    // and length turns nearly all of them away with one load.
    if (((lengths_by_first_[first_key(name)] >> length_bit(name.size())) & 1) == 0) return -1;
    for (unsigned slot = hash(name);; slot = (slot + 1) & (kSlots - 1)) {
      const uint8_t entry = slots_[slot];
      if (entry == 0) return -1;
      const Name& n = names_[entry - 1];
      if (iequals_lower(name, {n.lower, n.length})) return entry - 1;
    }
  }

  [[nodiscard]] size_t size() const noexcept { return count_; }
  [[nodiscard]] std::string_view name(FieldId id) const noexcept {
    return {names_[id].lower, names_[id].length};
  }

 private:
  static constexpr unsigned kSlots = 128;  // a power of two, > 3 * kMaxTrackedFields
  struct Name {
    char lower[kMaxNameLength];
    uint8_t length;
  };

  static unsigned first_key(std::string_view s) noexcept { return static_cast<unsigned char>(s.front()) & 31u; }
  static unsigned length_bit(size_t n) noexcept { return n > 63 ? 63u : static_cast<unsigned>(n); }

  static unsigned hash(std::string_view s) noexcept {
    const unsigned first = static_cast<unsigned char>(s.front()) | 0x20u;
    const unsigned last = static_cast<unsigned char>(s.back()) | 0x20u;
    return (static_cast<unsigned>(s.size()) * 37u + first * 7u + last) & (kSlots - 1);
  }

  std::array<uint64_t, 32> lengths_by_first_{};  // bit n: a name of length n (63: 63 or more) starts with this key
  std::array<uint8_t, kSlots> slots_{};  // id + 1, 0 = empty
  std::array<Name, kMaxTrackedFields> names_{};
  uint8_t count_ = 0;
};

}  // namespace sluice::http
