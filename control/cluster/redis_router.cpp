// See redis_router.h.
#include "control/cluster/redis_router.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace sluice::control {
namespace {

using Clock = RedisLink::Clock;

constexpr std::array<uint16_t, 256> make_crc16_table() noexcept {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    t[i] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kCrc16Table = make_crc16_table();

[[nodiscard]] bool is_unanswered(RedisError e) noexcept {
  return e == RedisError::kUnreachable || e == RedisError::kConnectionLost || e == RedisError::kBackingOff;
}

// "HOST:PORT" as Redis writes a node in MOVED and ASK: the last colon ends
// the host (an IPv6 address is not bracketed there; brackets are accepted
// too). An empty host means "the host you asked" (a node that does not know
// its own address), which `asked` supplies.
[[nodiscard]] std::optional<RedisEndpoint> parse_node_address(std::string_view text, const RedisEndpoint& asked) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) return std::nullopt;
  RedisEndpoint e;
  e.host = host.empty() ? asked.host : std::string(host);
  e.port = static_cast<uint16_t>(value);
  if (e.host.empty()) return std::nullopt;  // asked over a Unix socket: no host to reuse
  return e;
}

struct Redirect {
  bool ask = false;  // ASK (this command only) rather than MOVED (the slot has moved)
  uint16_t slot = 0;
  RedisEndpoint to;
};

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381"; nullopt for any
// other error.
[[nodiscard]] std::optional<Redirect> parse_redirect(std::string_view error, const RedisEndpoint& asked) {
  Redirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  const auto [end, ec] = std::from_chars(error.data(), error.data() + space, slot);
  if (ec != std::errc() || end != error.data() + space || slot >= RedisRouter::kSlots) return std::nullopt;
  auto to = parse_node_address(error.substr(space + 1), asked);
  if (!to) return std::nullopt;
  r.slot = static_cast<uint16_t>(slot);
  r.to = std::move(*to);
  return r;
}

[[nodiscard]] std::string_view reply_text(const redisReply* r) noexcept {
  if (r == nullptr || r->str == nullptr) return {};
  return {r->str, r->len};
}

// One node of a CLUSTER SLOTS entry: [endpoint, port, id, ...]. A NULL or
// empty endpoint means the host of the node asked; "?" an endpoint unknown
// (the node cannot be reached: left out).
[[nodiscard]] std::optional<RedisEndpoint> slots_node(const redisReply* n, const RedisEndpoint& asked) {
  if (n == nullptr || n->type != REDIS_REPLY_ARRAY || n->elements < 2) return std::nullopt;
  const redisReply* host = n->element[0];
  const redisReply* port = n->element[1];
  if (!reply_is_integer(port) || reply_integer(port) <= 0 || reply_integer(port) > 65535) return std::nullopt;
  RedisEndpoint e;
  if (host != nullptr && host->type == REDIS_REPLY_STRING && host->len > 0) {
    if (reply_text(host) == "?") return std::nullopt;
    e.host = std::string(reply_text(host));
  } else if (host != nullptr && (host->type == REDIS_REPLY_NIL || host->type == REDIS_REPLY_STRING)) {
    e.host = asked.host;
  }
  if (e.host.empty()) return std::nullopt;
  e.port = static_cast<uint16_t>(reply_integer(port));
  return e;
}

}  // namespace

std::string_view to_string(RedisRouter::Mode m) noexcept {
  switch (m) {
    case RedisRouter::Mode::kUnknown:
      return "unknown";
    case RedisRouter::Mode::kSingle:
      return "single";
    case RedisRouter::Mode::kCluster:
      return "cluster";
  }
  return "unknown";
}

uint16_t RedisRouter::crc16(std::string_view bytes) noexcept {
  uint16_t crc = 0;
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ b) & 0xff]);
  }
  return crc;
}

uint16_t RedisRouter::key_slot(std::string_view key) noexcept {
  // The spec's rule, to the letter: only the first `{` counts, then the
  // first `}` after it; an empty tag ("{}") means the whole key is hashed.
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<uint16_t>(crc16(key) & (kSlots - 1));
}

RedisRouter::RedisRouter(std::vector<RedisEndpoint> seeds, RedisLink::Options options) : options_(options) {
  for (RedisEndpoint& s : seeds) (void)intern(s);
}

RedisRouter::~RedisRouter() = default;

size_t RedisRouter::intern(const RedisEndpoint& endpoint) {
  std::string name = endpoint.to_string();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].name == name) return i;
  }
  nodes_.push_back(Node{endpoint, std::move(name), nullptr});
  return nodes_.size() - 1;
}

RedisLink& RedisRouter::link(size_t node) {
  Node& n = nodes_[node];
  if (!n.link) n.link = std::make_unique<RedisLink>(n.endpoint, options_);
  return *n.link;
}

std::optional<RedisEndpoint> RedisRouter::owner(uint16_t slot) const {
  if (mode_ != Mode::kCluster || slot >= owner_.size() || owner_[slot] == kNoNode) return std::nullopt;
  return nodes_[owner_[slot]].endpoint;
}

std::string RedisRouter::describe() const {
  std::string s = "redis ";
  s += to_string(mode_);
  if (mode_ == Mode::kSingle) s += " (" + nodes_[single_].name + ")";
  if (mode_ == Mode::kCluster) {
    const auto mapped = std::count_if(owner_.begin(), owner_.end(), [](uint16_t o) { return o != kNoNode; });
    s += ", " + std::to_string(mapped) + "/" + std::to_string(kSlots) + " slots mapped";
  }
  size_t connected = 0;
  for (const Node& n : nodes_) connected += n.link && n.link->connected() ? 1 : 0;
  s += ", " + std::to_string(nodes_.size()) + " nodes known (" + std::to_string(connected) + " connected), " +
       std::to_string(redirections_) + " redirections, " + std::to_string(map_refreshes_) + " map refreshes";
  if (refresh_pending_) s += ", refresh pending";
  return s;
}

// Nodes already connected first (they answer cheaply), then the rest in the
// order they became known: the seeds, in the caller's order, lead.
std::vector<size_t> RedisRouter::refresh_order() const {
  std::vector<size_t> order;
  order.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].link && nodes_[i].link->connected()) order.push_back(i);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].link || !nodes_[i].link->connected()) order.push_back(i);
  }
  return order;
}

// A CLUSTER SLOTS answer ([start, end, primary, replicas...] per range) made
// the map; false, and the map left as it was, when it is not one.
bool RedisRouter::adopt_slots(const RedisReply& reply, size_t asked) {
  std::vector<uint16_t> map(kSlots, kNoNode);
  const RedisEndpoint asked_endpoint = nodes_[asked].endpoint;  // a copy: intern() may move nodes_
  for (size_t i = 0; i < reply.elements(); ++i) {
    const redisReply* range = reply.element(i);
    if (range == nullptr || range->type != REDIS_REPLY_ARRAY || range->elements < 3) return false;
    const long long first = reply_integer(range->element[0]);
    const long long last = reply_integer(range->element[1]);
    if (!reply_is_integer(range->element[0]) || !reply_is_integer(range->element[1]) || first < 0 || last < first ||
        last >= kSlots) {
      return false;
    }
    const auto primary = slots_node(range->element[2], asked_endpoint);
    if (!primary) continue;  // a primary of unknown address: its slots stay unmapped
    const auto node = static_cast<uint16_t>(intern(*primary));
    std::fill(map.begin() + first, map.begin() + last + 1, node);
  }
  owner_ = std::move(map);
  return true;
}

// Asks the known nodes in turn for the map (a server without cluster support
// puts the router in single-node mode) until one answers or
// kMaxRefreshAttempts have failed. On failure the mode and map stay as they
// were (most slots are likely still right) and the refresh stays pending.
RedisLink::Result RedisRouter::refresh(Clock::time_point now) {
  static constexpr std::string_view kSlotsCmd[] = {"CLUSTER", "SLOTS"};
  RedisLink::Result last;
  last.error = RedisError::kUnreachable;
  last.detail = "no Redis node to ask for the cluster's slots";
  int failures = 0;
  for (const size_t i : refresh_order()) {
    if (failures >= kMaxRefreshAttempts) break;
    RedisLink::Result r = link(i).command(kSlotsCmd, now);
    if (r.error == RedisError::kNone && r.reply.is_array() && adopt_slots(r.reply, i)) {
      mode_ = Mode::kCluster;
      last_good_ = i;
      refresh_pending_ = false;
      ++map_refreshes_;
      return {};
    }
    if (r.error == RedisError::kServer && r.detail.find("cluster support disabled") != std::string::npos) {
      mode_ = Mode::kSingle;
      single_ = i;
      last_good_ = i;
      owner_.clear();
      refresh_pending_ = false;
      ++map_refreshes_;
      return {};
    }
    if (r.error == RedisError::kNone) {
      r.error = RedisError::kProtocol;
      r.detail = nodes_[i].name + ": CLUSTER SLOTS answered with something else than a slot list";
    }
    if (r.error != RedisError::kBackingOff) ++failures;
    // Refused credentials say more than another node's silence: kept.
    if (!is_setup_error(last.error) || is_setup_error(r.error)) last = std::move(r);
  }
  refresh_pending_ = true;
  return last;
}

size_t RedisRouter::route(uint16_t slot) const noexcept {
  if (mode_ == Mode::kSingle) return single_;
  const uint16_t o = slot < owner_.size() ? owner_[slot] : kNoNode;
  // A slot no node serves (as far as we know): any node will say who does
  // (MOVED) or that nobody does (CLUSTERDOWN).
  return o != kNoNode ? o : last_good_;
}

RedisLink::Result RedisRouter::send(size_t node, std::span<const std::string_view> argv, bool asking,
                                    Clock::time_point now) {
  RedisLink& l = link(node);
  if (asking) {
    static constexpr std::string_view kAsking[] = {"ASKING"};
    RedisLink::Result a = l.command(kAsking, now);
    if (a.error != RedisError::kNone) return a;
  }
  return l.command(argv, now);
}

RedisLink::Result RedisRouter::command(std::string_view routing_key, std::span<const std::string_view> argv,
                                       Clock::time_point now) {
  if (mode_ == Mode::kUnknown || refresh_pending_) {
    RedisLink::Result r = refresh(now);
    if (mode_ == Mode::kUnknown) return r;  // no node has ever answered: nowhere to send it
  }
  const uint16_t slot = key_slot(routing_key);
  size_t node = route(slot);
  bool asking = false;
  for (int followed = 0;; ++followed) {
    RedisLink::Result r = send(node, argv, asking, now);
    if (is_unanswered(r.error)) {
      refresh_pending_ = true;  // a primary gone: its replica may be serving the slot by now
      return r;
    }
    std::optional<Redirect> to;
    if (r.error == RedisError::kServer) to = parse_redirect(r.detail, nodes_[node].endpoint);
    if (!to) return r;
    if (followed == kMaxRedirections) {
      refresh_pending_ = true;
      r.detail = "more than " + std::to_string(kMaxRedirections) + " redirections, the last: " + r.detail;
      return r;
    }
    ++redirections_;
    node = intern(to->to);
    asking = to->ask;
    if (!to->ask) {
      // The slot has moved for good: so have others, likely (a reshard, a
      // failover). Fix this one now, learn the rest before the next command.
      if (mode_ != Mode::kCluster) {
        mode_ = Mode::kCluster;
        owner_.assign(kSlots, kNoNode);
      }
      owner_[to->slot] = static_cast<uint16_t>(node);
      refresh_pending_ = true;
    }
  }
}

std::vector<RedisLink::Result> RedisRouter::pipeline(std::span<const Routed> commands, Clock::time_point now) {
  std::vector<RedisLink::Result> out(commands.size());
  if (commands.empty()) return out;
  if (mode_ == Mode::kUnknown || refresh_pending_) {
    RedisLink::Result r = refresh(now);
    if (mode_ == Mode::kUnknown) {
      for (RedisLink::Result& o : out) o = RedisLink::Result{r.error, r.detail, {}};
      return out;
    }
  }
  // Every command written to its node first, then the replies read in the
  // same order: each node works on its own while the others do, so a sync
  // costs about one round trip however many nodes it reaches.
  std::vector<size_t> node(commands.size());
  std::vector<bool> begun(commands.size(), false);
  for (size_t i = 0; i < commands.size(); ++i) {
    node[i] = route(key_slot(commands[i].routing_key));
    out[i] = link(node[i]).begin(commands[i].argv, now);
    begun[i] = out[i].error == RedisError::kNone;
    if (is_unanswered(out[i].error)) refresh_pending_ = true;
  }
  std::vector<size_t> again;
  for (size_t i = 0; i < commands.size(); ++i) {
    if (!begun[i]) continue;
    out[i] = link(node[i]).finish(now);
    if (is_unanswered(out[i].error)) {
      refresh_pending_ = true;  // a primary gone: its replica may be serving the slot by now
      continue;
    }
    if (out[i].error == RedisError::kServer && parse_redirect(out[i].detail, nodes_[node[i]].endpoint)) again.push_back(i);
  }
  // A slot that moved (or is moving): that command alone, redirected as
  // command() follows it.
  for (const size_t i : again) out[i] = command(commands[i].routing_key, commands[i].argv, now);
  return out;
}

}  // namespace sluice::control
