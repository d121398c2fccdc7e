// The control thread's socket: a Unix stream socket speaking line-delimited
// JSON (one request object per line, one response object per line; see
// protocol.h). Created 0660, owned by root and an optional group, and every
// peer is checked again: root, sluiced's own user, or a member of the group
// (primary or supplementary: SO_PEERGROUPS). Runs in its own thread, never
// on a worker lcore; serving a request touches nothing a worker writes
// except by reading its counters.
//
// Nothing a peer does can hold the thread: every socket is non-blocking and
// every connection has deadlines (ControlLimits). A request must arrive
// whole within its deadline of its first byte; a reply must be taken by the
// peer within its deadline (a peer that sends requests and never reads is
// dropped, and nothing more is read from it meanwhile); a connection with
// nothing in flight is closed after the idle timeout; and one user may hold
// only so many connections, so a crowd of idle ones from one user never
// locks another out.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "json.h"
#include "passed_file.h"

namespace sluice::control {

struct ControlLimits {
  std::chrono::milliseconds request_deadline{5000};  // a request line whole, from its first byte
  std::chrono::milliseconds reply_deadline{5000};    // a reply taken by the peer, from when it was ready
  std::chrono::milliseconds idle_timeout{60000};     // a connection with nothing in flight
  size_t per_uid = 8;                                // connections one user may hold at once
  size_t total = 64;                                 // connections in all
};

class ControlServer {
 public:
  // Answers one request (an object) with one response object, as JSON text;
  // `file` is what came with it (passed_file.h).
  using Handler = std::function<std::string(const Json& request, const PassedFile& file)>;
  // Descriptors a connection may have sent ahead of the requests that take
  // them; past that it is dropped.
  static constexpr size_t kMaxQueuedFiles = 4;

  explicit ControlServer(ControlLimits limits = {}) : limits_(limits) {}
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;
  ~ControlServer();

  // Creates the socket at `path` (and its directory, 0755, if missing),
  // group `group` (-1: keep the process's). Returns an empty string, or what
  // went wrong. A stale socket file (nobody listening) is replaced; a live
  // one is an error, so two sluiced never share a socket.
  [[nodiscard]] std::string open(const std::string& path, gid_t group);

  // Serves until `stop` is set (checked every 100 ms).
  void serve(const std::atomic<bool>& stop, const Handler& handler);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] const ControlLimits& limits() const noexcept { return limits_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    int fd;
    uid_t uid;
    std::string in;   // received, not yet a whole request
    std::string out;  // replies the peer has not taken yet
    std::vector<int> fds;  // descriptors received (SCM_RIGHTS), oldest first, for requests that say "fd": true
    Clock::time_point request_since;  // the first byte of the request in `in`
    Clock::time_point reply_since;    // when `out` filled
    Clock::time_point active;         // the last request answered (or the connection)
  };
  void accept_client(Clock::time_point now);
  [[nodiscard]] bool allowed(int fd, uid_t uid, gid_t gid) const;
  // Each returns false when the connection is to be closed.
  [[nodiscard]] bool receive(Client& c, Clock::time_point now);
  [[nodiscard]] bool answer_lines(Client& c, const Handler& handler, Clock::time_point now);
  [[nodiscard]] bool flush(Client& c, Clock::time_point now);
  [[nodiscard]] bool within_deadlines(const Client& c, Clock::time_point now) const;
  // The file a request says it passed: the oldest descriptor received.
  [[nodiscard]] static PassedFile take_file(Client& c, const Json& request);
  static void drop(Client& c);

  ControlLimits limits_;
  std::string path_;
  int listen_fd_ = -1;
  gid_t group_ = static_cast<gid_t>(-1);
  std::vector<Client> clients_;
};

}  // namespace sluice::control
