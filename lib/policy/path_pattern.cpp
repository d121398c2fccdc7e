// See path_pattern.h.
#include "policy/path_pattern.h"

#include <cstring>

#include "policy/path_form.h"

namespace sluice::policy {

std::optional<PathPattern> PathPattern::compile(std::string_view pattern, std::string* why) {
  auto fail = [&](std::string message) -> std::optional<PathPattern> {
    if (why) *why = std::move(message);
    return std::nullopt;
  };
  if (pattern.empty() || pattern.front() != '/') return fail("a path pattern starts with '/'");
  PathPattern p;
  p.text_ = std::string(pattern);
  std::string_view rest = pattern.substr(1);
  while (true) {
    const size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    const bool last = slash == std::string_view::npos;
    if (seg == "*") {
      if (!last) return fail("'*' may only end a pattern");
      p.tail_ = Tail::kAnyUnder;
      break;
    }
    Segment s;
    if (!seg.empty() && seg.back() == '*') {
      if (!last) return fail("'*' may only end a pattern");
      seg.remove_suffix(1);
      p.tail_ = Tail::kSubtreeOfLast;
    }
    if (seg.size() >= 2 && seg.front() == '{' && seg.back() == '}') {
      const std::string_view name = seg.substr(1, seg.size() - 2);
      if (name.empty() || name.find_first_of("{}/*") != std::string_view::npos) return fail("bad parameter name");
      if (p.param_index(name) >= 0) return fail("parameter {" + std::string(name) + "} appears twice");
      if (p.params_.size() == kMaxParams) return fail("more than 8 parameters");
      s.param = static_cast<int>(p.params_.size());
      p.params_.emplace_back(name);
    } else {
      if (seg.find_first_of("{}*") != std::string_view::npos) {
        return fail("'{', '}' and '*' are only allowed as {name} segments or a trailing '*'");
      }
      s.literal = std::string(seg);
    }
    p.segments_.push_back(std::move(s));
    if (last) break;
    rest = rest.substr(slash + 1);
  }
  // What every matching path starts with: the literal segments before the
  // first parameter, and the '/' after them where more must follow.
  std::string lead(1, '/');
  size_t n = 0;
  for (; n < p.segments_.size() && p.segments_[n].param < 0; ++n) {
    if (n != 0) lead += '/';
    lead += p.segments_[n].literal;
  }
  if (n != 0 && (n < p.segments_.size() || p.tail_ == Tail::kAnyUnder)) lead += '/';
  p.lead_ = std::move(lead);
  return p;
}

int PathPattern::param_index(std::string_view name) const noexcept {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool PathPattern::match(std::string_view path, std::span<std::string_view, kMaxParams> params) const noexcept {
  if (!may_match(path)) return false;
  size_t pos = 1;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    const size_t slash = path.find('/', pos);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    const std::string_view seg = path.substr(pos, end - pos);
    if (s.param >= 0) {
      if (seg.empty()) return false;
      params[static_cast<size_t>(s.param)] = seg;
    } else if (seg != s.literal) {
      return false;
    }
    const bool last = i + 1 == segments_.size();
    if (last) {
      switch (tail_) {
        case Tail::kExact: return end == path.size();
        case Tail::kSubtreeOfLast: return true;  // ends here, or a '/' follows
        case Tail::kAnyUnder: return end < path.size();  // a '/' follows
      }
    }
    if (end == path.size()) return false;
    pos = end + 1;
  }
  // A pattern of just "/*": everything under the root.
  return tail_ == Tail::kAnyUnder || path == "/";
}

namespace {

int hex(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unreserved(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

}  // namespace

namespace {

// True if `path` needs no rewriting: no escape, no backslash, no empty, "."
// or ".." segment. Most request paths are like that, and are matched in place.
bool already_normal(std::string_view path) noexcept {
  if (path.empty() || path.front() != '/') return false;
  char prev = '/';
  for (size_t i = 1; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '%' || c == '\\') return false;
    if (prev == '/' && (c == '/' || c == '.')) {
      // "//", or a segment starting with '.': "." and ".." need resolving,
      // ".well-known" does not.
      if (c == '/') return false;
      const size_t end = path.find('/', i);
      const std::string_view seg = path.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
      if (seg == "." || seg == "..") return false;
    }
    prev = c;
  }
  return true;
}

}  // namespace

std::string_view normalize_path(std::string_view path, std::span<char> out) noexcept {
  if (!path.empty() && path.front() == '/' && plainly_normal(path)) return path;
  if (already_normal(path)) return path;
  // One pass: decode, fold separators, then resolve dot segments as they end.
  size_t n = 0;
  size_t i = 0;
  auto push_separator = [&] {
    if (n == 0 || out[n - 1] != '/') out[n++] = '/';
  };
  // Called when a segment ends (at a separator or the end): drop "." and
  // resolve "..", looking at what was written since the last '/'.
  auto end_segment = [&] {
    size_t start = n;
    while (start > 0 && out[start - 1] != '/') --start;
    const std::string_view seg(out.data() + start, n - start);
    if (seg == ".") {
      n = start;
    } else if (seg == "..") {
      n = start;
      if (n > 1) {
        --n;  // the '/' before ".."
        while (n > 0 && out[n - 1] != '/') --n;
      }
    }
  };
  if (path.empty() || (path.front() != '/' && path.front() != '\\')) {
    // Not an origin-form path (for example "*"): matched as written.
    return path;
  }
  while (i < path.size()) {
    char c = path[i];
    if (c == '%' && i + 2 < path.size() && hex(path[i + 1]) >= 0 && hex(path[i + 2]) >= 0) {
      const char decoded = static_cast<char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
      if (unreserved(decoded) || decoded == '/' || decoded == '\\') {
        c = decoded;
        i += 3;
      } else {
        out[n++] = path[i++];
        continue;
      }
    } else {
      ++i;
    }
    if (c == '/' || c == '\\') {
      end_segment();
      push_separator();
    } else {
      out[n++] = c;
    }
  }
  end_segment();
  if (n == 0) out[n++] = '/';
  return {out.data(), n};
}

}  // namespace sluice::policy
