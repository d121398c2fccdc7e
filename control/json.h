// The little JSON the control protocol needs: one object per line each way
// (`sluicectl` <-> the control thread). A value tree for reading (objects,
// arrays, strings, numbers, booleans, null; depth-limited) and a writer that
// escapes strings. Control plane only: this allocates freely.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice::control {

struct JsonValue;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;
using JsonArray = std::vector<JsonValue>;

struct JsonValue {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<JsonArray>, std::shared_ptr<JsonObject>> v =
      nullptr;

  [[nodiscard]] const JsonObject* object() const noexcept;
  [[nodiscard]] const JsonArray* array() const noexcept;
  [[nodiscard]] const std::string* string() const noexcept;
  [[nodiscard]] std::optional<double> number() const noexcept;
  // A member of an object, or nullptr.
  [[nodiscard]] const JsonValue* get(std::string_view key) const noexcept;
};

// Parses one JSON text; nullopt and `error` (with the byte offset) if it is not.
[[nodiscard]] std::optional<JsonValue> parse_json(std::string_view text, std::string& error);

// Builds one JSON text. Members and elements are separated automatically.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int64_t n);
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(unsigned n) { return value(static_cast<uint64_t>(n)); }
  JsonWriter& value(double d);
  JsonWriter& value(bool b);
  [[nodiscard]] const std::string& str() const noexcept { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace sluice::control
