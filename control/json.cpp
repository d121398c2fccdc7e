// A recursive-descent reader (RFC 8259, no extensions) and an escaping writer.
#include "json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace sluice::control {

const JsonObject* JsonValue::object() const noexcept {
  const auto* p = std::get_if<std::shared_ptr<JsonObject>>(&v);
  return p ? p->get() : nullptr;
}
const JsonArray* JsonValue::array() const noexcept {
  const auto* p = std::get_if<std::shared_ptr<JsonArray>>(&v);
  return p ? p->get() : nullptr;
}
const std::string* JsonValue::string() const noexcept { return std::get_if<std::string>(&v); }
std::optional<double> JsonValue::number() const noexcept {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return std::nullopt;
}
const JsonValue* JsonValue::get(std::string_view key) const noexcept {
  const JsonObject* o = object();
  if (o == nullptr) return nullptr;
  const auto it = o->find(key);
  return it == o->end() ? nullptr : &it->second;
}

namespace {

constexpr int kMaxDepth = 32;

class Reader {
 public:
  explicit Reader(std::string_view t) : t_(t) {}

  std::optional<JsonValue> document(std::string& error) {
    std::optional<JsonValue> v = value(0);
    ws();
    if (v && i_ != t_.size()) fail("unexpected data after the value");
    if (!error_.empty()) {
      error = error_ + " at byte " + std::to_string(i_);
      return std::nullopt;
    }
    return v;
  }

 private:
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool literal(std::string_view word) {
    if (t_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  std::optional<JsonValue> value(int depth) {
    if (depth > kMaxDepth) {
      fail("nested too deep");
      return std::nullopt;
    }
    ws();
    if (i_ >= t_.size()) {
      fail("unexpected end");
      return std::nullopt;
    }
    const char c = t_[i_];
    JsonValue out;
    if (c == '{') {
      ++i_;
      auto obj = std::make_shared<JsonObject>();
      ws();
      if (i_ < t_.size() && t_[i_] == '}') {
        ++i_;
      } else {
        for (;;) {
          ws();
          std::optional<std::string> k = string();
          if (!k) return std::nullopt;
          ws();
          if (i_ >= t_.size() || t_[i_] != ':') {
            fail("expected ':'");
            return std::nullopt;
          }
          ++i_;
          std::optional<JsonValue> member = value(depth + 1);
          if (!member) return std::nullopt;
          (*obj)[*k] = std::move(*member);
          ws();
          if (i_ < t_.size() && t_[i_] == ',') {
            ++i_;
            continue;
          }
          if (i_ < t_.size() && t_[i_] == '}') {
            ++i_;
            break;
          }
          fail("expected ',' or '}'");
          return std::nullopt;
        }
      }
      out.v = std::move(obj);
    } else if (c == '[') {
      ++i_;
      auto arr = std::make_shared<JsonArray>();
      ws();
      if (i_ < t_.size() && t_[i_] == ']') {
        ++i_;
      } else {
        for (;;) {
          std::optional<JsonValue> element = value(depth + 1);
          if (!element) return std::nullopt;
          arr->push_back(std::move(*element));
          ws();
          if (i_ < t_.size() && t_[i_] == ',') {
            ++i_;
            continue;
          }
          if (i_ < t_.size() && t_[i_] == ']') {
            ++i_;
            break;
          }
          fail("expected ',' or ']'");
          return std::nullopt;
        }
      }
      out.v = std::move(arr);
    } else if (c == '"') {
      std::optional<std::string> s = string();
      if (!s) return std::nullopt;
      out.v = std::move(*s);
    } else if (literal("true")) {
      out.v = true;
    } else if (literal("false")) {
      out.v = false;
    } else if (literal("null")) {
      out.v = nullptr;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = i_;
      if (t_[i_] == '-') ++i_;
      while (i_ < t_.size() && ((t_[i_] >= '0' && t_[i_] <= '9') || t_[i_] == '.' || t_[i_] == 'e' ||
                                t_[i_] == 'E' || t_[i_] == '+' || t_[i_] == '-')) {
        ++i_;
      }
      double d = 0;
      const auto [p, ec] = std::from_chars(t_.data() + start, t_.data() + i_, d);
      if (ec != std::errc{} || p != t_.data() + i_ || !std::isfinite(d)) {
        fail("bad number");
        return std::nullopt;
      }
      out.v = d;
    } else {
      fail("unexpected character");
      return std::nullopt;
    }
    return out;
  }

  static void utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xc0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xe0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      s += static_cast<char>(0xf0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::optional<uint32_t> hex4() {
    if (i_ + 4 > t_.size()) return std::nullopt;
    uint32_t v = 0;
    const auto [p, ec] = std::from_chars(t_.data() + i_, t_.data() + i_ + 4, v, 16);
    if (ec != std::errc{} || p != t_.data() + i_ + 4) return std::nullopt;
    i_ += 4;
    return v;
  }

  std::optional<std::string> string() {
    if (i_ >= t_.size() || t_[i_] != '"') {
      fail("expected a string");
      return std::nullopt;
    }
    ++i_;
    std::string s;
    while (i_ < t_.size()) {
      const char c = t_[i_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) {
        fail("control character in a string");
        return std::nullopt;
      }
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i_ >= t_.size()) break;
      const char e = t_[i_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          std::optional<uint32_t> cp = hex4();
          if (!cp) {
            fail("bad \\u escape");
            return std::nullopt;
          }
          if (*cp >= 0xd800 && *cp < 0xdc00 && literal("\\u")) {
            std::optional<uint32_t> lo = hex4();
            if (!lo || *lo < 0xdc00 || *lo > 0xdfff) {
              fail("bad surrogate pair");
              return std::nullopt;
            }
            *cp = 0x10000 + ((*cp - 0xd800) << 10) + (*lo - 0xdc00);
          }
          utf8(s, *cp);
          break;
        }
        default:
          fail("bad escape");
          return std::nullopt;
      }
    }
    fail("unterminated string");
    return std::nullopt;
  }

  std::string_view t_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

std::optional<JsonValue> parse_json(std::string_view text, std::string& error) { return Reader(text).document(error); }

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  out_ += '}';
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  out_ += ']';
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view k) {
  value(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view s) {
  separate();
  out_ += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out_ += buf;
        } else {
          out_ += c;
        }
    }
  }
  out_ += '"';
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t n) {
  separate();
  out_ += std::to_string(n);
  return *this;
}
JsonWriter& JsonWriter::value(int64_t n) {
  separate();
  out_ += std::to_string(n);
  return *this;
}
JsonWriter& JsonWriter::value(double d) {
  separate();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", std::isfinite(d) ? d : 0.0);
  out_ += buf;
  return *this;
}
JsonWriter& JsonWriter::value(bool b) {
  separate();
  out_ += b ? "true" : "false";
  return *this;
}

}  // namespace sluice::control
