// See path_form.h. One pass over the path: each '%' decoded on the spot,
// segments (between separators of any spelling) checked for dots as they
// end, bytes >= 0x80 checked as UTF-8 as they come.
#include "policy/path_form.h"

#include <emmintrin.h>

#include <cstring>

namespace sluice::policy {

namespace {

int hex(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unreserved(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

// UTF-8 as RFC 3629 allows it: no overlong form, no surrogate, nothing past
// U+10FFFF. An overlong '/' or '.' (%C0%AF, %E0%80%AF) is what decoders that
// accept it turn into a separator; one that refuses it answers 400: either
// way, origins disagree.
class Utf8Check {
 public:
  // Feeds one byte; false if the sequence so far cannot be valid.
  bool feed(unsigned char b) noexcept {
    if (need_ == 0) {
      if (b < 0x80) return true;
      lo_ = 0x80;
      hi_ = 0xBF;
      if (b >= 0xC2 && b <= 0xDF) need_ = 1;
      else if (b == 0xE0) need_ = 2, lo_ = 0xA0;
      else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) need_ = 2;
      else if (b == 0xED) need_ = 2, hi_ = 0x9F;
      else if (b == 0xF0) need_ = 3, lo_ = 0x90;
      else if (b >= 0xF1 && b <= 0xF3) need_ = 3;
      else if (b == 0xF4) need_ = 3, hi_ = 0x8F;
      else return false;  // a stray continuation, C0, C1, F5-FF
      return true;
    }
    if (b < lo_ || b > hi_) {
      need_ = 0;
      return false;
    }
    lo_ = 0x80;
    hi_ = 0xBF;
    --need_;
    return true;
  }
  [[nodiscard]] bool pending() const noexcept { return need_ != 0; }
  void reset() noexcept { need_ = 0; }

 private:
  int need_ = 0;
  unsigned char lo_ = 0x80, hi_ = 0xBF;
};

// What the segment being read looks like: only dots so far (how many, and
// whether one was encoded), or anything else.
struct Segment {
  unsigned dots = 0;
  bool encoded_dot = false;
  bool other = false;
};

}  // namespace

bool plainly_normal(std::string_view path) noexcept {
  static constexpr size_t kMax = 64;
  if (path.size() > kMax) return false;
  alignas(16) char buf[kMax + 16] = {};
  std::memcpy(buf, path.data(), path.size());
  const __m128i percent = _mm_set1_epi8('%'), backslash = _mm_set1_epi8('\\'), semicolon = _mm_set1_epi8(';');
  const __m128i slash = _mm_set1_epi8('/'), dot = _mm_set1_epi8('.');
  int found = 0;
  for (size_t i = 0; i < path.size(); i += 16) {
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(buf + i));
    const __m128i next = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + i + 1));
    const __m128i escape = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, percent), _mm_cmpeq_epi8(v, backslash)),
                                        _mm_cmpeq_epi8(v, semicolon));
    const __m128i segment = _mm_and_si128(_mm_cmpeq_epi8(v, slash),
                                          _mm_or_si128(_mm_cmpeq_epi8(next, slash), _mm_cmpeq_epi8(next, dot)));
    found |= _mm_movemask_epi8(_mm_or_si128(escape, segment));
  }
  return found == 0;
}

PathForm classify_path(std::string_view path) noexcept {
  PathForm form;
  if (path.empty()) return form;
  // Not origin-form ("*", an authority): matched as written, never resolved.
  if (path.front() != '/' && path.front() != '\\') return form;
  if (plainly_normal(path)) return form;

  Segment seg;
  Utf8Check utf8;
  bool after_slash = false;  // the previous byte was a raw '/'
  // A separator of any spelling ends a segment: "." and ".." are dot
  // segments to whoever reads that separator as one.
  auto end_segment = [&] {
    if (!seg.other && (seg.dots == 1 || seg.dots == 2)) {
      form.add(seg.encoded_dot ? PathClass::kEncodedDot : PathClass::kDotSegment);
    } else if (seg.encoded_dot) {
      form.add(PathClass::kEncodedUnreserved);  // "%2e" inside a name: a plain encoded unreserved byte
    }
    seg = {};
  };
  auto byte = [&](unsigned char b) {
    if (!utf8.feed(b)) form.add(PathClass::kNonUtf8);
  };
  size_t i = 0;
  while (i < path.size()) {
    const char c = path[i];
    if (c == '%') {
      after_slash = false;
      if (i + 2 >= path.size() || hex(path[i + 1]) < 0 || hex(path[i + 2]) < 0) {
        // Kept as a byte by some, refused by others, decoded leniently by a few.
        form.add(PathClass::kBadPercent);
        if (utf8.pending()) form.add(PathClass::kNonUtf8), utf8.reset();
        seg.other = true;
        ++i;
        continue;
      }
      const auto d = static_cast<unsigned char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
      i += 3;
      byte(d);
      if (d == '/') {
        form.add(PathClass::kEncodedSlash);
        end_segment();
      } else if (d == '\\') {
        form.add(PathClass::kEncodedBackslash);
        end_segment();
      } else if (d < 0x20 || d == 0x7F) {
        form.add(PathClass::kEncodedControl);
        seg.other = true;
      } else if (d == '.') {
        ++seg.dots;
        seg.encoded_dot = true;
      } else {
        if (unreserved(d)) form.add(PathClass::kEncodedUnreserved);
        seg.other = true;
      }
      continue;
    }
    ++i;
    byte(static_cast<unsigned char>(c));  // the parser lets no raw byte >= 0x80 through; checked all the same
    if (c == '/') {
      if (after_slash) form.add(PathClass::kRepeatedSlash);
      end_segment();
      after_slash = true;
      continue;
    }
    after_slash = false;
    if (c == '\\') {
      form.add(PathClass::kRawBackslash);
      end_segment();
    } else if (c == '.') {
      ++seg.dots;
    } else {
      if (c == ';') form.add(PathClass::kSemicolon);
      seg.other = true;
    }
  }
  if (utf8.pending()) form.add(PathClass::kNonUtf8);
  end_segment();
  return form;
}

std::string_view path_class_name(PathClass c) noexcept {
  switch (c) {
    case PathClass::kRawBackslash: return "raw_backslash";
    case PathClass::kEncodedBackslash: return "encoded_backslash";
    case PathClass::kEncodedSlash: return "encoded_slash";
    case PathClass::kEncodedDot: return "encoded_dot";
    case PathClass::kDotSegment: return "dot_segment";
    case PathClass::kRepeatedSlash: return "repeated_slash";
    case PathClass::kSemicolon: return "semicolon";
    case PathClass::kEncodedControl: return "encoded_control";
    case PathClass::kBadPercent: return "bad_percent";
    case PathClass::kNonUtf8: return "non_utf8";
    case PathClass::kEncodedUnreserved: return "encoded_unreserved";
  }
  return "unknown";
}

}  // namespace sluice::policy
