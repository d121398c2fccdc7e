// Sends each Redis command to the node that holds its key (cluster
// budgets on a Redis Cluster): the slot map a seed answers to
// CLUSTER SLOTS, kept up to date by the MOVED and ASK redirections the
// nodes answer with, and refreshed after a node stops answering, which is
// how a failover to a replica is found. A server without cluster support
// (the common single Redis) is found the same way and simply used as is.
//
// Why a router of our own: Debian 12's hiredis (0.14.1, libhiredis-dev) has
// no cluster support, and Debian ships no maintained C or C++ cluster client:
// `apt-cache search` finds no hiredis-cluster / libhiredis-cluster /
// hiredis-vip, no redis++ (redis-plus-plus), no cpp_redis; the only C++ Redis
// client packaged, POCO's (libpocoredis80, 1.11), speaks to one server and
// does not follow redirections. The cluster clients Debian does package are
// for other languages (python3-rediscluster, golang-github-mna-redisc-dev).
// The protocol a client needs is small (the key's slot, CLUSTER SLOTS,
// -MOVED, -ASK/ASKING), so it is done here over RedisLink rather than by
// vendoring a library.
//
// Like RedisLink: the control thread only, blocking, never on the data path.
// One command costs at most a refresh (a few nodes tried, each bounded by
// the connect and command timeouts, and a node backing off costs nothing)
// plus the command itself and its redirections, which only a node that
// answered can cause; a node that does not answer ends the command with its
// error, and the caller tries again at its next sync.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/cluster/redis_link.h"

namespace sluice::control {

class RedisRouter {
 public:
  static constexpr uint16_t kSlots = 16384;
  // Redirections followed for one command; past them the command fails
  // (the cluster is being reshaped faster than we follow: try next sync).
  static constexpr int kMaxRedirections = 5;
  // Nodes asked for the map in one refresh, not counting those backing off.
  static constexpr int kMaxRefreshAttempts = 3;

  enum class Mode : uint8_t {
    kUnknown,  // no node has answered CLUSTER SLOTS yet
    kSingle,   // a server without cluster support: everything goes to it
    kCluster,  // a Redis Cluster: each command to its slot's primary
  };

  // `seeds`: where to ask for the topology first, each in turn. Every link
  // (one per node, made on first use) gets `options`.
  RedisRouter(std::vector<RedisEndpoint> seeds, RedisLink::Options options);
  ~RedisRouter();
  RedisRouter(const RedisRouter&) = delete;
  RedisRouter& operator=(const RedisRouter&) = delete;

  // The Redis Cluster hash slot of `key`: CRC16 (XMODEM) mod 16384, of the
  // hash tag alone when the key has one (the bytes between its first `{`
  // and the first `}` after it, when there are any).
  [[nodiscard]] static uint16_t key_slot(std::string_view key) noexcept;
  // CRC16/XMODEM (polynomial 0x1021, initial value 0), as the spec defines it.
  [[nodiscard]] static uint16_t crc16(std::string_view bytes) noexcept;

  // Sends `argv` to the node that holds `routing_key`'s slot (in single-node
  // mode, to the one server) and returns its reply, following MOVED (the map
  // is corrected at once and refreshed before the next command) and ASK (the
  // one command is sent after ASKING, the map left alone). A node that does
  // not answer (kUnreachable, kConnectionLost, kBackingOff) ends the command
  // with that error and has the map refreshed before the next one. Other
  // server errors, CLUSTERDOWN and TRYAGAIN among them, are kServer with
  // their text. `routing_key` must be the key (or one of the hash-tagged
  // keys) the command touches; a keyless command may pass any key, to reach
  // that key's node.
  [[nodiscard]] RedisLink::Result command(std::string_view routing_key, std::span<const std::string_view> argv,
                                          RedisLink::Clock::time_point now);

  // Several commands at once: each written to the node that holds its
  // routing key's slot before any reply is read, the replies then read in
  // order (commands to one node are pipelined on its link). A reply that
  // redirects (MOVED, ASK) has its command sent again alone, as command()
  // sends it. One result per command, in their order.
  struct Routed {
    std::string_view routing_key;
    std::span<const std::string_view> argv;
  };
  [[nodiscard]] std::vector<RedisLink::Result> pipeline(std::span<const Routed> commands, RedisLink::Clock::time_point now);
  // Asks the nodes for the topology now (connecting, and authenticating,
  // as any command would): what a check at start-up learns. kAuth or kTls
  // (is_setup_error) when a node refused the credentials or the handshake,
  // even if another could not be reached.
  [[nodiscard]] RedisLink::Result probe(RedisLink::Clock::time_point now) { return refresh(now); }

  [[nodiscard]] Mode mode() const noexcept { return mode_; }
  [[nodiscard]] bool cluster_mode() const noexcept { return mode_ == Mode::kCluster; }
  // Redirections followed (MOVED and ASK), maps taken from CLUSTER SLOTS
  // (or the single-node answer), and nodes known (seeds included).
  [[nodiscard]] uint64_t redirections() const noexcept { return redirections_; }
  [[nodiscard]] uint64_t map_refreshes() const noexcept { return map_refreshes_; }
  [[nodiscard]] size_t nodes() const noexcept { return nodes_.size(); }
  // The node the map gives for `slot` now: nullopt in single-node mode, or
  // when no node is known to serve it.
  [[nodiscard]] std::optional<RedisEndpoint> owner(uint16_t slot) const;
  // One line for logs and sluicectl: the mode, the nodes, the counters.
  [[nodiscard]] std::string describe() const;

 private:
  static constexpr uint16_t kNoNode = UINT16_MAX;

  struct Node {
    RedisEndpoint endpoint;
    std::string name;                 // endpoint.to_string(): the key nodes are found by
    std::unique_ptr<RedisLink> link;  // made on first use
  };

  [[nodiscard]] RedisLink::Result refresh(RedisLink::Clock::time_point now);
  [[nodiscard]] bool adopt_slots(const RedisReply& reply, size_t asked);
  [[nodiscard]] std::vector<size_t> refresh_order() const;
  [[nodiscard]] size_t route(uint16_t slot) const noexcept;
  [[nodiscard]] RedisLink::Result send(size_t node, std::span<const std::string_view> argv, bool asking,
                                       RedisLink::Clock::time_point now);
  [[nodiscard]] RedisLink& link(size_t node);
  [[nodiscard]] size_t intern(const RedisEndpoint& endpoint);

  RedisLink::Options options_;
  std::vector<Node> nodes_;      // seeds first, then every node the cluster named
  std::vector<uint16_t> owner_;  // slot -> index in nodes_, kNoNode: none known (empty unless kCluster)
  Mode mode_ = Mode::kUnknown;
  bool refresh_pending_ = false;
  size_t single_ = 0;     // kSingle: the server
  size_t last_good_ = 0;  // the node that answered the last refresh: where an unmapped slot goes
  uint64_t redirections_ = 0;
  uint64_t map_refreshes_ = 0;
};

[[nodiscard]] std::string_view to_string(RedisRouter::Mode m) noexcept;

}  // namespace sluice::control
