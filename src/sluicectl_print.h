// sluicectl's output: how each answer of sluiced is printed for a person
// (one function per command), and the helpers that read an answer's
// members for them and for `sluicectl top`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "control/json.h"

namespace sluice::sluicectl {

using control::Json;

// A value as the tables show it: an integer exactly, a real number as JSON
// writes it, a string as is, a boolean as yes/no; "-" when absent.
[[nodiscard]] std::string text_of(const Json* v);
// An object's member as the tables show it.
[[nodiscard]] std::string field(const Json& object, std::string_view key);
// A count; 0 when it is not one.
[[nodiscard]] uint64_t count_in(const Json& v);
// An object's member that is a count; 0 when it is absent or not one.
[[nodiscard]] uint64_t count_of(const Json& object, std::string_view key);
// An array member's elements; none when it is absent or not an array.
[[nodiscard]] const Json& elements_of(const Json& object, std::string_view key);

void print_status(const Json& r);
void print_stats(const Json& r);
void print_busiest(const Json& r);  // also under `top`'s view
void print_policy(const Json& r);
void print_policy_check(const Json& r);
void print_reloaded(const Json& r);
void print_runs(const Json& r);
void print_message(const Json& r);
void print_credentials(const Json& r);
void print_hash(const Json& r);
void print_bucket(const Json& r);
void print_usage_report(const Json& r);
void print_penalties(const Json& r);

}  // namespace sluice::sluicectl
