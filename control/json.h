// The control protocol's JSON (one object per line each way, sluicectl <->
// the control thread), on Debian's nlohmann-json. This layer adds what the
// protocol needs on top of the library and keeps its exceptions inside:
//   - a strict reader: exactly one JSON value (RFC 8259: no `01`, no lone
//     surrogate, UTF-8 only), no duplicate key in any object (the library
//     would silently keep the last one, so `{"token":"a","token":"b"}`
//     would mean whatever the last writer wanted), at most kMaxJsonDepth
//     containers deep; a refusal names the byte offset;
//   - integers kept exact: a whole number in the text is an int64 or uint64
//     (up to 2^64-1), never a double; `1.0` and `1e3` are real numbers;
//   - a writer that never throws: strings that are not UTF-8 (names that
//     came from files) are written with U+FFFD in place of the bad bytes.
// Objects keep the order their members were written in (ordered_json):
// humans and tests read the responses. Control plane only: this allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sluice::control {

using Json = nlohmann::ordered_json;

// Containers (objects, arrays) nested in one text at most; the protocol's
// deepest is 3.
inline constexpr size_t kMaxJsonDepth = 32;

// One JSON text, whole; nullopt and `error` ("... at byte N") if it is not
// one, or has a duplicate key, or nests deeper than kMaxJsonDepth.
[[nodiscard]] std::optional<Json> parse_json(std::string_view text, std::string& error);

// `value` as one line of JSON text, strings that are not UTF-8 repaired.
[[nodiscard]] std::string dump_json(const Json& value);

// Whether a JSON string can carry `text` unchanged (it is UTF-8).
[[nodiscard]] bool is_utf8(std::string_view text);

// A member of an object; nullptr when `object` is not one or lacks `key`.
[[nodiscard]] const Json* member(const Json& object, std::string_view key) noexcept;

// A whole number that is not negative, exactly (any JSON integer up to
// 2^64-1); nullopt for anything else: a real number (`1.5`, `1e3`, `1.0`),
// a negative, a string, ...
[[nodiscard]] std::optional<uint64_t> whole_number(const Json& value) noexcept;

}  // namespace sluice::control
