// The strict reader on nlohmann-json's SAX interface (the library's own DOM
// builder cannot refuse a duplicate key or a depth), and the writer.
#include "json.h"

#include <iterator>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sluice::control {
namespace {

// Longest reason or key quoted in a refusal: the library's "last read"
// may be most of a 64 KiB line.
constexpr size_t kMaxQuoted = 160;
constexpr size_t kMaxQuotedKey = 40;

std::string bounded(std::string_view s, size_t max) {
  return s.size() <= max ? std::string(s) : std::string(s.substr(0, max)) + "...";
}

// The text's bytes, one at a time as the library's lexer reads them,
// noting how far it has read: the byte offset of a refusal of ours (the
// library reports its own).
class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* at, const char** read_to) : at_(at), read_to_(read_to) {}
  reference operator*() const { return *at_; }
  TrackedIterator& operator++() {
    *read_to_ = ++at_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedIterator& other) const { return at_ == other.at_; }

 private:
  const char* at_;
  const char** read_to_;
};

// Builds the value from the library's events as its DOM builder does, and
// stops the parse (returns false) at a duplicate key or past the depth.
class StrictBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  StrictBuilder(const char* begin, const char* const* read_to) : begin_(begin), read_to_(read_to) {}

  bool null() { return put(nullptr); }
  bool boolean(bool b) { return put(b); }
  bool number_integer(number_integer_t n) { return put(n); }
  bool number_unsigned(number_unsigned_t n) { return put(n); }
  bool number_float(number_float_t d, const string_t&) { return put(d); }
  bool string(string_t& s) { return put(std::move(s)); }
  bool binary(binary_t&) { return refuse("a binary value"); }  // never from JSON text
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k);
  bool parse_error(std::size_t position, const std::string&, const Json::exception& e);

  [[nodiscard]] Json& value() { return root_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  struct Open {
    Json* container;
    std::unordered_set<std::string> keys;  // an object's, so far
  };

  template <typename V>
  Json* place(V&& v);
  template <typename V>
  bool put(V&& v) {
    (void)place(std::forward<V>(v));
    return true;
  }
  bool open(Json empty);
  bool close() {
    open_.pop_back();
    return true;
  }
  bool refuse(const std::string& what) {
    error_ = what + " (at byte " + std::to_string(*read_to_ - begin_) + ")";
    return false;
  }

  const char* begin_;
  const char* const* read_to_;
  Json root_;
  std::vector<Open> open_;
  Json* member_ = nullptr;  // the innermost object's member whose value comes next
  std::string error_;
};

// A value's place: the top, the next element of the innermost array, or
// the member of the innermost object whose key came last.
template <typename V>
Json* StrictBuilder::place(V&& v) {
  if (open_.empty()) {
    root_ = Json(std::forward<V>(v));
    return &root_;
  }
  Json& container = *open_.back().container;
  if (container.is_array()) {
    Json::array_t& elements = container.get_ref<Json::array_t&>();
    elements.emplace_back(std::forward<V>(v));
    return &elements.back();
  }
  *member_ = Json(std::forward<V>(v));
  return member_;
}

bool StrictBuilder::open(Json empty) {
  if (open_.size() >= kMaxJsonDepth) return refuse("nested deeper than " + std::to_string(kMaxJsonDepth));
  open_.push_back({place(std::move(empty)), {}});
  return true;
}

// Members are appended to the object's vector directly: ordered_json's own
// insert looks for the key first, which would make an object of n members
// cost n^2; `keys` already says it is new.
bool StrictBuilder::key(string_t& k) {
  Open& object = open_.back();
  if (!object.keys.insert(k).second) return refuse("duplicate key \"" + bounded(k, kMaxQuotedKey) + "\"");
  Json::object_t::Container& members = object.container->get_ref<Json::object_t&>();
  members.emplace_back(std::move(k), nullptr);
  member_ = &members.back().second;
  return true;
}

// The library's message without its prefix ("[json.exception.parse_error.101]
// parse error at line 1, column 2: "), which names no byte.
bool StrictBuilder::parse_error(std::size_t position, const std::string&, const Json::exception& e) {
  std::string_view why = e.what();
  if (const size_t tag = why.find("] "); tag != std::string_view::npos) why.remove_prefix(tag + 2);
  if (why.starts_with("parse error")) {
    if (const size_t colon = why.find(": "); colon != std::string_view::npos) why.remove_prefix(colon + 2);
  }
  error_ = bounded(why, kMaxQuoted) + " (at byte " + std::to_string(position) + ")";
  return false;
}

}  // namespace

std::optional<Json> parse_json(std::string_view text, std::string& error) {
  const char* read_to = text.data();
  StrictBuilder builder(text.data(), &read_to);
  const TrackedIterator first(text.data(), &read_to), last(text.data() + text.size(), &read_to);
  if (!Json::sax_parse(first, last, &builder)) {
    error = builder.error().empty() ? "not JSON (at byte " + std::to_string(read_to - text.data()) + ")"
                                    : builder.error();
    return std::nullopt;
  }
  return std::move(builder.value());
}

std::string dump_json(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool is_utf8(std::string_view text) {
  try {
    (void)Json(std::string(text)).dump();
    return true;
  } catch (const Json::type_error&) {  // 316: invalid UTF-8 byte
    return false;
  }
}

const Json* member(const Json& object, std::string_view key) noexcept {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<uint64_t> whole_number(const Json& value) noexcept {
  // (is_number_integer() is true of unsigned values too, so the order matters.)
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  return std::nullopt;
}

}  // namespace sluice::control
