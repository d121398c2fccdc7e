// See policy_loader.h. The YAML library only tokenises; everything about what
// a field may hold is checked here, against the reference in config/README.md.
#include "policy/policy_loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "http/token_chars.h"
#include "net/endpoint.h"
#include "policy/path_pattern.h"
#include "policy/response_template.h"

namespace sluice::policy {

std::string PolicyError::to_string() const {
  if (line == 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

bool parse_duration(std::string_view s, Nanos& out) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end == s.data()) return false;
  const std::string_view unit(end, static_cast<size_t>(s.data() + s.size() - end));
  Nanos scale;
  if (unit == "ms") scale = 1'000'000;
  else if (unit == "s") scale = time::kNanosPerSecond;
  else if (unit == "m") scale = time::kNanosPerMinute;
  else if (unit == "h") scale = 60 * time::kNanosPerMinute;
  else return false;
  if (n > UINT64_MAX / scale) return false;
  out = n * scale;
  return true;
}

bool parse_rate(std::string_view s, uint64_t& count, Nanos& period) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view n = s.substr(0, slash);
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
  if (ec != std::errc() || end != n.data() + n.size() || count == 0) return false;
  const std::string_view unit = s.substr(slash + 1);
  if (unit == "s" || unit == "sec" || unit == "second") period = time::kNanosPerSecond;
  else if (unit == "min" || unit == "minute") period = time::kNanosPerMinute;
  else if (unit == "h" || unit == "hour") period = 60 * time::kNanosPerMinute;
  else if (unit == "d" || unit == "day") period = 24 * 60 * time::kNanosPerMinute;
  else return false;
  return true;
}

bool parse_utc_offset(std::string_view s, int32_t& minutes) {
  if (s == "UTC" || s == "Z" || s == "+00:00" || s == "-00:00") {
    minutes = 0;
    return true;
  }
  // [+-]HH:MM, as ISO 8601 writes an offset.
  if (s.size() != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':') return false;
  for (const size_t i : {1, 2, 4, 5}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  const int hours = (s[1] - '0') * 10 + (s[2] - '0');
  const int mins = (s[4] - '0') * 10 + (s[5] - '0');
  if (mins >= 60) return false;
  const int total = hours * 60 + mins;
  if (total > 14 * 60) return false;
  minutes = s[0] == '-' ? -total : total;
  return true;
}

namespace {

// A key or value as messages quote it: at most 40 characters, anything but
// printable ASCII escaped. Messages may reach a log or another user; a
// line of some other file given as a policy must not come back whole.
std::string quoted(std::string_view key) {
  static constexpr size_t kMax = 40;
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  out += key.size() > kMax ? "'..." : "'";
  return out;
}

// Reads nodes strictly, collecting errors with their marks.
class Reader {
 public:
  Reader(std::string file, std::vector<PolicyError>& errors) : file_(std::move(file)), errors_(errors) {}

  Mark mark(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    return {file_, m.line + 1, m.column + 1};
  }

  void error(const YAML::Node& n, const std::string& message) {
    const Mark m = mark(n);
    errors_.push_back({file_, m.line, m.column, message});
  }

  void error_at(const Mark& m, const std::string& message) { errors_.push_back({file_, m.line, m.column, message}); }

  bool is_map(const YAML::Node& n, const std::string& what) {
    if (n.IsMap()) return true;
    error(n, what + " must be a mapping");
    return false;
  }


  // Reports every key of `map` not in `allowed`.
  // yaml-cpp keeps both entries of a key given twice and reads the first: a
  // second one, silently ignored, would be a setting that looks applied.
  void no_duplicates(const YAML::Node& map, const std::string& what) {
    std::vector<std::pair<std::string, int>> seen;
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      for (const auto& [name, line] : seen) {
        if (name == key) {
          error(kv.first, quoted(key) + " appears twice in " + what + " (first at line " + std::to_string(line) + ")");
        }
      }
      seen.emplace_back(key, mark(kv.first).line);
    }
  }

  void only(const YAML::Node& map, std::initializer_list<std::string_view> allowed, const std::string& what) {
    no_duplicates(map, what);
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      bool ok = false;
      for (std::string_view a : allowed) ok = ok || a == key;
      if (!ok) {
        std::string list;
        for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        error(kv.first, "unknown key " + quoted(key) + " in " + what + " (expected one of: " + list + ")");
      }
    }
  }

  std::optional<std::string> string(const YAML::Node& n, const std::string& what) {
    if (!n.IsScalar()) {
      error(n, what + " must be a string");
      return std::nullopt;
    }
    return n.Scalar();
  }

  std::optional<uint64_t> number(const YAML::Node& n, const std::string& what, uint64_t min, uint64_t max) {
    if (!n.IsScalar()) {
      error(n, what + " must be a number");
      return std::nullopt;
    }
    const std::string& s = n.Scalar();
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) {
      error(n, what + " must be a whole number, not " + quoted(s));
      return std::nullopt;
    }
    if (v < min || v > max) {
      error(n, what + " must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " + s);
      return std::nullopt;
    }
    return v;
  }

  std::optional<bool> boolean(const YAML::Node& n, const std::string& what) {
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
    error(n, what + " must be true or false");
    return std::nullopt;
  }

  // A string or a list of strings.
  std::vector<std::string> strings(const YAML::Node& n, const std::string& what) {
    std::vector<std::string> out;
    if (n.IsScalar()) {
      out.push_back(n.Scalar());
    } else if (n.IsSequence()) {
      for (const auto& item : n) {
        if (auto s = string(item, what + " entry")) out.push_back(*s);
      }
    } else {
      error(n, what + " must be a string or a list of strings");
    }
    return out;
  }

  std::optional<Nanos> duration(const YAML::Node& n, const std::string& what) {
    Nanos d = 0;
    if (!n.IsScalar() || !parse_duration(n.Scalar(), d)) {
      error(n, what + " must be a duration such as 250ms, 60s, 10m or 1h");
      return std::nullopt;
    }
    return d;
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  std::vector<PolicyError>& errors_;
};

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!http::is_tchar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

void read_methods(Reader& r, const YAML::Node& n, std::vector<std::string>& out) {
  for (const std::string& m : r.strings(n, "methods")) {
    if (!is_token(m)) {
      r.error(n, quoted(m) + " is not an HTTP method");
      continue;
    }
    out.push_back(m);
  }
}

void read_paths(Reader& r, const YAML::Node& n, std::vector<std::string>& out, const std::string& what) {
  for (const std::string& p : r.strings(n, what)) {
    std::string why;
    if (!PathPattern::compile(p, &why)) {
      r.error(n, "bad path pattern " + quoted(p) + ": " + why);
      continue;
    }
    out.push_back(p);
  }
}

// A refusal in RFC 9457's problem details: its media type; the body is
// written per bucket when the policy is compiled (policy::problem_body).
void make_problem(ResponseSpec& out) {
  out.headers.erase(std::remove_if(out.headers.begin(), out.headers.end(),
                                   [](const auto& h) {
                                     std::string lower = h.first;
                                     for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                                     return lower == "content-type";
                                   }),
                    out.headers.end());
  out.headers.emplace(out.headers.begin(), "Content-Type", "application/problem+json");
  out.body.clear();
  out.problem = true;
}

// `refusal` says whether `style` is known here (only refusals have one).
void read_response(Reader& r, const YAML::Node& n, ResponseSpec& out, const std::string& what, bool refusal = false) {
  if (n.IsScalar()) {  // just a status
    if (auto s = r.number(n, what, 100, 599)) out.status = static_cast<uint16_t>(*s);
    return;
  }
  if (!r.is_map(n, what)) return;
  if (refusal) {
    r.only(n, {"style", "status", "reason", "headers", "body"}, what);
  } else {
    r.only(n, {"status", "reason", "headers", "body"}, what);
  }
  if (n["status"]) {
    if (auto s = r.number(n["status"], what + " status", 100, 599)) out.status = static_cast<uint16_t>(*s);
  }
  if (n["reason"]) {
    if (auto s = r.string(n["reason"], what + " reason")) out.reason = *s;
  }
  if (n["headers"]) {
    const YAML::Node& h = n["headers"];
    if (r.is_map(h, what + " headers")) {
      r.no_duplicates(h, what + " headers");
      out.headers.clear();
      for (const auto& kv : h) {
        const std::string name = kv.first.Scalar();
        const auto value = r.string(kv.second, "header " + name);
        if (!is_token(name)) {
          r.error(kv.first, quoted(name) + " is not a valid header name");
          continue;
        }
        if (!value) continue;
        std::string why;
        if (!ResponseTemplate::check_header_value(*value, &why)) {
          r.error(kv.second, "header " + name + ": " + why);
          continue;
        }
        out.headers.emplace_back(name, *value);
      }
    }
  }
  if (n["body"]) {
    if (auto s = r.string(n["body"], what + " body")) out.body = *s;
  }
  if (refusal && n["style"]) {
    const auto style = r.string(n["style"], what + " style");
    if (style == "problem") {
      if (n["body"]) r.error(n["body"], what + ": style: problem writes the body; give a body or the style, not both");
      make_problem(out);
    } else if (style && *style != "plain") {
      r.error(n["style"], what + " style must be plain (the body as given) or problem (RFC 9457 problem details), not " +
                              quoted(*style));
    }
  }
}

void read_client_ip(Reader& r, const YAML::Node& n, ClientIpSpec& out) {
  if (!r.is_map(n, "client_ip")) return;
  r.only(n, {"headers", "hop", "prefer", "trusted_proxies", "ipv6_prefix", "proxy_protocol"}, "client_ip");
  if (n["headers"]) {
    for (const std::string& h : r.strings(n["headers"], "client_ip headers")) {
      if (!is_token(h)) {
        r.error(n["headers"], quoted(h) + " is not a valid header name");
        continue;
      }
      out.headers.push_back(h);
    }
  }
  if (n["hop"]) {
    const auto s = r.string(n["hop"], "client_ip hop");
    if (s == "first") out.hop = ClientIpSpec::Hop::kFirst;
    else if (s == "last") out.hop = ClientIpSpec::Hop::kLast;
    else if (s) r.error(n["hop"], "client_ip hop must be first or last");
  }
  if (n["prefer"]) {
    const auto s = r.string(n["prefer"], "client_ip prefer");
    if (s == "ipv4") out.prefer_ipv4 = true;
    else if (s == "order") out.prefer_ipv4 = false;
    else if (s) r.error(n["prefer"], "client_ip prefer must be ipv4 or order");
  }
  if (n["trusted_proxies"]) {
    for (const std::string& net : r.strings(n["trusted_proxies"], "client_ip trusted_proxies")) {
      if (auto parsed = net::parse_network(net)) {
        out.trusted_proxies.push_back(*parsed);
      } else {
        r.error(n["trusted_proxies"], quoted(net) + " is not an address or network (such as 198.18.0.0/15)");
      }
    }
  }
  if (n["ipv6_prefix"]) {
    if (auto v = r.number(n["ipv6_prefix"], "client_ip ipv6_prefix", 1, 128)) out.ipv6_prefix = static_cast<unsigned>(*v);
  }
  if (n["proxy_protocol"]) {
    const auto s = r.string(n["proxy_protocol"], "client_ip proxy_protocol");
    if (s == "off") out.proxy_protocol = ClientIpSpec::ProxyProtocol::kOff;
    else if (s == "strip") out.proxy_protocol = ClientIpSpec::ProxyProtocol::kStrip;
    else if (s == "keep") out.proxy_protocol = ClientIpSpec::ProxyProtocol::kKeep;
    else if (s) r.error(n["proxy_protocol"], "client_ip proxy_protocol must be off, strip or keep");
    if (out.proxy_protocol != ClientIpSpec::ProxyProtocol::kOff && out.trusted_proxies.empty()) {
      r.error(n["proxy_protocol"],
              "client_ip proxy_protocol needs trusted_proxies (the load balancers whose headers are believed)");
    }
  }
}

void read_credentials(Reader& r, const YAML::Node& n, CredentialSpec& out) {
  if (!r.is_map(n, "credentials")) return;
  r.only(n, {"header", "anonymous", "unknown"}, "credentials");
  if (n["header"]) {
    const auto h = r.string(n["header"], "credentials header");
    if (h && !is_token(*h)) r.error(n["header"], quoted(*h) + " is not a valid header name");
    else if (h) out.header = *h;
  }
  if (n["anonymous"]) out.anonymous = r.strings(n["anonymous"], "credentials anonymous");
  if (n["unknown"]) {
    const auto s = r.string(n["unknown"], "credentials unknown");
    if (s == "answer-401") out.unknown = CredentialSpec::Unknown::kAnswer401;
    else if (s == "forward") out.unknown = CredentialSpec::Unknown::kForward;
    else if (s) r.error(n["unknown"], "credentials unknown must be answer-401 or forward");
  }
}

void read_usage(Reader& r, const YAML::Node& n, UsageSpec& out) {
  if (!r.is_map(n, "usage")) return;
  r.only(n, {"response_field"}, "usage");
  if (n["response_field"]) {
    const auto h = r.string(n["response_field"], "usage response_field");
    if (h && (!is_token(*h) || h->size() > UsageSpec::kMaxNameLength)) {
      r.error(n["response_field"], quoted(*h) + " is not a header name of at most " +
                                       std::to_string(UsageSpec::kMaxNameLength) + " characters");
    } else if (h) {
      out.response_field = *h;
    }
  }
}

void read_cors(Reader& r, const YAML::Node& n, CorsSpec& out) {
  if (!r.is_map(n, "cors")) return;
  r.only(n, {"allow_origins", "preflight_paths", "expose_headers"}, "cors");
  if (n["allow_origins"]) out.allow_origins = r.strings(n["allow_origins"], "cors allow_origins");
  if (n["preflight_paths"]) read_paths(r, n["preflight_paths"], out.preflight_paths, "cors preflight_paths");
  if (n["expose_headers"]) {
    for (const std::string& h : r.strings(n["expose_headers"], "cors expose_headers")) {
      if (!is_token(h)) r.error(n["expose_headers"], quoted(h) + " is not a valid header name");
      else out.expose_headers.push_back(h);
    }
  }
}

// Bucket and rule names: they reach metric labels, RateLimit-Policy fields
// and every message about them, so they are plain.
bool plain_name(std::string_view s) {
  static constexpr size_t kMax = 64;
  if (s.empty() || s.size() > kMax) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  });
}
// Buckets one rule may charge (limiter::RateLimitFields::kMaxBudgets).
constexpr size_t kMaxRuleBuckets = 4;  // limiter/compiled_policy.h says the same; policy/ may not include it
constexpr Nanos kMaxDelay = 10 * time::kNanosPerSecond;  // a rule's delay_max
constexpr uint32_t kDefaultDelayPerKey = 8;
constexpr const char* kPlainName = " (1 to 64 letters, digits, '_', '-', '.' or ':')";

// `scope: cluster` shares the budget (a rate or a calendar window)
// with every box of the policy's `cluster` section.
void read_scope(Reader& r, const YAML::Node& n, BucketSpec& b) {
  if (!n["scope"]) return;
  const auto s = r.string(n["scope"], "bucket " + b.name + " scope");
  if (s == "box") b.scope = BucketSpec::Scope::kBox;
  else if (s == "cluster") b.scope = BucketSpec::Scope::kCluster;
  else if (s) r.error(n["scope"], "bucket " + b.name + ": scope must be box or cluster");
}

void read_bucket(Reader& r, const YAML::Node& key, const YAML::Node& n, BucketSpec& b) {
  b.mark = r.mark(key);
  b.name = key.Scalar();
  if (!plain_name(b.name)) {
    r.error(key, "bucket name " + quoted(b.name) + " is not a plain name" + kPlainName);
    b.name = "?";
  }
  if (!r.is_map(n, "bucket " + b.name)) return;
  const bool window = static_cast<bool>(n["window"]);
  if (window) {
    r.only(n, {"window", "utc_offset", "requests", "tokens", "quotas", "scope"}, "bucket " + b.name);
    read_scope(r, n, b);
    b.kind = BucketSpec::Kind::kCalendar;
    const auto w = r.string(n["window"], "bucket " + b.name + " window");
    if (w == "minute") b.window_minutes = 1;
    else if (w == "hour") b.window_minutes = 60;
    else if (w == "day") b.window_minutes = 24 * 60;
    else if (w) r.error(n["window"], "bucket " + b.name + ": window must be minute, hour or day, not " + quoted(*w));
    if (n["utc_offset"]) {
      const auto o = r.string(n["utc_offset"], "bucket " + b.name + " utc_offset");
      if (o && !parse_utc_offset(*o, b.utc_offset_minutes)) {
        r.error(n["utc_offset"], "bucket " + b.name + ": utc_offset must be UTC or +HH:MM / -HH:MM within 14 hours, not " +
                                     quoted(*o));
      }
    }
    if (n["requests"]) {
      if (auto v = r.number(n["requests"], "bucket " + b.name + " requests", 1, 4'000'000'000)) {
        b.requests = static_cast<uint32_t>(*v);
      }
    }
    if (n["tokens"]) {
      if (auto v = r.number(n["tokens"], "bucket " + b.name + " tokens", 1, 4'000'000'000)) b.tokens = *v;
    }
    if (!n["requests"] && !n["tokens"]) r.error(n, "bucket " + b.name + " needs requests, tokens or both per window");
    if (n["quotas"] && r.is_map(n["quotas"], "bucket " + b.name + " quotas")) {
      std::set<std::string> seen;
      for (const auto& kv : n["quotas"]) {
        BucketSpec::Override o;
        o.key = kv.first.Scalar();
        if (!seen.insert(o.key).second) r.error(kv.first, "quota for " + quoted(o.key) + " given twice");
        if (!r.is_map(kv.second, "quota " + o.key)) continue;
        r.only(kv.second, {"requests", "tokens"}, "quota " + o.key);
        if (kv.second["requests"]) {
          if (auto v = r.number(kv.second["requests"], "quota requests", 1, 4'000'000'000)) {
            o.requests = static_cast<uint32_t>(*v);
          }
        }
        if (kv.second["tokens"]) {
          if (auto v = r.number(kv.second["tokens"], "quota tokens", 1, 4'000'000'000)) o.tokens = *v;
        }
        b.overrides.push_back(std::move(o));
      }
    }
    return;
  }
  r.only(n, {"rate", "burst", "idle_drop_after", "scope"}, "bucket " + b.name);
  read_scope(r, n, b);
  b.kind = BucketSpec::Kind::kContinuous;
  if (!n["rate"]) {
    r.error(n, "bucket " + b.name + " needs a rate (such as 600/min or 10/s), or a window");
    return;
  }
  const auto rate = r.string(n["rate"], "bucket " + b.name + " rate");
  if (rate && !parse_rate(*rate, b.count, b.period)) {
    r.error(n["rate"], "bucket " + b.name + ": rate must be a count per s, min, hour or day, such as 600/min, not " + quoted(*rate));
    return;
  }
  b.burst = static_cast<uint32_t>(std::min<uint64_t>(b.count, UINT32_MAX));
  if (n["burst"]) {
    if (auto v = r.number(n["burst"], "bucket " + b.name + " burst", 1, 1'000'000'000)) b.burst = static_cast<uint32_t>(*v);
  }
  if (n["idle_drop_after"]) {
    if (auto d = r.duration(n["idle_drop_after"], "bucket " + b.name + " idle_drop_after")) b.idle_drop_after = *d;
  }
}

void read_key(Reader& r, const YAML::Node& n, KeySpec& k) {
  if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    if (s == "client_ip") k.kind = KeySpec::Kind::kClientIp;
    else if (s == "credential") k.kind = KeySpec::Kind::kCredential;
    else if (s == "user") k.kind = KeySpec::Kind::kUser;
    else if (s == "host") k.kind = KeySpec::Kind::kHost;
    else if (s == "destination") k.kind = KeySpec::Kind::kDestination;
    else r.error(n, "key must be client_ip, credential, user, host, destination, {path_param: NAME} or {header: NAME}, not " + quoted(s));
    return;
  }
  if (!r.is_map(n, "key")) return;
  r.only(n, {"path_param", "header"}, "key");
  if (n.size() != 1) {
    r.error(n, "key takes exactly one of path_param or header");
    return;
  }
  if (n["path_param"]) {
    k.kind = KeySpec::Kind::kPathParam;
    if (auto s = r.string(n["path_param"], "key path_param")) k.name = *s;
  } else if (n["header"]) {
    k.kind = KeySpec::Kind::kHeader;
    const auto s = r.string(n["header"], "key header");
    if (s && !is_token(*s)) r.error(n["header"], quoted(*s) + " is not a valid header name");
    else if (s) k.name = *s;
  }
}

std::optional<HeaderStyle> read_header_style(Reader& r, const YAML::Node& n) {
  const auto s = r.string(n, "header_style");
  if (s == "seed") return HeaderStyle::kSeed;
  if (s == "ietf") return HeaderStyle::kIetf;
  if (s == "none") return HeaderStyle::kNone;
  if (s) r.error(n, "header_style must be seed, ietf or none");
  return std::nullopt;
}

// Which requests the rule applies to.
void read_rule_match(Reader& r, const YAML::Node& n, const std::string& what, RuleSpec& rule) {
  if (n["methods"]) read_methods(r, n["methods"], rule.methods);
  if (n["path"]) read_paths(r, n["path"], rule.paths, what + " path");
  if (n["require"]) {
    for (const std::string& f : r.strings(n["require"], what + " require")) {
      if (!is_token(f)) r.error(n["require"], quoted(f) + " is not a valid header name");
      else rule.require_fields.push_back(f);
    }
  }
  if (n["live_run"]) {
    if (auto s = r.string(n["live_run"], what + " live_run")) rule.live_run_param = *s;
  }
}

// What a request is counted by, and what happens to one without it.
void read_rule_key(Reader& r, const YAML::Node& n, const std::string& what, RuleSpec& rule) {
  if (n["key"]) read_key(r, n["key"], rule.key);
  else r.error(n, what + " needs a key");
  if (n["when_key_missing"]) {
    const auto s = r.string(n["when_key_missing"], what + " when_key_missing");
    if (s == "skip") rule.missing_key = RuleSpec::MissingKey::kSkipRule;
    else if (s == "answer-400") rule.missing_key = RuleSpec::MissingKey::kAnswer400;
    else if (s) r.error(n["when_key_missing"], "when_key_missing must be skip or answer-400");
  }
}

void read_credential_slots(Reader& r, const YAML::Node& c, const std::string& what, RuleSpec::CredentialSlots& out) {
  if (!r.is_map(c, what + " credential_slots")) return;
  r.only(c, {"per_client_ip", "quiet", "overflow_bucket"}, "credential_slots");
  if (c["per_client_ip"]) {
    if (auto v = r.number(c["per_client_ip"], "credential_slots per_client_ip", 1, 64)) {
      out.per_client_ip = static_cast<uint32_t>(*v);
    }
  } else {
    r.error(c, "credential_slots needs per_client_ip");
  }
  if (c["quiet"]) {
    if (auto d = r.duration(c["quiet"], "credential_slots quiet")) out.quiet = *d;
  }
  if (c["overflow_bucket"]) {
    if (auto s = r.string(c["overflow_bucket"], "credential_slots overflow_bucket")) out.overflow_bucket = *s;
  } else {
    r.error(c, "credential_slots needs overflow_bucket (the budget a credential past the ceiling is counted in)");
  }
}

// The penalty box: `{ after: K, within: W, for: T }`.
void read_penalty(Reader& r, const YAML::Node& c, const std::string& what, RuleSpec::Penalty& out) {
  if (!r.is_map(c, what + " penalty")) return;
  r.only(c, {"after", "within", "for"}, "penalty");
  if (c["after"]) {
    if (auto v = r.number(c["after"], what + " penalty after", 1, 1'000'000)) out.after = static_cast<uint32_t>(*v);
  } else {
    r.error(c, what + " penalty needs after (the refusals that box a key)");
  }
  const auto bounded = [&](const char* key, Nanos most, Nanos& to) {
    if (!c[key]) {
      r.error(c, what + " penalty needs " + key);
      return;
    }
    const auto d = r.duration(c[key], what + " penalty " + key);
    if (!d) return;
    if (*d < time::kNanosPerSecond || *d > most) {
      r.error(c[key], what + " penalty " + key + " must be between 1s and " +
                          std::to_string(most / (3600 * time::kNanosPerSecond)) + "h");
      return;
    }
    to = *d;
  };
  bounded("within", 24 * 3600 * time::kNanosPerSecond, out.within);
  bounded("for", 7 * 24 * 3600 * time::kNanosPerSecond, out.box_for);
}

// Delay instead of refusal: `delay_max: 500ms`, `delay_per_key: 8`.
void read_delay(Reader& r, const YAML::Node& n, const std::string& what, RuleSpec::Delay& out) {
  if (n["delay_max"]) {
    if (const auto d = r.duration(n["delay_max"], what + " delay_max")) {
      // Held longer, a request's wait would outlast the deadlines clients
      // and load balancers keep for an answer.
      if (*d < 1'000'000 || *d > kMaxDelay) {
        r.error(n["delay_max"], what + " delay_max must be between 1ms and " +
                                    std::to_string(kMaxDelay / time::kNanosPerSecond) + "s");
      } else {
        out.max = *d;
      }
    }
  }
  if (n["delay_per_key"]) {
    if (!n["delay_max"]) r.error(n["delay_per_key"], what + ": delay_per_key needs delay_max");
    if (auto v = r.number(n["delay_per_key"], what + " delay_per_key", 1, 100'000)) {
      out.per_key = static_cast<uint32_t>(*v);
    }
  } else if (out.max != 0) {
    out.per_key = kDefaultDelayPerKey;
  }
}

// What an admitted request gets (forwarded, or an answer), and a refused one.
void read_rule_answers(Reader& r, const YAML::Node& n, const std::string& what, RuleSpec& rule) {
  if (n["answer"] && n["answer"].IsScalar() && n["answer"].Scalar() == "forward") {
    rule.answer_status = 0;  // admitted requests go to the origin (the default)
  } else if (n["answer"]) {
    ResponseSpec a;
    a.status = 0;
    read_response(r, n["answer"], a, what + " answer");
    rule.answer_status = a.status;
    if (!n["answer"].IsScalar()) rule.answer = a;
  }
  if (n["refusal"]) {
    ResponseSpec s;
    read_response(r, n["refusal"], s, what + " refusal", true);
    rule.refusal = s;
  }
}

void read_rule(Reader& r, const YAML::Node& n, RuleSpec& rule) {
  rule.mark = r.mark(n);
  if (!r.is_map(n, "rule")) return;
  r.only(n, {"name", "methods", "path", "require", "live_run", "key", "when_key_missing", "bucket", "credential_slots",
             "penalty", "concurrency", "delay_max", "delay_per_key", "answer", "refusal", "header_style", "shadow"},
         "rule");
  if (!n["name"]) r.error(n, "rule needs a name");
  else if (auto s = r.string(n["name"], "rule name")) {
    if (plain_name(*s)) {
      rule.name = *s;
    } else {
      r.error(n["name"], "rule name " + quoted(*s) + " is not a plain name" + kPlainName);
    }
  }
  const std::string what = "rule " + (rule.name.empty() ? std::string("?") : rule.name);
  read_rule_match(r, n, what, rule);
  read_rule_key(r, n, what, rule);
  if (n["bucket"] && n["bucket"].IsSequence()) {
    // Layered budgets: `bucket: [per-second, per-day]`.
    const YAML::Node& list = n["bucket"];
    if (list.size() == 0 || list.size() > kMaxRuleBuckets) {
      r.error(list, what + ": bucket lists 1 to " + std::to_string(kMaxRuleBuckets) + " buckets, not " +
                        std::to_string(list.size()));
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < list.size() && i < kMaxRuleBuckets; ++i) {
      const auto s = r.string(list[i], what + " bucket");
      if (!s) continue;
      if (!seen.insert(*s).second) r.error(list[i], what + ": bucket " + *s + " is listed twice");
      if (i == 0) {
        rule.bucket = *s;
      } else {
        rule.also_buckets.push_back(*s);
      }
    }
  } else if (n["bucket"]) {
    if (auto s = r.string(n["bucket"], what + " bucket")) rule.bucket = *s;
  } else {
    r.error(n, what + " needs a bucket");
  }
  if (n["credential_slots"]) read_credential_slots(r, n["credential_slots"], what, rule.credential_slots);
  if (n["penalty"]) read_penalty(r, n["penalty"], what, rule.penalty);
  if (n["concurrency"]) {
    if (auto v = r.number(n["concurrency"], what + " concurrency", 1, 1'000'000)) rule.concurrency = static_cast<uint32_t>(*v);
  }
  read_delay(r, n, what, rule.delay);
  read_rule_answers(r, n, what, rule);
  if (n["header_style"]) rule.header_style = read_header_style(r, n["header_style"]);
  if (n["shadow"]) {
    if (auto b = r.boolean(n["shadow"], what + " shadow")) rule.shadow = *b;
  }
}

// Checks that hold across sections: names refer to things that exist, and
// path parameters a rule uses are in every one of its patterns.
void cross_check(Reader& r, Policy& p) {
  std::set<std::string> bucket_names;
  for (const BucketSpec& b : p.buckets) {
    if (b.kind == BucketSpec::Kind::kContinuous && b.count != 0 && b.burst != 0) {
      // A capacity past 2^62 ns cannot be represented (1/hour with a burst of a billion).
      const Nanos interval = (b.period + b.count - 1) / b.count;
      if (interval > (uint64_t{1} << 62) / b.burst) {
        r.error_at(b.mark, "bucket " + b.name + ": rate and burst give a bucket too deep to represent");
      }
    }
    bucket_names.insert(b.name);
    if (b.scope == BucketSpec::Scope::kCluster && !p.cluster) {
      r.error_at(b.mark, "bucket " + b.name + ": scope: cluster needs a cluster section (the Redis the boxes share)");
    }
  }
  std::set<std::string> rule_names;
  for (const RuleSpec& rule : p.rules) {
    if (rule.name.empty()) continue;
    const std::string what = "rule " + rule.name;
    if (!rule_names.insert(rule.name).second) r.error_at(rule.mark, "two rules are named " + rule.name);
    if (!rule.bucket.empty() && bucket_names.count(rule.bucket) == 0) {
      r.error_at(rule.mark, what + ": no bucket named " + rule.bucket + " in buckets");
    }
    for (const std::string& b : rule.also_buckets) {
      if (bucket_names.count(b) == 0) r.error_at(rule.mark, what + ": no bucket named " + b + " in buckets");
    }
    if (rule.credential_slots.per_client_ip != 0) {
      if (rule.key.kind != KeySpec::Kind::kCredential && rule.key.kind != KeySpec::Kind::kUser) {
        r.error_at(rule.mark, what + ": credential_slots needs a rule keyed by credential or user");
      }
      if (!rule.credential_slots.overflow_bucket.empty() &&
          bucket_names.count(rule.credential_slots.overflow_bucket) == 0) {
        r.error_at(rule.mark, what + ": no bucket named " + rule.credential_slots.overflow_bucket + " in buckets");
      }
    }
    for (const std::string& param : {rule.key.kind == KeySpec::Kind::kPathParam ? rule.key.name : std::string(),
                                     rule.live_run_param}) {
      if (param.empty()) continue;
      if (rule.paths.empty()) {
        r.error_at(rule.mark, what + ": uses path parameter {" + param + "} but has no path");
        continue;
      }
      for (const std::string& pattern : rule.paths) {
        const auto compiled = PathPattern::compile(pattern, nullptr);
        if (compiled && compiled->param_index(param) < 0) {
          r.error_at(rule.mark, what + ": path " + pattern + " has no parameter {" + param + "}");
        }
      }
    }
    if (rule.answer_status != 0 && (rule.answer_status < 200 || rule.answer_status > 599)) {
      r.error_at(rule.mark, what + ": answer must be a status from 200 to 599");
    }
    if (rule.delay.max != 0) {
      // Only a rate bucket says when a request will conform; a window
      // would hold it until the next window, past any sane delay.
      bool rate = false;
      for (const BucketSpec& b : p.buckets) {
        const bool named = b.name == rule.bucket ||
                           std::find(rule.also_buckets.begin(), rule.also_buckets.end(), b.name) != rule.also_buckets.end();
        if (named && b.kind == BucketSpec::Kind::kContinuous) rate = true;
      }
      if (!rate) r.error_at(rule.mark, what + ": delay_max needs a rate bucket (calendar windows are never delayed)");
    }
  }
}

// The document's root, or nothing (and the error) if the text is not YAML or
// holds no document.
std::optional<YAML::Node> parse_document(std::string_view text, const std::string& name,
                                         std::vector<PolicyError>& errors) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    errors.push_back({name, e.mark.line + 1, e.mark.column + 1, "not valid YAML: " + e.msg});
    return std::nullopt;
  }
  if (!root || root.IsNull()) {
    errors.push_back({name, 0, 0, "the file is empty"});
    return std::nullopt;
  }
  return root;
}

// The format version, the policy's name, and its policy-wide mode and header style.
void read_preamble(Reader& r, const YAML::Node& root, Policy& p) {
  if (!root["sluice"]) {
    r.error(root, "the policy needs 'sluice: 1' (the format version)");
  } else if (auto v = r.number(root["sluice"], "sluice (the format version)", 1, 1)) {
    (void)v;
  }
  if (root["name"]) {
    if (auto s = r.string(root["name"], "name")) p.name = *s;
  }
  if (root["mode"]) {
    const auto s = r.string(root["mode"], "mode");
    if (s == "enforce") p.shadow = false;
    else if (s == "shadow") p.shadow = true;
    else if (s) r.error(root["mode"], "mode must be enforce or shadow");
  }
  if (root["header_style"]) {
    if (auto s = read_header_style(r, root["header_style"])) p.header_style = *s;
  }
}

void read_service_ports(Reader& r, const YAML::Node& sp, std::vector<uint16_t>& out) {
  if (!sp.IsSequence()) {
    r.error(sp, "service_ports must be a list of TCP ports");
    return;
  }
  for (const auto& port : sp) {
    if (auto v = r.number(port, "service port", 1, 65535)) out.push_back(static_cast<uint16_t>(*v));
  }
}

void read_limits(Reader& r, const YAML::Node& l, Policy& p) {
  if (!r.is_map(l, "limits")) return;
  r.only(l, {"max_head_bytes", "max_fields", "allow_upgrade", "allow_connect", "allow_h2_prior_knowledge"}, "limits");
  if (l["max_head_bytes"]) {
    if (auto v = r.number(l["max_head_bytes"], "limits max_head_bytes", 1024, 64 * 1024)) {
      p.max_head_bytes = static_cast<uint32_t>(*v);
    }
  }
  if (l["max_fields"]) {
    if (auto v = r.number(l["max_fields"], "limits max_fields", 1, 10000)) p.max_fields = static_cast<uint16_t>(*v);
  }
  if (l["allow_upgrade"]) {
    if (auto b = r.boolean(l["allow_upgrade"], "limits allow_upgrade")) p.allow_upgrade = *b;
  }
  if (l["allow_connect"]) {
    if (auto b = r.boolean(l["allow_connect"], "limits allow_connect")) p.allow_connect = *b;
  }
  if (l["allow_h2_prior_knowledge"]) {
    if (auto b = r.boolean(l["allow_h2_prior_knowledge"], "limits allow_h2_prior_knowledge")) {
      p.allow_h2_prior_knowledge = *b;
    }
  }
}

void read_deadlines(Reader& r, const YAML::Node& d, Deadlines& out) {
  if (!r.is_map(d, "deadlines")) return;
  r.only(d, {"head", "body", "keep_alive", "response"}, "deadlines");
  const auto one = [&](const char* key, Nanos& into) {
    if (!d[key]) return;
    const auto v = r.duration(d[key], std::string("deadlines ") + key);
    if (!v) return;
    if (*v != 0 && *v < time::kNanosPerSecond / 10) {
      r.error(d[key], std::string("deadlines ") + key + " must be 0s (off) or at least 100ms");
    } else if (*v > 24 * 60 * time::kNanosPerMinute) {
      r.error(d[key], std::string("deadlines ") + key + " must be at most 24h");
    } else {
      into = *v;
    }
  };
  one("head", out.head);
  one("body", out.body);
  one("keep_alive", out.keep_alive);
  one("response", out.response);
}

void read_on_off(Reader& r, const YAML::Node& n, const char* key, bool& out) {
  const auto s = r.string(n, key);
  if (s == "on") out = true;
  else if (s == "off") out = false;
  else if (s) r.error(n, std::string(key) + " must be on or off");
}

void read_binding(Reader& r, const YAML::Node& n, bool syn_proxy, bool& out) {
  const auto s = r.string(n, "binding");
  if (s == "delayed") out = true;
  else if (s == "immediate") out = false;
  else if (s) r.error(n, "binding must be delayed or immediate");
  // Only the SYN proxy can hold a connection back from the origin.
  if (s == "delayed" && !syn_proxy) r.error(n, "binding: delayed needs syn_proxy: on");
}

void read_after_answer(Reader& r, const YAML::Node& n, AfterAnswer& out) {
  const auto s = r.string(n, "after_answer");
  if (s == "keep-alive") out = AfterAnswer::kKeepAlive;
  else if (s == "close") out = AfterAnswer::kClose;
  else if (s) r.error(n, "after_answer must be keep-alive or close");
}

void read_ambiguous_paths(Reader& r, const YAML::Node& n, AmbiguousPaths& out) {
  const auto s = r.string(n, "ambiguous_paths");
  if (s == "refuse") out = AmbiguousPaths::kRefuse;
  else if (s == "strictest") out = AmbiguousPaths::kStrictest;
  else if (s) r.error(n, "ambiguous_paths must be refuse or strictest");
}

void read_exemptions(Reader& r, const YAML::Node& ex, std::vector<Exemption>& out) {
  if (!ex.IsSequence()) {
    r.error(ex, "exempt must be a list");
    return;
  }
  for (const auto& e : ex) {
    if (!r.is_map(e, "exemption")) continue;
    r.only(e, {"methods", "path"}, "exemption");
    Exemption x;
    x.mark = r.mark(e);
    if (e["methods"]) read_methods(r, e["methods"], x.methods);
    if (!e["path"]) {
      r.error(e, "exemption needs a path (matched exactly)");
    } else if (auto s = r.string(e["path"], "exemption path")) {
      if (s->empty() || s->front() != '/') r.error(e["path"], "exemption path must start with '/'");
      x.path = *s;
    }
    out.push_back(std::move(x));
  }
}

void read_buckets(Reader& r, const YAML::Node& bs, std::vector<BucketSpec>& out) {
  if (!r.is_map(bs, "buckets")) return;
  r.no_duplicates(bs, "buckets");
  for (const auto& kv : bs) {
    BucketSpec b;
    read_bucket(r, kv.first, kv.second, b);
    out.push_back(std::move(b));
  }
}

// cluster tls: the files OpenSSL loads at start (absolute paths), the name
// the certificates must carry. Unix sockets take no TLS.
void read_cluster_tls(Reader& r, const YAML::Node& n, ClusterSpec& c) {
  if (!r.is_map(n, "cluster tls")) return;
  r.only(n, {"ca_file", "cert_file", "key_file", "server_name"}, "cluster tls");
  ClusterSpec::Tls t;
  const auto path = [&](const char* key, std::string& out) {
    if (!n[key]) return;
    const auto f = r.string(n[key], std::string("cluster tls ") + key);
    if (f && (f->empty() || f->front() != '/')) r.error(n[key], std::string("cluster tls ") + key + " must be an absolute path");
    else if (f) out = *f;
  };
  if (!n["ca_file"]) r.error(n, "cluster tls needs ca_file: the CA the servers' certificates are checked against");
  path("ca_file", t.ca_file);
  path("cert_file", t.cert_file);
  path("key_file", t.key_file);
  if (n["cert_file"] && !n["key_file"]) r.error(n["cert_file"], "cluster tls cert_file needs key_file, its key");
  if (n["key_file"] && !n["cert_file"]) r.error(n["key_file"], "cluster tls key_file needs cert_file, its certificate");
  if (n["server_name"]) {
    const auto name = r.string(n["server_name"], "cluster tls server_name");
    const bool printable =
        name && std::all_of(name->begin(), name->end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
    if (name && (name->empty() || name->size() > 253 || !printable)) {
      r.error(n["server_name"], "cluster tls server_name must be a host name or an address (1 to 253 characters)");
    } else if (name) t.server_name = *name;
  }
  for (const std::string& e : c.redis) {
    if (e.starts_with("unix:")) r.error(n, "cluster tls is for TCP endpoints: " + quoted(e) + " is a Unix socket");
  }
  c.tls = std::move(t);
}

// The Redis the boxes share budgets through, and how they sync.
void read_cluster(Reader& r, const YAML::Node& n, std::optional<ClusterSpec>& out) {
  if (!r.is_map(n, "cluster")) return;
  r.only(n,
         {"redis", "key_prefix", "sync_interval", "fallback", "boxes", "secret_file", "username", "password_file", "tls"},
         "cluster");
  ClusterSpec c;
  c.mark = r.mark(n);
  if (!n["redis"]) r.error(n, "cluster needs redis: the Redis Cluster's seed nodes, or one primary");
  else {
    const std::vector<std::string> endpoints = r.strings(n["redis"], "cluster redis");
    for (const std::string& e : endpoints) {
      std::string why;
      if (e.find('@') != std::string::npos) {
        // user:password@host would put the password wherever the endpoint
        // is shown (logs, sluicectl status, the metrics' labels).
        r.error(n["redis"], "cluster redis " + quoted(e.substr(e.find('@') + 1)) +
                                ": credentials do not go in the endpoint; give username and password_file");
      } else if (!net::parse_endpoint(e, why)) {
        r.error(n["redis"], "cluster redis " + quoted(e) + ": " + why);
      }
    }
    if (endpoints.empty() && n["redis"].IsSequence()) r.error(n["redis"], "cluster redis names no endpoint");
    c.redis = endpoints;
  }
  if (n["key_prefix"]) {
    const auto p = r.string(n["key_prefix"], "cluster key_prefix");
    if (p && (p->empty() || p->size() > 64 || !plain_name(*p) || p->find_first_of("{}") != std::string::npos)) {
      r.error(n["key_prefix"], "cluster key_prefix must be a plain name" + std::string(kPlainName));
    } else if (p) c.key_prefix = *p;
  }
  if (n["sync_interval"]) {
    if (const auto d = r.duration(n["sync_interval"], "cluster sync_interval")) {
      if (*d < 5'000'000 || *d > 10 * time::kNanosPerSecond) {
        r.error(n["sync_interval"], "cluster sync_interval must be from 5ms to 10s");
      } else c.sync_interval = *d;
    }
  }
  if (n["fallback"]) {
    const auto f = r.string(n["fallback"], "cluster fallback");
    if (f == "local-share") c.fallback = ClusterSpec::Fallback::kLocalShare;
    else if (f == "local-full") c.fallback = ClusterSpec::Fallback::kLocalFull;
    else if (f) r.error(n["fallback"], "cluster fallback must be local-share or local-full");
  }
  if (n["boxes"]) {
    if (const auto b = r.number(n["boxes"], "cluster boxes", 1, 1024)) c.boxes = static_cast<uint32_t>(*b);
  } else if (c.fallback == ClusterSpec::Fallback::kLocalShare) {
    r.error(n, "cluster needs boxes (how many boxes share the budgets) for fallback: local-share");
  }
  if (!n["secret_file"]) r.error(n, "cluster needs secret_file: the bucket-key secret every box shares");
  else if (const auto f = r.string(n["secret_file"], "cluster secret_file")) {
    if (f->empty() || f->front() != '/') r.error(n["secret_file"], "cluster secret_file must be an absolute path");
    else c.secret_file = *f;
  }
  if (n["username"]) {
    const auto u = r.string(n["username"], "cluster username");
    const bool printable = u && std::all_of(u->begin(), u->end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
    if (u && (u->empty() || u->size() > 128 || !printable)) {
      r.error(n["username"], "cluster username must be 1 to 128 printable characters, no spaces (a Redis ACL user)");
    } else if (u) c.username = *u;
    if (!n["password_file"]) r.error(n["username"], "cluster username needs password_file: the user's password");
  }
  if (n["password_file"]) {
    if (const auto f = r.string(n["password_file"], "cluster password_file")) {
      if (f->empty() || f->front() != '/') r.error(n["password_file"], "cluster password_file must be an absolute path");
      else c.password_file = *f;
    }
  }
  if (n["tls"]) read_cluster_tls(r, n["tls"], c);
  out = std::move(c);
}

void read_rules(Reader& r, const YAML::Node& rs, std::vector<RuleSpec>& out) {
  if (!rs.IsSequence()) {
    r.error(rs, "rules must be a list (the first rule that matches a request applies)");
    return;
  }
  for (const auto& n : rs) {
    RuleSpec rule;
    read_rule(r, n, rule);
    out.push_back(std::move(rule));
  }
}

// The answers the appliance gives itself, each with its default status.
void read_answers(Reader& r, const YAML::Node& root, Policy& p) {
  p.refusal.status = 429;
  if (root["refusal"]) read_response(r, root["refusal"], p.refusal, "refusal", true);
  p.unauthorized.status = 401;
  if (root["unauthorized"]) read_response(r, root["unauthorized"], p.unauthorized, "unauthorized");
  p.not_found.status = 404;
  if (root["not_found"]) read_response(r, root["not_found"], p.not_found, "not_found");
}

// Each section is read in full even after an error in another: the author
// sees every mistake in one pass, never half of them.
void read_policy(Reader& r, const YAML::Node& root, Policy& p) {
  r.only(root, {"sluice", "name", "mode", "header_style", "service_ports", "limits", "client_ip", "credentials", "cors",
                "usage", "after_answer", "ambiguous_paths", "deadlines", "syn_proxy", "binding", "adoption", "exempt", "buckets", "cluster", "rules", "refusal", "unauthorized", "not_found"},
         "the policy");
  read_preamble(r, root, p);
  if (root["service_ports"]) read_service_ports(r, root["service_ports"], p.service_ports);
  if (root["limits"]) read_limits(r, root["limits"], p);
  if (root["client_ip"]) read_client_ip(r, root["client_ip"], p.client_ip);
  if (root["credentials"]) read_credentials(r, root["credentials"], p.credentials);
  if (root["cors"]) read_cors(r, root["cors"], p.cors);
  if (root["usage"]) read_usage(r, root["usage"], p.usage);
  if (root["after_answer"]) read_after_answer(r, root["after_answer"], p.after_answer);
  if (root["ambiguous_paths"]) read_ambiguous_paths(r, root["ambiguous_paths"], p.ambiguous_paths);
  if (root["deadlines"]) read_deadlines(r, root["deadlines"], p.deadlines);
  if (root["syn_proxy"]) read_on_off(r, root["syn_proxy"], "syn_proxy", p.syn_proxy);
  if (root["adoption"]) read_on_off(r, root["adoption"], "adoption", p.adoption);
  if (root["binding"]) read_binding(r, root["binding"], p.syn_proxy, p.delayed_binding);
  if (root["exempt"]) read_exemptions(r, root["exempt"], p.exemptions);
  if (root["buckets"]) read_buckets(r, root["buckets"], p.buckets);
  if (root["cluster"]) read_cluster(r, root["cluster"], p.cluster);
  if (root["rules"]) read_rules(r, root["rules"], p.rules);
  read_answers(r, root, p);
}

}  // namespace

LoadResult load_policy_text(std::string_view text, const std::string& name) {
  LoadResult result;
  Reader r(name, result.errors);
  const std::optional<YAML::Node> root = parse_document(text, name, result.errors);
  if (!root) return result;
  if (!r.is_map(*root, "a policy")) return result;
  Policy p;
  p.file = name;
  read_policy(r, *root, p);
  cross_check(r, p);
  if (result.errors.empty()) result.policy = std::move(p);
  return result;
}

LoadResult load_policy_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    LoadResult result;
    result.errors.push_back({path, 0, 0, "cannot open the file"});
    return result;
  }
  std::stringstream s;
  s << f.rdbuf();
  return load_policy_text(s.str(), path);
}

}  // namespace sluice::policy
