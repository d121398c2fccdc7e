// The policy as the operator wrote it: a plain, owning description of one
// profile (config/*.yaml), produced by the loader and turned by
// compile_policy() into the structures the hot path reads. Every field is
// documented in config/README.md; defaults here are the defaults there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/ip_address.h"
#include "time/clock.h"

namespace sluice::policy {

using time::Nanos;

// Where a file's node came from, for error messages (1-based).
struct Mark {
  std::string file;
  int line = 0;
  int column = 0;
};

// X02: which rate-limit fields an admitted (and refused) response carries.
enum class HeaderStyle : uint8_t {
  kNone,  // no rate-limit fields (DQ10; RF's seed sends only Retry-After on 429)
  kSeed,  // RateLimit-Limit, -Remaining, -Reset, -Policy: "<limit>;w=<window>" (TB16)
  kIetf,  // draft-ietf-httpapi-ratelimit-headers: RateLimit-Policy: "name";q=..;w=.., RateLimit: "name";r=..;t=..
};

struct ClientIpSpec {
  // Headers that may carry the client's address, in order of preference.
  // Empty: the connection's address only.
  std::vector<std::string> headers;
  // For list-valued headers (X-Forwarded-For): which element is the client.
  enum class Hop : uint8_t { kFirst, kLast } hop = Hop::kFirst;
  // RF06: take the first valid IPv4 across all headers before any IPv6.
  bool prefer_ipv4 = false;
  // X04: the headers are believed only from these peers; from anyone else
  // the connection's address is used. Empty: never believed.
  std::vector<net::IpNetwork> trusted_proxies;
  // X03: IPv6 clients are keyed by this prefix (128: the whole address).
  unsigned ipv6_prefix = 128;
  // The PROXY protocol (v1 and v2) on service ports: a connection from a
  // trusted proxy must begin with a header naming the client it relays,
  // and that client stands for the connection's address (keys, and X04 for
  // the headers above); a header from anyone else ends the connection.
  // kStrip takes the header out of the stream to the origin, kKeep passes
  // it on (an origin that reads it itself).
  enum class ProxyProtocol : uint8_t { kOff, kStrip, kKeep } proxy_protocol = ProxyProtocol::kOff;
};

struct CredentialSpec {
  std::string header = "Authorization";
  // RF05: credentials that identify nobody (a shared anonymous token): such a
  // request has no user and is keyed by client IP.
  std::vector<std::string> anonymous;
  // RF10: what happens to a request whose rule keys on the user when it has
  // no credential, or one the credential map does not know.
  enum class Unknown : uint8_t { kAnswer401, kForward } unknown = Unknown::kAnswer401;
};

// DQ05 read from the responses: the origin reports the tokens a request
// used in a response header field, charged to the request's minute window
// when its response ends.
struct UsageSpec {
  std::string response_field;  // empty: tokens come only from `sluicectl usage report`
  static constexpr size_t kMaxNameLength = 32;
};

// What happens to a connection after the appliance answered one of its
// requests itself (a refusal, a 401, a 404): it stays open (the request's
// bytes are cut out of the client's stream and the answer spliced into the
// origin's), or it is closed after the answer, as the seeds did.
// Answers to malformed requests always close.
enum class AfterAnswer : uint8_t { kKeepAlive, kClose };

// What the limiter does with a request whose path is not in normal form
// (policy/path_form.h): origins read such a path differently, and the
// appliance cannot know which reading its origin takes. Either way nothing
// that grants more (an exemption, a preflight exemption) applies to it.
enum class AmbiguousPaths : uint8_t {
  kRefuse,     // answered 400 (the bad_request answer), never forwarded
  kStrictest,  // judged by its strictest reading: the raw path and the normalised one, the stricter rule wins
};

struct CorsSpec {
  // TB08: origins granted. Empty: no preflight handling at all, and no CORS
  // fields on refusals.
  std::vector<std::string> allow_origins;
  // Paths (patterns) on which a preflight is answered before the limiter.
  std::vector<std::string> preflight_paths;
  // TB09: fields a refusal to a granted origin exposes to scripts.
  std::vector<std::string> expose_headers;
};

struct Exemption {
  Mark mark;
  std::vector<std::string> methods;  // empty: any
  std::string path;                  // exact
};

// A budget: either continuous (GCRA) or a calendar window (RPM/TPM, and
// their hour and day forms).
struct BucketSpec {
  Mark mark;
  std::string name;
  enum class Kind : uint8_t { kContinuous, kCalendar } kind = Kind::kContinuous;
  // Continuous: `count` requests per `period`, `burst` back to back.
  uint64_t count = 0;
  Nanos period = 0;
  uint32_t burst = 0;
  // Calendar: quotas per window (0: none), a window of `window_minutes`
  // (a minute, an hour or a day) beginning at whole minutes, hours or days
  // of UTC + utc_offset_minutes.
  uint32_t requests = 0;
  uint64_t tokens = 0;
  uint32_t window_minutes = 1;
  int32_t utc_offset_minutes = 0;
  // DQ: per-key quotas, for keys named here (a deployment's own RPM/TPM).
  struct Override {
    std::string key;
    uint32_t requests = 0;
    uint64_t tokens = 0;
  };
  std::vector<Override> overrides;
  // RF08: an idle bucket is dropped this long after it is full again
  // (default one minute: a bucket dropped is one nobody has used for a while).
  Nanos idle_drop_after = time::kNanosPerMinute;
  // A budget of this box alone (the seeds' per-process floor), or
  // one every box of the `cluster` section shares through Redis.
  enum class Scope : uint8_t { kBox, kCluster } scope = Scope::kBox;
};

// Where the boxes that share `scope: cluster` budgets meet.
struct ClusterSpec {
  Mark mark;
  std::vector<std::string> redis;   // endpoints (HOST:PORT, [IPV6]:PORT, unix:/path): cluster seeds or one primary
  std::string key_prefix = "sluice";
  Nanos sync_interval = 20'000'000;  // 20 ms
  // What a box enforces while Redis cannot be reached: the budget divided
  // by `boxes` (local-share), or the whole budget (local-full).
  enum class Fallback : uint8_t { kLocalShare, kLocalFull } fallback = Fallback::kLocalShare;
  uint32_t boxes = 0;        // the boxes expected to share the budgets (local-share divides by it)
  std::string secret_file;   // the bucket-key secret every box shares (keys meet only if it does)
  // Redis authentication (AUTH): the ACL user (empty: Redis's `default`,
  // as requirepass has it) and the file its password is read from (empty:
  // none). Never in the endpoint, where logs and status would show it.
  std::string username;
  std::string password_file;
  // TLS to every node: the CA the servers' certificates are checked
  // against, a client certificate where Redis wants one, and the name every
  // certificate must carry (empty: each endpoint's own host).
  struct Tls {
    std::string ca_file, cert_file, key_file, server_name;
    bool operator==(const Tls&) const = default;
  };
  std::optional<Tls> tls;
  bool operator==(const ClusterSpec& o) const {
    return redis == o.redis && key_prefix == o.key_prefix && sync_interval == o.sync_interval &&
           fallback == o.fallback && boxes == o.boxes && secret_file == o.secret_file && username == o.username &&
           password_file == o.password_file && tls == o.tls;
  }
};

// What a rule's bucket is keyed by.
struct KeySpec {
  enum class Kind : uint8_t {
    kClientIp,     // the resolved client address (TB10, RF06)
    kCredential,   // the normalised credential (TB05)
    kUser,         // the credential's user from the credential map (RF04); no user: client IP (RF05)
    kPathParam,    // a {param} of the rule's path pattern (a run token, a workspace)
    kHeader,       // a request field's value (DQ01: the deployment)
    kHost,         // the Host (or absolute-form authority)
    kDestination,  // the connection's destination address and port (DQ01)
  } kind = Kind::kClientIp;
  std::string name;  // the parameter or field name
};

struct ResponseSpec {
  uint16_t status = 429;
  std::string reason;  // empty: the standard one
  std::vector<std::pair<std::string, std::string>> headers;  // values may hold {placeholders}
  std::string body;
  // A refusal's `style: problem`: the body is RFC 9457 problem details of
  // the rate-limit fields draft's quota-exceeded type, naming the bucket
  // that refused (written per bucket when the policy is compiled:
  // policy::problem_body); `body` is then empty.
  bool problem = false;
};

struct RuleSpec {
  Mark mark;
  std::string name;
  // Match: all given conditions must hold.
  std::vector<std::string> methods;        // empty: any
  std::vector<std::string> paths;          // patterns; empty: any
  std::vector<std::string> require_fields; // fields that must be present
  std::string live_run_param;              // the {param} naming a run that must be live
  // Key and budget.
  KeySpec key;
  enum class MissingKey : uint8_t { kSkipRule, kAnswer400 } missing_key = MissingKey::kSkipRule;
  std::string bucket;
  // Layered budgets: buckets charged beside `bucket`, all or none (the
  // request is admitted only if every one admits it). At most 3.
  std::vector<std::string> also_buckets;
  // TB07: at most this many credentials per client IP hold budgets of their own.
  struct CredentialSlots {
    uint32_t per_client_ip = 0;  // 0: no ceiling
    Nanos quiet = 60 * time::kNanosPerSecond;
    std::string overflow_bucket;  // where a credential past the ceiling is counted (keyed by client IP)
  } credential_slots;
  // Penalty box: a key refused `after` times faster than `after` per
  // `within` is refused for `box_for` without its bucket being consulted
  // (0: off).
  // In-flight requests per key: at most this many admitted and not yet
  // answered by the origin (0: no limit).
  uint32_t concurrency = 0;
  // Delay: a request over its rate bucket's budget that would conform
  // within `max` waits, held in the appliance, instead of being refused
  // (nginx's burst with delay). At most `per_key` of a key's requests wait
  // at once (0: max alone bounds them). Calendar windows never delay.
  struct Delay {
    Nanos max = 0;  // 0: off
    uint32_t per_key = 0;
    bool operator==(const Delay&) const = default;
  } delay;
  struct Penalty {
    uint32_t after = 0;
    Nanos within = 0;
    Nanos box_for = 0;
    bool operator==(const Penalty&) const = default;
  } penalty;
  // After admission: forward (normal), or answer with a status (TB12: 404).
  uint16_t answer_status = 0;  // 0: forward
  std::optional<ResponseSpec> answer;
  std::optional<ResponseSpec> refusal;       // default: the policy's
  std::optional<HeaderStyle> header_style;   // default: the policy's
  bool shadow = false;                       // X01
};

// How long a client may take, on a connection to a service port, before the
// appliance ends it. The names follow nginx's and HAProxy's
// (config/README.md has the table); 0 turns a deadline off.
struct Deadlines {
  Nanos head = 10 * time::kNanosPerSecond;        // a head from its first byte, or a new connection's first head
  Nanos body = 30 * time::kNanosPerSecond;        // a request body without a new byte
  Nanos keep_alive = 75 * time::kNanosPerSecond;  // a connection with nothing in flight
  // A response the client does not read: no acknowledgement of new bytes
  // the origin sent (nginx's send_timeout). 0: off.
  Nanos response = 60 * time::kNanosPerSecond;
};

struct Policy {
  std::string file;  // where it was loaded from
  std::string name;
  bool shadow = false;                    // X01, the whole policy
  HeaderStyle header_style = HeaderStyle::kSeed;
  std::vector<uint16_t> service_ports;    // TCP ports whose requests are parsed
  ClientIpSpec client_ip;
  CredentialSpec credentials;
  CorsSpec cors;
  std::vector<Exemption> exemptions;
  std::vector<BucketSpec> buckets;
  std::optional<ClusterSpec> cluster;  // budgets shared by several boxes
  std::vector<RuleSpec> rules;
  UsageSpec usage;
  AfterAnswer after_answer = AfterAnswer::kKeepAlive;
  AmbiguousPaths ambiguous_paths = AmbiguousPaths::kRefuse;
  ResponseSpec refusal;
  // Response templates of answers the limiter gives for other reasons.
  ResponseSpec unauthorized;  // RF10
  ResponseSpec not_found;     // TB12
  // Head limits.
  uint32_t max_head_bytes = 16 * 1024;
  uint16_t max_fields = 100;
  bool allow_upgrade = true;
  bool allow_connect = false;
  bool allow_h2_prior_knowledge = false;
  Deadlines deadlines;
  // The appliance answers clients' SYNs to service ports itself
  // with SYN cookies and opens the origin's connection only for a client
  // that completed the handshake (dataplane/syn_proxy.h).
  bool syn_proxy = true;
  // With the SYN proxy: the origin's connection is opened only once the
  // first request on the connection is forwarded (`binding: delayed`, the
  // default), so a request refused first never reaches the origin; or as
  // soon as the client's handshake completes (`binding: immediate`).
  bool delayed_binding = true;
  // A client segment of a connection the appliance does not know (begun
  // before a restart, or expired) that begins a request head is adopted
  // rather than reset (dataplane/flow_adopter.h). Off by default: such a
  // connection cannot be known to be between requests (inside a body, what
  // looks like a head is not what the origin reads), so it is reset.
  bool adoption = false;
};

}  // namespace sluice::policy
