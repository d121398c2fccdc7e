// Builds the tracked-name table; see field_set.h.
#include "http/field_set.h"

#include "http/token_chars.h"

namespace sluice::http {

namespace {

// In KnownField order.
constexpr std::array<std::string_view, static_cast<size_t>(KnownField::kCount)> kKnownNames = {
    "authorization", "origin",       "host",    "x-forwarded-for", "x-real-ip", "cf-connecting-ip",
    "content-length", "transfer-encoding", "connection", "upgrade", "expect",
};

}  // namespace

FieldSet::FieldSet() noexcept {
  for (std::string_view name : kKnownNames) {
    // The built-in names are valid tokens and fit, so this cannot fail.
    (void)add(name);
  }
}

FieldSet::AddResult FieldSet::add(std::string_view name) noexcept {
  if (name.empty()) return {std::nullopt, AddError::kEmpty};
  if (name.size() > kMaxNameLength) return {std::nullopt, AddError::kTooLong};
  for (char c : name) {
    if (!is_tchar(static_cast<unsigned char>(c))) return {std::nullopt, AddError::kNotAToken};
  }
  if (const int existing = find(name); existing >= 0) {
    return {static_cast<FieldId>(existing), AddError{}};
  }
  if (count_ == kMaxTrackedFields) return {std::nullopt, AddError::kFull};

  Name& n = names_[count_];
  n = Name{};
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    n.lower[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c;
  }
  n.length = static_cast<uint8_t>(name.size());
  unsigned slot = hash(name);
  while (slots_[slot] != 0) slot = (slot + 1) & (kSlots - 1);
  slots_[slot] = static_cast<uint8_t>(count_ + 1);
  lengths_by_first_[first_key(name)] |= uint64_t{1} << length_bit(name.size());
  return {count_++, AddError{}};
}

}  // namespace sluice::http
