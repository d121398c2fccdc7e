// The callbacks copy what the source returns under the registry's mutex (so
// unregister_telemetry waits for them), then shape it into what DPDK's
// telemetry JSON can hold. DPDK 22.11 checks little of that itself: a bad
// name is refused, non-ASCII bytes in a string value are read as negative
// array indexes, and entries past its 16 KiB reply buffer are dropped
// without a word.
#include "telemetry.h"

#include <rte_telemetry.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>
#include <unordered_set>

namespace sluice::control {
namespace {

using Counters = std::vector<std::pair<std::string, uint64_t>>;
using Strings = std::vector<std::pair<std::string, std::string>>;

constexpr size_t kMaxText = RTE_TEL_MAX_STRING_LEN - 1;       // names and string values, without the NUL
constexpr size_t kMaxEntries = RTE_TEL_MAX_DICT_ENTRIES - 1;  // one kept for "/omitted"
constexpr size_t kJsonBudget = 15 * 1024;                     // of DPDK's 16 KiB reply, leaving room for its framing
constexpr const char* kOmitted = "/omitted";                  // '/' never survives key(), so this cannot collide
constexpr size_t kCommandCount = 3;

// The single file-static of the control plane (see telemetry.h): DPDK's
// callbacks have no user-data pointer. Allocated once and never destroyed,
// because DPDK's telemetry threads outlive main() and may call in while
// static destructors run.
struct Registry {
  std::mutex mu;
  std::optional<TelemetrySource> source;
  std::array<bool, kCommandCount> registered{};  // per command: DPDK has it (it cannot forget one)
};

Registry& registry() {
  static Registry* const r = new Registry;
  return *r;
}

bool name_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// A dict key telemetry accepts, unique within one reply.
std::string key(std::string_view name, std::unordered_set<std::string>& used) {
  std::string k(name.substr(0, kMaxText));
  std::replace_if(
      k.begin(), k.end(), [](char c) { return !name_char(c); }, '_');
  if (k.empty()) k.push_back('_');
  if (used.insert(k).second) return k;
  for (unsigned n = 2;; ++n) {
    const std::string number = std::to_string(n);
    std::string candidate = k.substr(0, kMaxText - number.size() - 1);
    candidate.push_back('_');
    candidate += number;
    if (used.insert(candidate).second) return candidate;
  }
}

// Printable ASCII only: DPDK 22.11's JSON writer mishandles every other
// byte. A UTF-8 character becomes one '?'.
std::string text_value(std::string_view value) {
  std::string v;
  for (char c : value) {
    if (v.size() == kMaxText) break;
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b <= 0x7E) {
      v.push_back(c);
    } else if ((b & 0xC0) != 0x80) {
      v.push_back('?');
    }
  }
  return v;
}

// What one entry adds to the reply: ,"name":value
size_t json_cost(const std::string& name, uint64_t value) {
  return name.size() + 4 + std::to_string(value).size();
}
size_t json_cost(const std::string& name, const std::string& value) {
  return name.size() + 6 + value.size() +
         static_cast<size_t>(std::count_if(value.begin(), value.end(), [](char c) { return c == '"' || c == '\\'; }));
}

int add(rte_tel_data* d, const std::string& name, uint64_t value) {
  return rte_tel_data_add_dict_u64(d, name.c_str(), value);
}
int add(rte_tel_data* d, const std::string& name, const std::string& value) {
  return rte_tel_data_add_dict_string(d, name.c_str(), value.c_str());
}

template <class Value>
void fill(rte_tel_data* d, const std::vector<std::pair<std::string, Value>>& items) {
  rte_tel_data_start_dict(d);
  std::unordered_set<std::string> used;
  size_t json = 2, added = 0;  // "{}"
  for (const auto& [name, raw] : items) {
    if (added == kMaxEntries) break;
    const std::string k = key(name, used);
    Value value;
    if constexpr (std::is_same_v<Value, std::string>) {
      value = text_value(raw);
    } else {
      value = raw;
    }
    const size_t cost = json_cost(k, value);
    if (json + cost > kJsonBudget) break;
    if (add(d, k, value) < 0) break;
    json += cost;
    ++added;
  }
  if (added < items.size()) rte_tel_data_add_dict_u64(d, kOmitted, items.size() - added);
}

// Copies the source's answer under the lock; nullopt answers null.
template <class Items, class Member>
std::optional<Items> ask(Member member) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (!r.source || !((*r.source).*member)) return std::nullopt;
  return ((*r.source).*member)();
}

template <class Items, auto Member>
int answer(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
  // DPDK calls from C: nothing may escape.
  try {
    const std::optional<Items> items = ask<Items>(Member);
    if (!items) return -1;
    fill(d, *items);
    return 0;
  } catch (...) {
    return -1;
  }
}

struct Command {
  const char* name;
  telemetry_cb fn;
  const char* help;  // at most 127 bytes
};

const std::array<Command, kCommandCount> kCommands = {{
    {"/sluice/stats", answer<Counters, &TelemetrySource::stats>,
     "Every sluiced counter, summed over the workers. No parameters."},
    {"/sluice/status", answer<Strings, &TelemetrySource::status>,
     "sluiced's status: version, uptime, policy, ports. No parameters."},
    {"/sluice/runs", answer<Counters, &TelemetrySource::runs>,
     "Live runs: token -> budget (requests per minute, 0: the policy's). No parameters."},
}};

}  // namespace

std::string register_telemetry(TelemetrySource source) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.source) return "telemetry: a source is already registered";
  for (size_t i = 0; i < kCommands.size(); ++i) {
    if (r.registered[i]) continue;
    const int rc = rte_telemetry_register_cmd(kCommands[i].name, kCommands[i].fn, kCommands[i].help);
    if (rc != 0) return std::string("telemetry: cannot register ") + kCommands[i].name + ": " + std::strerror(-rc);
    r.registered[i] = true;
  }
  r.source = std::move(source);
  return "";
}

void unregister_telemetry() noexcept {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.source.reset();
}

}  // namespace sluice::control
