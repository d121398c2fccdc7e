// libFuzzer target for the flow engine at the segment level. The
// input chooses a whole HTTP/1.1 conversation (policy, requests, the origin's
// responses) and what the network does to each side's segments (cuts, loss,
// duplicates, reordering, late copies, retransmissions of acknowledged bytes
// carrying other bytes, a client FIN). Two small TCP endpoints drive it
// through FlowEngine::on_frame with real frames, each retransmitting what the
// other has not acknowledged, so the conversation makes progress; every loop
// is bounded. Checked on every input (a failure traps, which libFuzzer
// reports with the input):
//   1. the origin receives exactly the client's stream without the refused
//      requests: every byte it gets, at its place (first copy wins, as a
//      receiving stack keeps it), and only once its request is decided;
//   2. the client receives one well-formed response per request judged, in
//      order: the origin's own (inserted RateLimit lines aside) or a 429;
//   3. no request is charged twice: the engine's decision counters match the
//      policy's verdicts on the requests sent;
//   4. bytes the engine already took (acknowledged to the client) and then
//      sees again, different, never reach the origin in place of the first;
//      nor do a head's bytes the engine forwarded and the origin never got
//      (lost after the appliance), sent again differently;
//   5. once the network behaves, the conversation finishes: every request
//      answered, every judged byte at the origin.
// Environment: SLUICE_FUZZ_OVERLAP=0 stops generating retransmissions with
// other bytes and client segments lost after the appliance (check 4's
// attacks; an engine that forwards repeats and overlaps as they come fails
// them);
// SLUICE_FUZZ_LIVENESS=0 drops check 5; SLUICE_FUZZ_VERBOSE=1 prints each
// conversation and its segments (for reading a failing input).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/checksum.h"
#include "dataplane/flow_engine.h"
#include "dataplane/segment_writer.h"
#include "flow_policies.h"
#include "http/http1_policy.h"
#include "policy/policy_loader.h"

namespace {

using namespace sluice;
namespace dp = sluice::dataplane;
namespace flag = dp::tcp_flag;

bool g_verbose = false;

[[noreturn]] void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("flow_engine_fuzz: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  __builtin_trap();
}

void trace(const char* fmt, ...) {
  if (!g_verbose) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
}

std::string hex_byte(char c) {
  char out[3];
  std::snprintf(out, sizeof out, "%02x", static_cast<uint8_t>(c));
  return out;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::strcmp(v, "0") != 0;
}

// ---------------------------------------------------------------------------
// The policies, compiled once: the engine only reads its snapshot.

enum class PolicyKind : uint8_t { kSmallClose, kKeep, kKeepExempt, kCount };

std::string policy_text(PolicyKind k) {
  switch (k) {
    // Adoption on: the conversations include connections older than the
    // engine (adopted at their first request).
    case PolicyKind::kSmallClose:
      return std::string(test::kSmallPolicy) + "adoption: on\n";
    case PolicyKind::kKeep:
      return std::string(test::kKeepPolicy) + "adoption: on\n";
    default:
      return std::string(test::kKeepPolicy) + "adoption: on\nexempt:\n  - path: /healthz\n";
  }
}

struct CompiledPolicy {
  std::unique_ptr<limiter::KeyHasher> hasher;
  std::unique_ptr<dp::PolicySnapshot> snapshot;
};

// Each policy three times: bridged handshakes, through the SYN proxy bound
// at once, and through it with delayed binding.
const CompiledPolicy& compiled(PolicyKind k, bool syn_proxy, bool delayed_binding) {
  static std::array<CompiledPolicy, 3 * static_cast<size_t>(PolicyKind::kCount)> all;
  CompiledPolicy& c = all[3 * static_cast<size_t>(k) + (syn_proxy ? 1 : 0) + (syn_proxy && delayed_binding ? 1 : 0)];
  if (c.snapshot) return c;
  std::array<uint8_t, limiter::KeyHasher::kSecretSize> secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(i * 13 + 1);
  c.hasher = std::make_unique<limiter::KeyHasher>(secret);
  policy::LoadResult loaded = policy::load_policy_text(policy_text(k), "fuzz.yaml");
  if (!loaded.errors.empty() || !loaded.policy) fail("policy %d does not load", static_cast<int>(k));
  std::vector<policy::PolicyError> errors;
  auto policy = http::compile_http1_policy(*loaded.policy, *c.hasher, errors);
  if (!errors.empty() || !policy) fail("policy %d does not compile", static_cast<int>(k));
  c.snapshot = std::make_unique<dp::PolicySnapshot>();
  c.snapshot->policy = std::move(*policy);
  for (uint16_t p : c.snapshot->policy.source.service_ports) c.snapshot->service_ports.set(p);
  c.snapshot->policy.syn_proxy = syn_proxy;
  c.snapshot->policy.delayed_binding = syn_proxy && delayed_binding;
  return c;
}

// A fresh limiter and engine per input, so a crash reproduces from its input alone.
// The engine's SYN cookie keys, known here so the client can answer the
// cookie it was sent.
constexpr std::array<uint8_t, 32> kCookieSeed = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6,
                                                 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22};

struct World {
  World(PolicyKind kind, bool insert_fields, bool syn_proxy, bool delayed_binding)
      : policy(compiled(kind, syn_proxy, delayed_binding)) {
    const dp::PolicySnapshot& snap = *policy.snapshot;
    buckets = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 256, .regions = 4, .bucket_kinds = static_cast<uint16_t>(snap.policy.buckets.size())});
    records = std::make_unique<limiter::BucketTable>(limiter::BucketTable::Options{
        .capacity = 64, .regions = 4, .bucket_kinds = 1, .words = std::max(2u, (snap.policy.max_slots + 1) & ~1u)});
    runs = std::make_unique<limiter::DigestMap>(16);
    users = std::make_unique<limiter::DigestMap>(16);
    state = std::make_unique<limiter::LimiterState>(
        limiter::LimiterState{*buckets, *records, *runs, *users, *policy.hasher, *policy.hasher});
    dp::EngineConfig config;
    config.flows = 16;
    config.contexts = 4;
    config.edit_holds = 16;
    config.answer_bytes = 64 * 1024;
    config.insert_fields = insert_fields;
    config.cookie_seed = kCookieSeed;
    config.max_head_bytes = snap.policy.stream.head.max_head_bytes;
    config.max_fields = snap.policy.stream.head.max_fields;
    engine = std::make_unique<dp::FlowEngine>(config, *state, counters, 42);
  }
  const CompiledPolicy& policy;
  std::unique_ptr<limiter::BucketTable> buckets, records;
  std::unique_ptr<limiter::DigestMap> runs, users;
  std::unique_ptr<limiter::LimiterState> state;
  dp::WorkerCounters counters;
  std::unique_ptr<dp::FlowEngine> engine;
  time::Nanos now = 1'768'464'000ull * time::kNanosPerSecond;
};

// ---------------------------------------------------------------------------
// The conversation the input chooses, and what the policy makes of it.

enum class Fate : uint8_t { kAdmitted, kRefused, kExempt, kUnjudged };

struct Exchange {
  std::string request;
  std::string response;  // the origin's, if the request reaches it
  bool head = false;     // HEAD: the response has no body
  Fate fate = Fate::kAdmitted;
};

struct Conversation {
  PolicyKind policy = PolicyKind::kKeep;
  bool insert_fields = false;
  bool timestamps = true;
  bool pipelined = true;
  bool client_fin = false;
  bool syn_proxy = false;  // the handshake through the SYN proxy: the origin's numbers and clock translated
  bool delayed_binding = false;  // with it, the origin's connection opened for the first forwarded byte
  // The connection was open before the engine started (a restart): it is
  // adopted at its first request (flow_adopter.h), each end numbering the
  // other as an appliance that is gone had translated. Requests carry no
  // body (a body resets an adopted connection, a unit test's matter).
  bool adopted = false;
  uint16_t client_mss = 1460;
  uint32_t room = 0;  // ServiceFrame::room for frames fed (0: they may not grow)
  std::vector<Exchange> exchanges;
  std::string client_stream;        // every request, as the client sends it
  std::string origin_expected;      // the requests that reach the origin
  std::vector<size_t> reach_end;    // where each of those ends in origin_expected
  std::vector<size_t> reach_index;  // and which exchange it is
  // Each request's head, with its body if chunked (size lines frame the next
  // request): [from, to) in client_stream. A Content-Length body's bytes are
  // not judged.
  std::vector<std::pair<uint32_t, uint32_t>> judged_ranges;
  size_t judged = 0;  // requests the engine decides (close: up to the refusal)
};

std::string body_text(size_t n, char tag) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>(tag + i % 23);
  return s;
}

std::string chunked(const std::string& body, size_t piece) {
  std::string out;
  char line[16];
  for (size_t at = 0; at < body.size(); at += piece) {
    const std::string part = body.substr(at, piece);
    std::snprintf(line, sizeof line, "%zx\r\n", part.size());
    out += line + part + "\r\n";
  }
  return out + "0\r\n\r\n";
}

std::string make_request(FuzzedDataProvider& in, size_t index, bool bodies, Exchange& ex) {
  static const char* const kPaths[] = {"/loose", "/tight", "/healthz"};
  const char* path = kPaths[in.ConsumeIntegralInRange<int>(0, 2)];
  const int method = in.ConsumeIntegralInRange<int>(0, bodies ? 3 : 1);  // GET, HEAD, POST length, POST chunked
  static const char* const kMethods[] = {"GET ", "HEAD ", "POST ", "POST "};
  std::string head =
      std::string(kMethods[method]) + path + " HTTP/1.1\r\nHost: api\r\nX-Request: " + std::to_string(index) + "\r\n";
  ex.head = method == 1;
  if (method < 2) return head + "\r\n";
  const std::string body = body_text(in.ConsumeIntegralInRange<size_t>(0, 300), static_cast<char>('A' + index));
  if (method == 2) return head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return head + "Transfer-Encoding: chunked\r\n\r\n" + chunked(body, in.ConsumeIntegralInRange<size_t>(1, 64));
}

std::string make_response(FuzzedDataProvider& in, size_t index, bool head) {
  const int kind = in.ConsumeIntegralInRange<int>(0, 2);  // length, chunked, 204
  const std::string body = body_text(in.ConsumeIntegralInRange<size_t>(0, 400), static_cast<char>('a' + index));
  if (kind == 2) return "HTTP/1.1 204 No Content\r\nX-Response: " + std::to_string(index) + "\r\n\r\n";
  std::string r = "HTTP/1.1 200 OK\r\nX-Response: " + std::to_string(index) + "\r\n";
  if (kind == 0 || head) {
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    return head ? r : r + body;
  }
  return r + "Transfer-Encoding: chunked\r\n\r\n" + chunked(body, in.ConsumeIntegralInRange<size_t>(1, 128));
}

// What the policy decides, request by request, at a fixed time: small: two
// admitted, the third refused and the connection closed; keep: /tight once
// an hour, the rest admitted, /healthz exempt where the policy says so; its
// refusals keep the connection open, except a HEAD's.
void decide_fates(Conversation& c) {
  size_t charged = 0, tight = 0;
  bool closed = false;
  for (Exchange& ex : c.exchanges) {
    const bool is_tight = ex.request.find(" /tight ") != std::string::npos;
    const bool is_health = ex.request.find(" /healthz ") != std::string::npos;
    if (closed) {
      ex.fate = Fate::kUnjudged;
    } else if (c.policy == PolicyKind::kSmallClose) {
      ex.fate = charged++ < 2 ? Fate::kAdmitted : Fate::kRefused;
      closed = ex.fate == Fate::kRefused;
    } else if (c.policy == PolicyKind::kKeepExempt && is_health) {
      ex.fate = Fate::kExempt;
    } else {
      ex.fate = is_tight && tight++ > 0 ? Fate::kRefused : Fate::kAdmitted;
      closed = ex.fate == Fate::kRefused && ex.head;  // a refused HEAD closes (http::answer_keeps_connection)
    }
    if (ex.fate != Fate::kUnjudged) ++c.judged;
  }
}

Conversation choose_conversation(FuzzedDataProvider& in) {
  Conversation c;
  c.policy = static_cast<PolicyKind>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(PolicyKind::kCount) - 1));
  const uint8_t bits = in.ConsumeIntegral<uint8_t>();
  c.insert_fields = bits & 1;
  c.timestamps = !(bits & 2);
  c.pipelined = !(bits & 4);
  c.client_fin = bits & 8;
  c.room = (bits & 16) ? 2048 : 0;
  c.syn_proxy = bits & 32;
  c.delayed_binding = c.syn_proxy && (bits & 64);
  c.adopted = bits & 128;
  static const uint16_t kMss[] = {1460, 536, 200, 88, 64};
  c.client_mss = kMss[in.ConsumeIntegralInRange<int>(0, 4)];
  const size_t n = in.ConsumeIntegralInRange<size_t>(1, 5);
  for (size_t i = 0; i < n; ++i) {
    Exchange ex;
    ex.request = make_request(in, i, !c.adopted, ex);
    ex.response = make_response(in, i, ex.head);
    c.exchanges.push_back(std::move(ex));
  }
  decide_fates(c);
  for (size_t i = 0; i < c.exchanges.size(); ++i) {
    const Exchange& ex = c.exchanges[i];
    // What the engine judges of it: the head, and a chunked body whole.
    const bool chunked = ex.request.find("Transfer-Encoding: chunked") != std::string::npos;
    const size_t judged = chunked ? ex.request.size() : ex.request.find("\r\n\r\n") + 4;
    c.judged_ranges.emplace_back(static_cast<uint32_t>(c.client_stream.size()),
                                 static_cast<uint32_t>(c.client_stream.size() + judged));
    c.client_stream += ex.request;
    if (ex.fate == Fate::kAdmitted || ex.fate == Fate::kExempt) {
      c.origin_expected += ex.request;
      c.reach_end.push_back(c.origin_expected.size());
      c.reach_index.push_back(i);
    }
  }
  return c;
}

// ---------------------------------------------------------------------------
// Both ends of the connection, as small TCP stacks.

constexpr uint32_t kClientIsn = 0xfffff000;  // the client's numbers wrap past 2^32 on the way
constexpr uint32_t kOriginIsn = 0x40000000;

// One end: what it sends (`out`, its first byte numbered isn + 1), how much
// of it the peer acknowledged, and what it received, first copy of each
// byte kept as a receiving stack keeps it. Offsets are relative to isn + 1.
struct Endpoint {
  dp::Side side = dp::Side::kClient;
  uint32_t isn = 0;
  uint32_t seen_isn = 0;  // the ISN its peer knows it by (the SYN proxy's cookie for the origin)
  std::string out;
  bool fin_queued = false;
  uint32_t una = 0;  // acknowledged by the peer (the FIN counts one past out)
  uint32_t nxt = 0;  // sent so far, once at least
  std::map<uint32_t, char> got;
  uint32_t rcv_nxt = 0;  // received in order
  std::optional<uint32_t> fin_at;
  bool reset = false;
  uint32_t ts = 1000, peer_ts = 0;
  uint32_t ack_sent = 0;  // the last acknowledgement it sent
  bool syn_pending = false;  // the origin got a SYN (delayed binding) it has yet to answer
  bool probe_pending = false;  // the origin got a segment outside its window (an adoption's probe) to answer

  [[nodiscard]] uint32_t end() const { return static_cast<uint32_t>(out.size()) + (fin_queued ? 1 : 0); }
  [[nodiscard]] bool fin_received() const { return fin_at && *fin_at == rcv_nxt; }
  [[nodiscard]] uint32_t ack(uint32_t peer_isn) const { return peer_isn + 1 + rcv_nxt + (fin_received() ? 1 : 0); }
  [[nodiscard]] std::string in_order() const {
    std::string s;
    for (auto it = got.begin(); it != got.end() && it->first == s.size(); ++it) s += it->second;
    return s;
  }
};

// A segment the network keeps back, to arrive after later ones.
struct Delayed {
  dp::Side from;
  uint32_t off, len;
  uint8_t mask;  // non-zero: acknowledged bytes sent again differently
};

// kLostAfter: through the engine, then lost on the way to the peer.
enum class Delivery : uint8_t { kNow, kLost, kLater, kLostAfter };

std::vector<uint8_t> mss_option_added(std::vector<uint8_t> frame, uint16_t mss) {
  dp::FrameView v = dp::parse_frame(frame);
  const size_t tcp_hdr = v.payload_offset - v.l4_offset;
  std::vector<uint8_t> out(frame.begin(), frame.begin() + v.l4_offset + tcp_hdr);
  out.insert(out.end(), {2, 4, static_cast<uint8_t>(mss >> 8), static_cast<uint8_t>(mss)});
  out[v.l4_offset + 12] = static_cast<uint8_t>(((tcp_hdr + 4) / 4) << 4);
  uint8_t* ip = out.data() + v.l3_offset;
  dp::store16(ip + 2, static_cast<uint16_t>(dp::load16(ip + 2) + 4));
  dp::set_ipv4_checksum(ip, 20);
  v = dp::parse_frame(out);
  dp::set_tcp_checksum(out.data(), v);
  return out;
}

// The wire between the two ends with the engine in the middle: segments the
// ends send are fed to FlowEngine::on_frame; what it forwards, and what it
// writes itself, reaches the other end at once.
class Network final : public dp::PacketSink {
 public:
  Network(World& w, const Conversation& c, bool overlaps) : w_(w), c_(c), overlaps_(overlaps) {
    client_.side = dp::Side::kClient;
    client_.isn = client_.seen_isn = kClientIsn;
    client_.out = c.client_stream;
    client_.fin_queued = c.client_fin;
    origin_.side = dp::Side::kOrigin;
    origin_.isn = origin_.seen_isn = kOriginIsn;
    const uint8_t cmac[6] = {2, 0, 0, 0, 0, 0x10}, omac[6] = {2, 0, 0, 0, 0, 0x20};
    l2_to_origin_.assign(omac, omac + 6);
    l2_to_origin_.insert(l2_to_origin_.end(), cmac, cmac + 6);
    l2_to_client_.assign(cmac, cmac + 6);
    l2_to_client_.insert(l2_to_client_.end(), omac, omac + 6);
    for (auto* l2 : {&l2_to_origin_, &l2_to_client_}) l2->insert(l2->end(), {0x08, 0x00});
  }

  void handshake() {
    if (c_.adopted) {
      adopted_start();
      return;
    }
    if (c_.syn_proxy) {
      proxied_handshake();
      return;
    }
    if (!feed(client_, client_.isn, 0, flag::kSyn, "", c_.client_mss)) fail("SYN dropped");
    if (!feed(origin_, origin_.isn, client_.isn + 1, flag::kSyn | flag::kAck, "", 0)) fail("SYN-ACK dropped");
    pure_ack(client_);
  }
  // The SYN proxy answers the client's SYN with a cookie (computed here as
  // the engine does); the client's ACK of it has the engine open the
  // origin's connection; the origin's SYN-ACK, with its own ISN and clock,
  // completes it, and from then on the engine translates.
  void proxied_handshake() {
    dp::TcpOptions syn;
    syn.mss = c_.client_mss;
    syn.has_timestamp = c_.timestamps;
    const dp::FlowKey key{*net::parse_ip("198.18.0.10"), *net::parse_ip("198.18.0.20"), 40000, 80};
    const dp::SynCookies cookies(kCookieSeed);
    const dp::SynCookieOffer offer = cookies.offer(key, client_.isn, syn, dp::SynProxy::kClientWscale, w_.now);
    if (feed(client_, client_.isn, 0, flag::kSyn, "", c_.client_mss)) fail("SYN forwarded through the SYN proxy");
    origin_.seen_isn = offer.isn;
    if (offer.timestamps) client_.peer_ts = offer.tsval;
    if (feed(client_, client_.isn + 1, offer.isn + 1, flag::kAck, "", 0)) fail("the cookie ACK forwarded");
    if (w_.counters.syn_cookies_validated.get() != 1) fail("the cookie ACK not validated");
    if (c_.delayed_binding) {
      // The origin hears of the connection with its first forwarded byte
      // (answer_syn()).
      if (w_.counters.syn_proxy_unbound.get() != 1) fail("the cookie ACK did not make an unbound flow");
      return;
    }
    if (feed(origin_, origin_.isn, client_.isn + 1, flag::kSyn | flag::kAck, "", 0)) fail("the origin's SYN-ACK forwarded");
    if (w_.counters.syn_proxy_bound.get() != 1) fail("the proxied handshake did not complete");
  }

  // No handshake: the ends know each other by other numbers than their own
  // (the cookie, cut requests, inserted fields of before), and the client's
  // clock for the origin is another; its first request, whole in one
  // segment as clients send it, is adopted.
  void adopted_start() {
    client_.seen_isn = client_.isn + 7777;
    origin_.seen_isn = origin_.isn + 0x12345678;
    client_.peer_ts = 3'000'000;
    send_new(client_, mss(client_), Delivery::kNow);
    if (w_.counters.flows_adopted.get() != 1) fail("the first request was not adopted");
  }

  // Up to `len` new bytes of `e`'s stream, as far as it may send.
  void send_new(Endpoint& e, uint32_t len, Delivery how) {
    const uint32_t limit = send_limit(e);
    const bool fin_due = e.fin_queued && limit == e.out.size() && e.nxt <= e.out.size();
    if (e.reset || (e.nxt >= limit && !fin_due)) return;
    const uint32_t from = std::min<uint32_t>(e.nxt, limit);
    transmit(e, from, std::min(len, limit - from), how, 0);
  }
  // What the peer has not acknowledged, from its first byte.
  void retransmit(Endpoint& e, uint32_t len) {
    if (e.reset || e.una >= e.nxt) return;
    const uint32_t from = std::min<uint32_t>(e.una, static_cast<uint32_t>(e.out.size()));
    transmit(e, from, std::min(len, sent_bytes(e) - from), Delivery::kNow, 0);
  }
  // Everything unacknowledged again, segment by segment (go-back-N).
  void go_back(Endpoint& e, int segments) {
    uint32_t from = std::min<uint32_t>(e.una, sent_bytes(e));
    for (int i = 0; i < segments && !e.reset; ++i) {
      const uint32_t len = std::min(mss(e), sent_bytes(e) - from);
      transmit(e, from, len, Delivery::kNow, 0);
      from += len;
      if (from >= sent_bytes(e)) break;
    }
  }
  // A late copy of any range sent so far, acknowledged or not.
  void duplicate(Endpoint& e, uint32_t from, uint32_t len) {
    if (e.reset || e.nxt == 0) return;
    if (sent_bytes(e) == 0) return;
    from %= sent_bytes(e);
    transmit(e, from, std::min(len, sent_bytes(e) - from), Delivery::kNow, 0);
  }
  // A range starting in acknowledged bytes, sent again with those bytes
  // changed (`mask`), the unacknowledged rest as it was: only an
  // acknowledged byte has a first copy the oracle can be sure of.
  void overlap_other(Endpoint& e, uint32_t back, uint32_t len, uint8_t mask, Delivery how) {
    const uint32_t acked = std::min<uint32_t>(e.una, static_cast<uint32_t>(e.out.size()));
    if (!overlaps_ || e.reset || acked == 0 || mask == 0) return;
    const uint32_t from = acked - 1 - back % acked;
    transmit(e, from, std::min(len, sent_bytes(e) - from), how, mask);
  }
  // A client range the engine forwarded but the origin may not have got
  // (lost after the appliance), sent again with its judged bytes (heads,
  // chunked bodies) changed: the origin must get the first copy.
  void repeat_other(uint32_t back, uint32_t len, uint8_t mask) {
    Endpoint& e = client_;
    if (!overlaps_ || e.reset || mask == 0 || client_forwarded_ <= e.una) return;
    const uint32_t from = e.una + back % (client_forwarded_ - e.una);
    head_mask_ = mask;
    transmit(e, from, std::min(len, sent_bytes(e) - from), Delivery::kNow, 0);
    head_mask_ = 0;
  }
  void deliver_delayed(size_t pick) {
    if (delayed_.empty()) return;
    pick %= delayed_.size();
    const Delayed d = delayed_[pick];
    delayed_.erase(delayed_.begin() + static_cast<long>(pick));
    Endpoint& e = d.from == dp::Side::kClient ? client_ : origin_;
    if (!e.reset) transmit(e, d.off, d.len, Delivery::kNow, d.mask);
  }
  void deliver_all_delayed() {
    while (!delayed_.empty()) deliver_delayed(0);
  }
  void pure_ack(Endpoint& e) {
    if (e.reset) return;
    feed(e, e.isn + 1 + e.nxt, e.ack(other(e).seen_isn), flag::kAck, "", 0);
  }
  [[nodiscard]] bool needs_ack(const Endpoint& e) const { return !e.reset && e.ack_sent != e.ack(other(e).seen_isn); }

  Endpoint& client() { return client_; }
  Endpoint& origin() { return origin_; }
  [[nodiscard]] uint32_t mss(const Endpoint& e) const {
    const uint32_t opts = c_.timestamps ? 12 : 0;
    return e.side == dp::Side::kClient ? 1460 - opts : c_.client_mss - opts;
  }
  // Responses the client has whole, checked as they come (see check_responses).
  size_t responses_seen = 0;
  // The origin's SYN-ACK to a SYN the engine sent it since (delayed
  // binding), outside the engine's call that sent it.
  void answer_syn() {
    if (origin_.probe_pending && !origin_.reset) {
      // As TCP answers a segment outside its window: an ACK with its numbers.
      origin_.probe_pending = false;
      pure_ack(origin_);
    }
    if (!origin_.syn_pending || origin_.reset) return;
    origin_.syn_pending = false;
    (void)feed(origin_, origin_.isn, client_.isn + 1, flag::kSyn | flag::kAck, "", 0);
  }

 private:
  [[nodiscard]] Endpoint& other(const Endpoint& e) { return e.side == dp::Side::kClient ? origin_ : client_; }
  [[nodiscard]] const Endpoint& other(const Endpoint& e) const {
    return e.side == dp::Side::kClient ? origin_ : client_;
  }
  [[nodiscard]] static uint32_t sent_bytes(const Endpoint& e) {
    return std::min<uint32_t>(e.nxt, static_cast<uint32_t>(e.out.size()));
  }
  [[nodiscard]] uint32_t send_limit(const Endpoint& e) const;
  void transmit(Endpoint& e, uint32_t off, uint32_t len, Delivery how, uint8_t mask);
  bool feed(Endpoint& e, uint32_t seq, uint32_t ack, uint8_t flags, std::string_view payload, uint16_t mss);
  void receive(Endpoint& e, const dp::FrameView& v, const uint8_t* frame);
  void origin_answers();
  void check_decided_before(uint32_t origin_offset) const;

  // PacketSink: the engine's own segments reach their end at once.
  std::span<uint8_t> allocate(dp::Side, size_t len) noexcept override {
    sink_buf_.assign(len, 0);
    return sink_buf_;
  }
  void send(dp::Side to, size_t len) noexcept override {
    sink_buf_.resize(len);
    const std::vector<uint8_t> frame = sink_buf_;
    const dp::FrameView v = dp::parse_frame(frame);
    if (v.kind != dp::FrameKind::kTcp) fail("the engine wrote a frame that does not parse");
    receive(to == dp::Side::kClient ? client_ : origin_, v, frame.data());
  }

  World& w_;
  const Conversation& c_;
  bool overlaps_;
  Endpoint client_, origin_;
  std::deque<Delayed> delayed_;
  std::vector<uint8_t> l2_to_origin_, l2_to_client_;
  std::vector<uint8_t> sink_buf_;
  size_t responses_sent_ = 0;      // requests the origin has answered
  uint32_t client_forwarded_ = 0;  // the client's stream up to here went through the engine whole
  uint8_t head_mask_ = 0;          // repeat_other(): changes judged bytes below client_forwarded_
  bool lose_after_ = false;        // the segment being fed is lost after the engine
};

// How far `e` may send: the origin what it has answered so far; the client
// everything when it pipelines, else up to the request whose response it awaits.
uint32_t Network::send_limit(const Endpoint& e) const {
  if (e.side == dp::Side::kOrigin || c_.pipelined) return static_cast<uint32_t>(e.out.size());
  size_t end = 0;
  for (size_t i = 0; i <= responses_seen && i < c_.exchanges.size(); ++i) end += c_.exchanges[i].request.size();
  return static_cast<uint32_t>(end);
}

// Bytes [off, off + len) of `e`'s stream, the FIN with them if they end it;
// `mask` changes the bytes the peer has acknowledged.
void Network::transmit(Endpoint& e, uint32_t off, uint32_t len, Delivery how, uint8_t mask) {
  const bool fin = e.fin_queued && off + len == e.out.size() && send_limit(e) == e.out.size();
  e.nxt = std::max(e.nxt, off + len + (fin ? 1 : 0));
  if (how == Delivery::kLost) return;
  lose_after_ = how == Delivery::kLostAfter;
  if (how == Delivery::kLater) {
    delayed_.push_back({e.side, off, len, mask});
    return;
  }
  std::string bytes = e.out.substr(off, len);
  for (uint32_t i = 0; i < len && mask != 0 && off + i < e.una; ++i) bytes[i] = static_cast<char>(bytes[i] ^ mask);
  for (uint32_t i = 0; i < len && head_mask_ != 0 && off + i < client_forwarded_; ++i) {
    for (const auto& [from, to] : c_.judged_ranges) {
      if (off + i >= from && off + i < to) bytes[i] = static_cast<char>(bytes[i] ^ head_mask_);
    }
  }
  trace("%s sends [%u, %u)%s%s\n", e.side == dp::Side::kClient ? "client" : "origin", off, off + len, fin ? " FIN" : "",
        mask ? " with acknowledged bytes changed" : "");
  feed(e, e.isn + 1 + off, e.ack(other(e).seen_isn), flag::kAck | flag::kPsh | (fin ? flag::kFin : 0), bytes, 0);
}

// One segment from `e` through the engine. Returns whether it was forwarded.
bool Network::feed(Endpoint& e, uint32_t seq, uint32_t ack, uint8_t flags, std::string_view payload, uint16_t mss) {
  const bool from_client = e.side == dp::Side::kClient;
  dp::SegmentSpec s;
  s.l2 = from_client ? l2_to_origin_ : l2_to_client_;
  s.src = *net::parse_ip(from_client ? "198.18.0.10" : "198.18.0.20");
  s.dst = *net::parse_ip(from_client ? "198.18.0.20" : "198.18.0.10");
  s.sport = from_client ? 40000 : 80;
  s.dport = from_client ? 80 : 40000;
  s.seq = seq;
  s.ack = (flags & flag::kAck) ? ack : 0;
  s.flags = flags;
  s.window = 65535;
  s.timestamp = c_.timestamps;
  s.tsval = ++e.ts;
  s.tsecr = e.peer_ts;
  s.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  std::vector<uint8_t> frame(dp::segment_size(s));
  if (dp::write_segment(frame, s) == 0) fail("segment_writer refused a segment");
  if (mss != 0) frame = mss_option_added(std::move(frame), mss);
  const size_t built = frame.size();
  if (c_.room > built) frame.resize(c_.room);
  if (flags & flag::kAck) e.ack_sent = ack;

  dp::FrameView v = dp::parse_frame({frame.data(), built});
  dp::ServiceFrame sf;
  if (!dp::service_frame(v, e.side, w_.policy.snapshot->service_ports, sf)) fail("not a service frame");
  sf.room = static_cast<uint32_t>(frame.size() > built ? frame.size() : 0);
  const dp::FrameResult r = w_.engine->on_frame(sf, frame.data(), v, *w_.policy.snapshot, w_.now, *this);
  const bool forwarded = r.action == dp::FrameAction::kForward;
  const bool lost = std::exchange(lose_after_, false);
  if (forwarded) {
    frame.resize(r.frame_len);
    const dp::FrameView out = dp::parse_frame(frame);
    if (out.kind != dp::FrameKind::kTcp) fail("a forwarded frame does not parse");
    if (from_client && !payload.empty() && out.payload_len == payload.size()) {
      // Forwarded whole: the engine has judged every byte of it.
      client_forwarded_ = std::max(client_forwarded_, seq - (e.isn + 1) + static_cast<uint32_t>(payload.size()));
    }
    if (!lost)
      receive(other(e), out, frame.data());
    else
      trace("  (lost after the appliance)\n");
  }
  if (r.answer_after != nullptr) w_.engine->send_answer(*r.answer_after, *this);
  return forwarded;
}

// A segment reaching `e`: its acknowledgement, its bytes (the first copy of
// each kept), a FIN or a RST. What reaches the origin is checked byte by
// byte against the requests it should get (checks 1 and 4).
void Network::receive(Endpoint& e, const dp::FrameView& v, const uint8_t* frame) {
  const bool to_client = e.side == dp::Side::kClient;
  Endpoint& peer = other(e);
  trace("  -> %s seq %u ack %u len %u flags %02x\n", to_client ? "client" : "origin", v.seq - (peer.seen_isn + 1),
        v.ack - (e.isn + 1), v.payload_len, v.flags);
  if (!dp::tcp_checksum_ok(frame, v)) fail("a segment to the %s has a bad checksum", to_client ? "client" : "origin");
  if (v.has(flag::kRst)) {
    e.reset = true;
    return;
  }
  // A segment far outside the window (an adoption's probe) is answered, not taken.
  const auto offset = static_cast<int32_t>(v.seq - (peer.seen_isn + 1));
  if (!to_client && !v.has(flag::kSyn) && (offset < -(1 << 28) || offset > (1 << 28))) {
    e.probe_pending = true;
    return;
  }
  if (c_.timestamps && v.options.has_timestamp) e.peer_ts = std::max(e.peer_ts, v.options.tsval);
  if (v.has(flag::kAck)) {
    const uint32_t acked = v.ack - (e.isn + 1);
    if (static_cast<int32_t>(acked - e.una) > 0) {
      if (acked > e.nxt)
        fail("the %s's byte %u acknowledged, only %u sent", to_client ? "client" : "origin", acked, e.nxt);
      e.una = acked;
    }
  }
  if (v.has(flag::kSyn)) {
    if (!to_client && !v.has(flag::kAck)) e.syn_pending = true;
    return;
  }
  // A late copy renumbered by the engine's base shift may start before the
  // stream's first byte; the receiver ignores what lies before it.
  const auto start = static_cast<int32_t>(v.seq - (peer.seen_isn + 1));
  const uint32_t skip = start < 0 ? std::min<uint32_t>(v.payload_len, static_cast<uint32_t>(-int64_t{start})) : 0;
  const uint32_t at = static_cast<uint32_t>(start);
  const uint32_t acked = e.ack_sent - (peer.seen_isn + 1);
  for (uint32_t i = skip; i < v.payload_len; ++i) {
    const char byte = static_cast<char>(frame[v.payload_offset + i]);
    auto [it, fresh] = e.got.emplace(at + i, byte);
    if (fresh && !to_client) {
      const std::string& want = c_.origin_expected;
      if (at + i >= want.size() || want[at + i] != byte) {
        fail("origin byte %u is 0x%02x, the client's judged stream has %s", at + i, static_cast<uint8_t>(byte),
             at + i >= want.size() ? "nothing there" : ("0x" + hex_byte(want[at + i])).c_str());
      }
      check_decided_before(at + i);
    } else if (!fresh && to_client && !overlaps_ && it->second != byte && at + i >= acked) {
      // Below what the client acknowledged a late copy may land renumbered
      // on other bytes (the engine folds acknowledged edits into its base
      // shift); the client drops it. Above, both copies could count.
      fail("client byte %u sent twice, differently, before the client acknowledged it", at + i);
    }
  }
  while (e.got.count(e.rcv_nxt)) ++e.rcv_nxt;
  if (v.has(flag::kFin) && start + static_cast<int64_t>(v.payload_len) >= 0) e.fin_at = at + v.payload_len;
  if (!to_client) origin_answers();
}

// No byte of a request reaches the origin before the engine has decided it:
// by then it has parsed as many heads as there are requests up to this one.
void Network::check_decided_before(uint32_t origin_offset) const {
  size_t j = 0;
  while (j < c_.reach_end.size() && origin_offset >= c_.reach_end[j]) ++j;
  const size_t exchange = c_.reach_index[j];
  if (w_.counters.requests.get() < exchange + 1) {
    fail("origin byte %u (request %zu) arrives with %llu heads decided", origin_offset, exchange,
         static_cast<unsigned long long>(w_.counters.requests.get()));
  }
}

// The origin answers each request once it has it whole, in order.
void Network::origin_answers() {
  while (responses_sent_ < c_.reach_end.size() && origin_.rcv_nxt >= c_.reach_end[responses_sent_]) {
    origin_.out += c_.exchanges[c_.reach_index[responses_sent_]].response;
    ++responses_sent_;
  }
}

// ---------------------------------------------------------------------------
// Checks on what the client received (check 2) and on the charges (check 3).

// A response head without the RateLimit lines the engine inserts after the
// status line (TB16).
std::string without_fields(const std::string& head) {
  const size_t status_end = head.find("\r\n") + 2;
  size_t at = status_end;
  while (head.compare(at, 9, "RateLimit") == 0) at = head.find("\r\n", at) + 2;
  return head.substr(0, status_end) + head.substr(at);
}

size_t content_length(const std::string& head) {
  const size_t at = head.find("\r\nContent-Length: ");
  return at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 18, nullptr, 10);
}

// The client's bytes in order, split into responses, each checked against
// its request: the origin's response, or the policy's refusal. Returns how
// many are there whole; bytes past the last one expected fail.
size_t check_responses(const Conversation& c, const std::string& got) {
  size_t pos = 0, whole = 0;
  for (const Exchange& ex : c.exchanges) {
    if (ex.fate == Fate::kUnjudged) break;
    const size_t head_end = got.find("\r\n\r\n", pos);
    if (head_end == std::string::npos) return whole;
    const std::string head = got.substr(pos, head_end + 4 - pos);
    std::string body;
    if (ex.fate == Fate::kRefused) {
      const bool closing = c.policy == PolicyKind::kSmallClose || ex.head;
      if (head.rfind("HTTP/1.1 429 ", 0) != 0 || (head.find("Connection: close\r\n") != std::string::npos) != closing) {
        fail("response %zu: a %s refusal expected, got: %s", whole, closing ? "closing" : "kept-open", head.c_str());
      }
      body = "slow down";
      if (content_length(head) != body.size()) fail("response %zu: the refusal's length is wrong", whole);
    } else {
      const size_t origin_head_len = ex.response.find("\r\n\r\n") + 4;
      const std::string seen = c.insert_fields ? without_fields(head) : head;
      if (seen != ex.response.substr(0, origin_head_len)) {
        fail("response %zu: head\n%s\nexpected\n%s", whole, head.c_str(),
             ex.response.substr(0, origin_head_len).c_str());
      }
      body = ex.response.substr(origin_head_len);
    }
    const size_t body_at = head_end + 4;
    if (got.compare(body_at, body.size(), body, 0, std::min(body.size(), got.size() - body_at)) != 0) {
      fail("response %zu: the body differs", whole);
    }
    if (got.size() < body_at + body.size()) return whole;
    pos = body_at + body.size();
    ++whole;
  }
  if (pos < got.size()) fail("%zu bytes reach the client after the last response", got.size() - pos);
  return whole;
}

struct Expected {
  uint64_t admitted = 0, refused = 0, exempt = 0;
};

Expected expected_decisions(const Conversation& c) {
  Expected e;
  for (const Exchange& ex : c.exchanges) {
    e.admitted += ex.fate == Fate::kAdmitted;
    e.refused += ex.fate == Fate::kRefused;
    e.exempt += ex.fate == Fate::kExempt;
  }
  return e;
}

// Every head parsed is decided once, and no more heads are parsed than the
// client sent (a request charged twice shows here); once the conversation
// is over, each decision is the policy's.
void check_charges(const Conversation& c, const dp::WorkerCounters& k, bool complete) {
  const uint64_t decided = k.admitted.get() + k.refused.get() + k.exempt.get() + k.forwarded.get() + k.answered.get();
  if (decided != k.requests.get())
    fail("%llu heads parsed, %llu decisions", (unsigned long long)k.requests.get(), (unsigned long long)decided);
  if (k.requests.get() > c.judged) {
    fail("%llu heads parsed, the client sent %zu the engine should judge", (unsigned long long)k.requests.get(),
         c.judged);
  }
  const Expected e = expected_decisions(c);
  if (k.admitted.get() > e.admitted || k.refused.get() > e.refused || k.exempt.get() > e.exempt) {
    fail("decisions admitted %llu refused %llu exempt %llu, the policy says at most %llu %llu %llu",
         (unsigned long long)k.admitted.get(), (unsigned long long)k.refused.get(), (unsigned long long)k.exempt.get(),
         (unsigned long long)e.admitted, (unsigned long long)e.refused, (unsigned long long)e.exempt);
  }
  if (complete && (k.admitted.get() != e.admitted || k.refused.get() != e.refused || k.exempt.get() != e.exempt)) {
    fail("conversation over, but not every request was decided as the policy says");
  }
}

// ---------------------------------------------------------------------------
// Driving the conversation: first what the input says the network does, then
// a clean network until both ends are quiet.

constexpr int kMaxScriptSteps = 128;
constexpr int kMaxSettleRounds = 64;
constexpr int kMaxBurstSegments = 64;  // per end and round: a window's worth

enum class Step : uint8_t {
  kNew,
  kNewLost,
  kNewLater,
  kRetransmit,
  kDuplicate,
  kOverlapOther,
  kOverlapOtherLater,
  kNewLostAfter,
  kRepeatOther,
  kAck,
  kDeliverLater,
  kCount
};

void refresh_responses(Network& net, const Conversation& c) {
  net.responses_seen = check_responses(c, net.client().in_order());
}

// One step the input chooses: which end, what it sends, what the network
// does with it.
void script_step(Network& net, FuzzedDataProvider& in) {
  const uint8_t op = in.ConsumeIntegral<uint8_t>();
  Endpoint& e = (op & 0x80) ? net.origin() : net.client();
  const uint32_t len = in.ConsumeIntegralInRange<uint32_t>(1, net.mss(e));
  const auto step = static_cast<Step>((op & 0x7f) % static_cast<uint8_t>(Step::kCount));
  switch (step) {
    case Step::kNew:
      net.send_new(e, len, Delivery::kNow);
      break;
    case Step::kNewLost:
      net.send_new(e, len, Delivery::kLost);
      break;
    case Step::kNewLater:
      net.send_new(e, len, Delivery::kLater);
      break;
    case Step::kRetransmit:
      net.retransmit(e, len);
      break;
    case Step::kDuplicate:
      net.duplicate(e, in.ConsumeIntegral<uint16_t>(), len);
      break;
    case Step::kOverlapOther:
    case Step::kOverlapOtherLater: {
      const uint32_t back = in.ConsumeIntegral<uint16_t>();
      const auto mask = in.ConsumeIntegral<uint8_t>();
      net.overlap_other(e, back, len, mask, step == Step::kOverlapOtherLater ? Delivery::kLater : Delivery::kNow);
      break;
    }
    case Step::kNewLostAfter:
      // Client segments only: an origin segment lost on the way to the
      // client before a closing answer is not recovered yet (the origin is
      // reset once the responses before the answer are sent, not once the
      // client has them), a known gap outside this target's checks.
      net.send_new(e, len, &e == &net.client() ? Delivery::kLostAfter : Delivery::kLost);
      break;
    case Step::kRepeatOther: {
      const uint32_t back = in.ConsumeIntegral<uint16_t>();
      net.repeat_other(back, len, in.ConsumeIntegral<uint8_t>());
      break;
    }
    case Step::kAck:
      net.pure_ack(e);
      break;
    case Step::kDeliverLater:
      net.deliver_delayed(in.ConsumeIntegral<uint8_t>());
      break;
    case Step::kCount:
      break;
  }
}

// A clean network: what was kept back arrives, then each end sends all it
// may, retransmits what stays unacknowledged a round later, acknowledges
// what it got, until a round passes with nothing sent (or the bound).
bool settle_end(Network& net, Endpoint& e, uint32_t una_before) {
  if (e.reset) return false;
  const uint32_t before = e.nxt;
  for (int i = 0; i < kMaxBurstSegments; ++i) net.send_new(e, net.mss(e), Delivery::kNow);
  if (e.nxt != before) return true;
  // Acknowledged on its own, as a stack does at once: the engine may drop
  // a retransmission, and the acknowledgement it carries with it.
  bool sent = false;
  if (net.needs_ack(e)) {
    net.pure_ack(e);
    sent = true;
  }
  // The client stops retransmitting once the other side has closed.
  const bool closed = &e == &net.client() && e.fin_received();
  if (e.una < e.nxt && e.una == una_before && !closed) {
    net.go_back(e, kMaxBurstSegments);
    sent = true;
  }
  return sent;
}

void settle(Network& net, const Conversation& c) {
  net.deliver_all_delayed();
  refresh_responses(net, c);
  uint32_t client_una = net.client().una, origin_una = net.origin().una;
  for (int round = 0; round < kMaxSettleRounds; ++round) {
    const bool client_sent = settle_end(net, net.client(), client_una);
    net.answer_syn();
    const bool origin_sent = settle_end(net, net.origin(), origin_una);
    client_una = net.client().una;
    origin_una = net.origin().una;
    refresh_responses(net, c);
    if (!client_sent && !origin_sent) return;
  }
}

void print_conversation(const Conversation& c) {
  static const char* const kFate[] = {"admitted", "refused", "exempt", "unjudged"};
  trace("policy %d fields %d timestamps %d pipelined %d fin %d mss %u room %u proxy %d delayed %d adopted %d\n",
        static_cast<int>(c.policy), c.insert_fields, c.timestamps, c.pipelined, c.client_fin, c.client_mss, c.room,
        c.syn_proxy, c.delayed_binding, c.adopted);
  for (const Exchange& ex : c.exchanges) {
    trace("--- %s request:\n%s\n--- response:\n%s\n", kFate[static_cast<int>(ex.fate)], ex.request.c_str(),
          ex.response.c_str());
  }
}

bool g_overlaps = true;
bool g_liveness = true;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_overlaps = env_flag("SLUICE_FUZZ_OVERLAP", true);
  g_liveness = env_flag("SLUICE_FUZZ_LIVENESS", true);
  g_verbose = env_flag("SLUICE_FUZZ_VERBOSE", false);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  FuzzedDataProvider in(data, size);
  const Conversation c = choose_conversation(in);
  if (g_verbose) print_conversation(c);
  World w(c.policy, c.insert_fields, c.syn_proxy, c.delayed_binding);
  Network net(w, c, g_overlaps);
  net.handshake();
  for (int step = 0; step < kMaxScriptSteps && in.remaining_bytes() > 0; ++step) {
    script_step(net, in);
    net.answer_syn();
    refresh_responses(net, c);
    check_charges(c, w.counters, false);
  }
  settle(net, c);
  const bool complete = net.responses_seen == c.judged && net.origin().rcv_nxt == c.origin_expected.size();
  check_charges(c, w.counters, complete);
  if (g_liveness && !complete) {
    if (g_verbose) {
#define SLUICE_FUZZ_PRINT_COUNTER(name, help) \
  if (w.counters.name.get() != 0) trace("  %s %llu\n", #name, static_cast<unsigned long long>(w.counters.name.get()));
      SLUICE_WORKER_COUNTERS(SLUICE_FUZZ_PRINT_COUNTER)
#undef SLUICE_FUZZ_PRINT_COUNTER
    }
    fail("stalled: the client has %zu of %zu responses, the origin %u of %zu bytes", net.responses_seen, c.judged,
         net.origin().rcv_nxt, c.origin_expected.size());
  }
  return 0;
}
