// sluicectl's output: each answer of sluiced (control/protocol.h) as a
// person reads it, tables and lines; --json prints the answer as it came
// and needs none of this.
#include "sluicectl_print.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <utility>
#include <vector>

namespace sluice::sluicectl {

using control::member;

// A value as the tables show it: an integer exactly (up to 2^64-1), a real
// number as JSON writes it, a string as is, a boolean as yes/no; "-" when
// absent.
std::string text_of(const Json* v) {
  if (v == nullptr) return "-";
  if (v->is_string()) return v->get_ref<const std::string&>();
  if (v->is_boolean()) return v->get<bool>() ? "yes" : "no";
  if (v->is_number()) return v->dump();
  return "-";
}

// An object's member as the tables show it.
std::string field(const Json& object, std::string_view key) { return text_of(member(object, key)); }

// A count; 0 when it is not one.
uint64_t count_in(const Json& v) { return control::whole_number(v).value_or(0); }

// An object's member that is a count; 0 when it is absent or not one.
uint64_t count_of(const Json& object, std::string_view key) {
  const Json* v = member(object, key);
  return v ? count_in(*v) : 0;
}

// An array member's elements; none when it is absent or not an array.
const Json& elements_of(const Json& object, std::string_view key) {
  static const Json kNone = Json::array();
  const Json* v = member(object, key);
  return v && v->is_array() ? *v : kNone;
}

namespace {

std::string when(const Json& object, std::string_view key) {
  const Json* v = member(object, key);
  const auto t = static_cast<time_t>(v && v->is_number_integer() ? v->get<int64_t>() : 0);
  char b[32];
  tm utc{};
  gmtime_r(&t, &utc);
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%SZ", &utc);
  return b;
}

std::string joined(const Json& list) {
  std::string out;
  for (const Json& e : list) out += (out.empty() ? "" : ", ") + text_of(&e);
  return out;
}

}  // namespace

void print_status(const Json& r) {
  std::printf("sluiced %s, up %s s\n", field(r, "version").c_str(), field(r, "uptime_s").c_str());
  if (const Json* p = member(r, "policy")) {
    std::printf("policy    %s (%s), digest %s, service ports %s\n", field(*p, "name").c_str(),
                field(*p, "file").c_str(), field(*p, "digest").c_str(), field(*p, "service_ports").c_str());
  }
  std::printf("workers   %s, flows tracked %s\n", field(r, "workers").c_str(), field(r, "flows").c_str());
  std::printf("runs      %s live, credentials %s, state in %s\n", field(r, "runs").c_str(),
              field(r, "credentials").c_str(), field(r, "state_dir").c_str());
  if (const Json* c = member(r, "cluster"); c && c->is_object()) {
    std::printf("cluster   %s as %s, Redis %s\n", field(*c, "state").c_str(), field(*c, "box").c_str(),
                joined(elements_of(*c, "redis")).c_str());
  }
  for (const Json& p : elements_of(r, "ports")) {
    std::printf("%-9s %s, mac %s, link %s\n", field(p, "side").c_str(), field(p, "name").c_str(),
                field(p, "mac").c_str(), field(p, "link_up") == "yes" ? "up" : "down");
  }
}

namespace {

void print_tables(const Json& r) {
  if (const Json* t = member(r, "tables"); t && t->is_object()) {
    std::printf("\n%-18s %12s %12s %12s %12s\n", "table", "live", "capacity", "overflows", "reclaimed");
    for (const auto& table : t->items()) {
      const Json& v = table.value();
      std::printf("%-18s %12s %12s %12s %12s\n", table.key().c_str(), field(v, "live").c_str(),
                  field(v, "capacity").c_str(), field(v, "overflows").c_str(), field(v, "reclaimed").c_str());
    }
  }
  if (const Json& ports = elements_of(r, "ports"); !ports.empty()) {
    std::printf("\n%-8s %-18s %12s %12s %10s %10s %10s\n", "port", "name", "rx packets", "tx packets", "rx missed",
                "rx errors", "tx errors");
    for (const Json& p : ports) {
      std::printf("%-8s %-18s %12s %12s %10s %10s %10s\n", field(p, "side").c_str(), field(p, "name").c_str(),
                  field(p, "rx_packets").c_str(), field(p, "tx_packets").c_str(), field(p, "rx_missed").c_str(),
                  field(p, "rx_errors").c_str(), field(p, "tx_errors").c_str());
    }
  }
}

// The cluster sync, when the policy shares budgets.
void print_cluster(const Json& r) {
  const Json* c = member(r, "cluster");
  if (c == nullptr || !c->is_object()) return;
  std::printf("\ncluster   %s (fallback %s, sync every %s ms)", field(*c, "state").c_str(),
              field(*c, "fallback").c_str(), field(*c, "sync_interval_ms").c_str());
  const std::string error = field(*c, "last_error");
  std::printf("%s%s\n", error.empty() ? "" : ": ", error.c_str());
  std::printf("  syncs %s (failed %s, %s round trips), keys sent %s, published %s (learned from other boxes %s), "
              "watched %s, last sync %s us (max %s)\n",
              field(*c, "syncs").c_str(), field(*c, "sync_failures").c_str(), field(*c, "round_trips").c_str(),
              field(*c, "keys_sent").c_str(), field(*c, "keys_published").c_str(), field(*c, "keys_learned").c_str(),
              field(*c, "keys_watched").c_str(), field(*c, "last_sync_us").c_str(), field(*c, "max_sync_us").c_str());
  std::printf("  fallbacks %s, keys the fallback took %s (repaid to Redis since %s), keys seeded again after Redis "
              "lost them %s, admissions the spend log lost %s\n",
              field(*c, "fallbacks").c_str(), field(*c, "fallback_keys").c_str(), field(*c, "repaid_keys").c_str(),
              field(*c, "keys_reseeded").c_str(), field(*c, "spend_lost_records").c_str());
}

void print_rules(const Json& r) {
  const Json& rules = elements_of(r, "rules");
  if (rules.empty()) return;
  std::printf("\n%-24s %12s %12s %12s\n", "rule", "admitted", "refused", "answered");
  for (const Json& x : rules) {
    std::printf("%-24s %12s %12s %12s\n", field(x, "name").c_str(), field(x, "admitted").c_str(),
                field(x, "refused").c_str(), field(x, "answered").c_str());
  }
}

}  // namespace

void print_busiest(const Json& r) {
  const Json& keys = elements_of(r, "busiest");
  if (keys.empty()) return;
  std::printf("\n%-24s %-42s %12s\n", "busiest keys: rule", "key", "requests~");
  for (const Json& k : keys) {
    std::printf("%-24s %-42s %12s\n", field(k, "rule").c_str(), field(k, "key").c_str(), field(k, "count").c_str());
  }
}

// The counters in the daemon's order, the non-zero ones first.
void print_stats(const Json& r) {
  const Json* counters = member(r, "counters");
  const Json* help = member(r, "help");
  if (counters == nullptr || !counters->is_object()) return;
  std::printf("%-22s %14s  %s\n", "counter", "total", "what it counts");
  std::vector<std::pair<std::string, uint64_t>> rows;
  for (const auto& c : counters->items()) rows.emplace_back(c.key(), count_in(c.value()));
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return (a.second != 0) > (b.second != 0); });
  for (const auto& [name, value] : rows) {
    const Json* h = help ? member(*help, name) : nullptr;
    std::printf("%-22s %14" PRIu64 "  %s\n", name.c_str(), value, h && h->is_string() ? text_of(h).c_str() : "");
  }
  print_rules(r);
  print_busiest(r);
  print_tables(r);
  print_cluster(r);
}

void print_policy(const Json& r) {
  std::printf("policy    %s\nfile      %s\ndigest    %s\nports     %s\n", field(r, "name").c_str(),
              field(r, "file").c_str(), field(r, "digest").c_str(), field(r, "service_ports").c_str());
  for (const char* list : {"buckets", "rules"}) std::printf("%-9s %s\n", list, joined(elements_of(r, list)).c_str());
}

void print_runs(const Json& r) {
  const Json& runs = elements_of(r, "runs");
  if (runs.empty()) {
    std::printf("no live runs (room for %s)\n", field(r, "capacity").c_str());
    return;
  }
  std::printf("%-40s %10s  %s\n", "run", "budget/min", "started (UTC)");
  for (const Json& x : runs) {
    const std::string budget = count_of(x, "budget") == 0 ? "policy" : field(x, "budget");
    std::printf("%-40s %10s  %s\n", field(x, "token").c_str(), budget.c_str(), when(x, "started_unix").c_str());
  }
  std::printf("%zu live (room for %s)\n", runs.size(), field(r, "capacity").c_str());
}

void print_message(const Json& r) { std::printf("%s\n", field(r, "message").c_str()); }

void print_credentials(const Json& r) {
  std::printf("%s credentials loaded (room for %s)\n", field(r, "credentials").c_str(), field(r, "capacity").c_str());
  if (const Json* users = member(r, "users"); users && users->is_object() && !users->empty()) {
    std::printf("%-40s %12s\n", "user", "credentials");
    for (const auto& u : users->items()) std::printf("%-40s %12s\n", u.key().c_str(), text_of(&u.value()).c_str());
  }
}

// "minute" for 60, "12 s" for 12: a period as the policy would write it.
std::string period_text(const std::string& seconds) {
  if (seconds == "1") return "second";
  if (seconds == "60") return "minute";
  if (seconds == "3600") return "hour";
  if (seconds == "86400") return "day";
  return seconds + " s";
}

void print_bucket(const Json& r) {
  std::printf("bucket    %s\nkey       %s%s\n", field(r, "bucket").c_str(), field(r, "key").c_str(),
              field(r, "tracked") == "yes" ? "" : " (no state: full)");
  if (member(r, "window") != nullptr) {
    const std::string span = field(r, "window");
    std::printf("requests  %s of %s this %s\n", field(r, "requests").c_str(), field(r, "requests_limit").c_str(),
                span.c_str());
    std::printf("tokens    %s of %s this %s\n", field(r, "tokens").c_str(), field(r, "tokens_limit").c_str(),
                span.c_str());
  } else {
    std::printf("limit     %s per %s, burst %s\n", field(r, "limit").c_str(),
                period_text(member(r, "period_s") ? field(r, "period_s") : "60").c_str(), field(r, "burst").c_str());
  }
  std::printf("remaining %s\nreset     %s s\n", field(r, "remaining").c_str(), field(r, "reset_s").c_str());
  if (field(r, "refusing") == "yes") {
    const std::string retry =
        member(r, "retry_after_s") ? ", retry after " + field(r, "retry_after_s") + " s" : std::string();
    std::printf("refusing  yes%s\n", retry.c_str());
  }
}

void print_penalties(const Json& r) {
  const Json* boxes = member(r, "boxes");
  if (boxes == nullptr || !boxes->is_array() || boxes->empty()) {
    std::printf("no key is in a penalty box\n");
    return;
  }
  std::printf("%-24s %-40s %10s %10s\n", "rule", "key", "boxed ago", "left");
  for (const Json& b : *boxes) {
    std::printf("%-24s %-40s %8s s %8s s\n", field(b, "rule").c_str(), field(b, "key").c_str(),
                field(b, "boxed_s_ago").c_str(), field(b, "left_s").c_str());
  }
}

void print_usage_report(const Json& r) {
  std::printf("%s: %s tokens charged; %s of %s this %s%s (resets in %s s)\n", field(r, "deployment").c_str(),
              field(r, "tokens").c_str(), field(r, "window_tokens").c_str(), field(r, "tokens_limit").c_str(),
              field(r, "window").c_str(), field(r, "over") == "yes" ? ", over: its next request is refused" : "",
              field(r, "reset_s").c_str());
}

void print_policy_check(const Json& r) {
  std::printf("%s: ok: policy '%s', digest %s, %s rules, %s buckets\n", field(r, "file").c_str(),
              field(r, "name").c_str(), field(r, "digest").c_str(), field(r, "rules").c_str(),
              field(r, "buckets").c_str());
}

void print_reloaded(const Json& r) {
  std::printf("reloaded: policy '%s' from %s, digest %s, generation %s; every worker uses it\n",
              field(r, "name").c_str(), field(r, "file").c_str(), field(r, "digest").c_str(),
              field(r, "generation").c_str());
}

void print_hash(const Json& r) { std::printf("%s\n", field(r, "hash").c_str()); }

}  // namespace sluice::sluicectl
