// One pass over the lines, at most one error per line (the first thing wrong
// on it), and no entries at all once any line is wrong.
#include "credential_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <unordered_map>

namespace sluice::control {
namespace {

constexpr size_t kHexDigits = 32;
// A file of garbage stops being reported after this many errors: the list
// travels back over the control socket.
constexpr size_t kMaxErrors = 100;

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool user_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '@' || c == '+' || c == ':' || c == '-';
}

// The digests are keyed hash outputs already, so any 64 bits of one spread well.
struct DigestHash {
  size_t operator()(const limiter::Digest& d) const noexcept { return static_cast<size_t>(d.lo); }
};

struct Token {
  std::string_view text;
  size_t offset;  // in the line
};

// Up to three whitespace-separated fields before any comment: a third is
// only ever reported, never read.
std::vector<Token> fields(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (out.size() < 3) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size() || line[i] == '#') break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    out.push_back({line.substr(start, i - start), start});
  }
  return out;
}

// Why `user` is not a valid name, or "" when it is. The name is not quoted:
// a credential pasted into the wrong column should not reach a log whole.
std::string user_problem(std::string_view user) {
  for (char c : user) {
    if (user_char(c)) continue;
    const auto b = static_cast<unsigned char>(c);
    std::string what;
    if (b >= 0x80) {
      what = "a non-ASCII character";
    } else if (b < 0x20 || b == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      what = std::string("byte 0x") + kHex[b >> 4] + kHex[b & 0xF];
    } else {
      what = std::string("'") + c + "'";
    }
    return "user names hold only A-Z a-z 0-9 . _ @ + : - (found " + what + ")";
  }
  if (user.size() > kMaxUserLength) {
    return "user name is " + std::to_string(user.size()) + " characters long; at most " +
           std::to_string(kMaxUserLength);
  }
  return "";
}

std::string hash_problem(std::string_view field) {
  const bool all_hex = std::all_of(field.begin(), field.end(), [](char c) { return hex_value(c) >= 0; });
  if (all_hex) {
    return "a credential hash is 32 hex digits; this one has " + std::to_string(field.size());
  }
  return "not a credential hash (32 hex digits from `sluicectl credential hash`; never the credential itself)";
}

}  // namespace

std::string digest_hex(const limiter::Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kHexDigits, '0');
  for (size_t i = 0; i < 16; ++i) {
    out[i] = kHex[(d.hi >> (60 - 4 * i)) & 0xF];
    out[16 + i] = kHex[(d.lo >> (60 - 4 * i)) & 0xF];
  }
  return out;
}

std::optional<limiter::Digest> parse_digest_hex(std::string_view text) {
  if (text.size() != kHexDigits) return std::nullopt;
  limiter::Digest d{0, 0};
  for (size_t i = 0; i < kHexDigits; ++i) {
    const int v = hex_value(text[i]);
    if (v < 0) return std::nullopt;
    uint64_t& half = i < 16 ? d.hi : d.lo;
    half = (half << 4) | static_cast<uint64_t>(v);
  }
  return d;
}

bool valid_user_name(std::string_view user) noexcept {
  return !user.empty() && user.size() <= kMaxUserLength && std::all_of(user.begin(), user.end(), user_char);
}

CredentialFile parse_credential_file(std::string_view text, std::string_view file_name) {
  CredentialFile out;
  size_t unreported = 0;
  const auto error = [&](int line, int col, const std::string& message) {
    if (out.errors.size() >= kMaxErrors) {
      ++unreported;
      return;
    }
    out.errors.push_back(std::string(file_name) + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " +
                         message);
  };
  // Editors on some systems start UTF-8 files with a byte order mark.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);

  std::unordered_map<limiter::Digest, int, DigestHash> first_line;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);

    const std::vector<Token> f = fields(line);
    // Only the first problem on a line is reported and every field before it
    // is ASCII, so byte offsets are also character columns.
    const auto column = [](size_t offset) { return static_cast<int>(offset) + 1; };
    if (f.empty()) continue;  // blank or comment
    const std::optional<limiter::Digest> hash = parse_digest_hex(f[0].text);
    if (!hash) {
      error(line_no, column(f[0].offset), hash_problem(f[0].text));
      continue;
    }
    if (f.size() < 2) {
      error(line_no, column(f[0].offset + f[0].text.size()), "a hash with no user (a line is HASH USER)");
      continue;
    }
    if (std::string problem = user_problem(f[1].text); !problem.empty()) {
      error(line_no, column(f[1].offset), problem);
      continue;
    }
    if (f.size() > 2) {
      error(line_no, column(f[2].offset),
            "a third field where the line should end (a line is HASH USER; comments start with #)");
      continue;
    }
    const auto [it, added] = first_line.emplace(*hash, line_no);
    if (!added) {
      error(line_no, column(f[0].offset),
            "hash already listed on line " + std::to_string(it->second) + " (a credential has one user)");
      continue;
    }
    out.entries.push_back({*hash, std::string(f[1].text)});
  }
  if (unreported > 0) {
    out.errors.push_back(std::string(file_name) + ": " + std::to_string(unreported) + " more errors not shown");
  }
  if (!out.errors.empty()) out.entries.clear();
  return out;
}

CredentialFile load_credential_file(const std::string& path) {
  const auto fail = [&](const std::string& message) {
    CredentialFile out;
    out.errors.push_back(path + ": " + message);
    return out;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot read: ") + std::strerror(errno));
  // Read until EOF rather than trusting st_size (a pipe or /proc file has
  // none); stop one chunk past the limit.
  std::string text;
  char chunk[65536];
  while (text.size() <= kMaxCredentialFileBytes) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(std::string("cannot read: ") + std::strerror(e));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  if (text.size() > kMaxCredentialFileBytes) {
    return fail("larger than " + std::to_string(kMaxCredentialFileBytes >> 20) +
                " MiB, the most a credential file may be");
  }
  return parse_credential_file(text, path);
}

std::string format_credential_file(const std::vector<CredentialEntry>& entries) {
  std::vector<const CredentialEntry*> sorted;
  sorted.reserve(entries.size());
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const CredentialEntry* a, const CredentialEntry* b) {
    return std::tie(a->user, a->hash.hi, a->hash.lo) < std::tie(b->user, b->hash.hi, b->hash.lo);
  });
  std::string out =
      "# sluice credentials (RF04): one \"HASH USER\" per line, HASH from `sluicectl credential hash`, never the "
      "credential itself\n";
  out.reserve(out.size() + entries.size() * (kHexDigits + 16));
  for (const CredentialEntry* e : sorted) {
    out += digest_hex(e->hash);
    out += ' ';
    out += e->user;
    out += '\n';
  }
  return out;
}

}  // namespace sluice::control
