// The credential file: which user each credential belongs to (RF04: every
// credential of one user shares that user's buckets). It holds only the keyed
// digests the daemon computes (`sluicectl credential hash`), never a raw
// credential, so the file can be read by whoever manages users without
// handing out the secrets themselves. One `HASH USER` per line; strict like
// the policy file: every problem is FILE:LINE:COLUMN, and a file with any
// error yields no entries at all, so a mapping is never half applied.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "limiter/bucket_key.h"

namespace sluice::control {

// The hash's text form: 32 lowercase hex digits, `hi` then `lo`.
[[nodiscard]] std::string digest_hex(const limiter::Digest& d);
// Exactly 32 hex digits, either case; nullopt otherwise.
[[nodiscard]] std::optional<limiter::Digest> parse_digest_hex(std::string_view text);

// User names: 1..kMaxUserLength of [A-Za-z0-9._@+:-] (they appear in usage
// reports and metrics labels, so nothing that needs quoting).
inline constexpr size_t kMaxUserLength = 64;
[[nodiscard]] bool valid_user_name(std::string_view user) noexcept;

// A file larger than this is refused unparsed: a few hundred thousand users fit.
inline constexpr size_t kMaxCredentialFileBytes = size_t{16} << 20;

struct CredentialEntry {
  limiter::Digest hash;
  std::string user;
  bool operator==(const CredentialEntry&) const = default;
};

struct CredentialFile {
  std::vector<CredentialEntry> entries;  // in file order; empty whenever errors is not
  std::vector<std::string> errors;       // "FILE:LINE:COLUMN: message", in file order
};

// `file_name` is what errors call the source (usually its path). Columns are
// 1-based and point at the field at fault (for a missing user, just after the
// hash). Errors never quote a field: a raw credential pasted into the file by
// mistake must not end up in a log.
[[nodiscard]] CredentialFile parse_credential_file(std::string_view text, std::string_view file_name);
// Reads and parses `path`; an unreadable or oversized file is one error.
[[nodiscard]] CredentialFile load_credential_file(const std::string& path);

// The file's text: a comment saying what it is, then one line per entry,
// sorted by user then hash. `entries` must hold no hash twice and only valid
// user names (what a parse returns); parse_credential_file reads the text
// back as the same entries in that order.
[[nodiscard]] std::string format_credential_file(const std::vector<CredentialEntry>& entries);

}  // namespace sluice::control
