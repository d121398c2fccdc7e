// poll() over the listening socket and the connections (ControlLimits caps
// them); each complete line is one request. See control_server.h for the
// deadlines.
#include "control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "protocol.h"

namespace sluice::control {
namespace {

std::string errno_text() { return std::strerror(errno); }

bool make_parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return true;
  const std::string dir = path.substr(0, slash);
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  if (!make_parent(dir)) return false;
  return mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST;
}

}  // namespace

ControlServer::~ControlServer() {
  for (Client& c : clients_) drop(c);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

std::string ControlServer::open(const std::string& path, gid_t group) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return "control socket path '" + path + "' is empty or longer than " + std::to_string(sizeof addr.sun_path - 1) +
           " bytes";
  }
  if (!make_parent(path)) return "cannot create the directory of the control socket " + path + ": " + errno_text();
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());

  // A socket file that nobody answers on is left over from a crash.
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    const bool live = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(probe);
    if (live) return "another sluiced already serves the control socket " + path;
  }
  unlink(path.c_str());

  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return "control socket: " + errno_text();
  // Created without permissions for anyone, then opened to owner and group:
  // no window in which others could connect.
  const mode_t old = umask(0777);
  const int rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (rc != 0) {
    const std::string err = "cannot create the control socket " + path + ": " + errno_text();
    close(listen_fd_);
    listen_fd_ = -1;
    return err;
  }
  path_ = path;
  group_ = group;
  if (group != static_cast<gid_t>(-1) && chown(path.c_str(), static_cast<uid_t>(-1), group) != 0) {
    return "cannot give the control socket " + path + " to group " + std::to_string(group) + ": " + errno_text();
  }
  if (chmod(path.c_str(), 0660) != 0) return "cannot chmod the control socket " + path + ": " + errno_text();
  if (listen(listen_fd_, 16) != 0) return "control socket: listen: " + errno_text();
  return {};
}

bool ControlServer::allowed(int fd, uid_t uid, gid_t gid) const {
  if (uid == 0 || uid == geteuid()) return true;
  if (group_ == static_cast<gid_t>(-1)) return false;
  if (gid == group_) return true;
  // A supplementary member is a member too. The peer's groups as they were
  // when it connected.
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return std::find(groups.begin(), groups.end(), group_) != groups.end();
    }
    if (errno != ERANGE) return false;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return false;
}

void ControlServer::accept_client(Clock::time_point now) {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  std::string refusal;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || !allowed(fd, peer.uid, peer.gid)) {
    refusal = "this user may not use sluiced's control socket";
  } else if (clients_.size() >= limits_.total) {
    refusal = "too many control connections (at most " + std::to_string(limits_.total) + ")";
  } else if (static_cast<size_t>(std::count_if(clients_.begin(), clients_.end(), [&](const Client& c) {
               return c.uid == peer.uid;
             })) >= limits_.per_uid) {
    refusal = "too many control connections from uid " + std::to_string(peer.uid) + " (at most " +
              std::to_string(limits_.per_uid) + ")";
  }
  if (!refusal.empty()) {
    const std::string r = error_response(ErrorCode::kForbidden, refusal) + "\n";
    (void)!send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    return;
  }
  clients_.push_back({fd, peer.uid, {}, {}, {}, now, now, now});
}

bool ControlServer::receive(Client& c, Clock::time_point now) {
  char buf[4096];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxQueuedFiles)];
  for (;;) {
    iovec iov{buf, sizeof buf};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(c.fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    for (cmsghdr* h = CMSG_FIRSTHDR(&m); h != nullptr; h = CMSG_NXTHDR(&m, h)) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
        c.fds.push_back(fd);
      }
    }
    // More descriptors than a request may use (the kernel closed those past
    // the buffer): not a client of this protocol.
    if ((m.msg_flags & MSG_CTRUNC) != 0 || c.fds.size() > kMaxQueuedFiles) return false;
    if (c.in.empty()) c.request_since = now;
    c.in.append(buf, static_cast<size_t>(n));
    // One request at most past the limit is kept: the check below refuses it.
    if (c.in.size() > kMaxRequestBytes || static_cast<size_t>(n) < sizeof buf) return true;
  }
}

PassedFile ControlServer::take_file(Client& c, const Json& request) {
  const Json* fd = member(request, arg::kFd);
  if (fd == nullptr || !fd->is_boolean() || !fd->get<bool>()) return {};
  if (c.fds.empty()) {
    PassedFile none;
    none.passed = true;
    none.error = "the request says a file came with it (\"fd\": true), and none did";
    return none;
  }
  const int first = c.fds.front();
  c.fds.erase(c.fds.begin());
  return read_passed_file(first);
}

void ControlServer::drop(Client& c) {
  for (const int fd : c.fds) close(fd);
  c.fds.clear();
  close(c.fd);
}

bool ControlServer::answer_lines(Client& c, const Handler& handler, Clock::time_point now) {
  // Requests are answered in order, one reply in flight at a time: a peer
  // that does not take its replies gets no more answered.
  while (c.out.empty()) {
    const size_t nl = c.in.find('\n');
    if (nl == std::string::npos && c.in.size() <= kMaxRequestBytes) return true;  // the rest is to come
    if (nl == std::string::npos || nl > kMaxRequestBytes) {
      c.out = error_response(ErrorCode::kRequestTooLarge, "a request is one line of at most 64 KiB") + "\n";
      (void)flush(c, now);
      return false;
    }
    const std::string line = c.in.substr(0, nl);
    c.in.erase(0, nl + 1);
    c.request_since = now;  // what is left of `in` began to arrive no earlier than this
    c.active = now;
    std::string error;
    const std::optional<Json> request = parse_json(line, error);
    if (!request || !request->is_object()) {
      c.out = error_response(ErrorCode::kBadRequest, request ? "a request is a JSON object" : "unreadable request: " + error);
    } else if (const Json* v = member(*request, arg::kVersion);
               v != nullptr && whole_number(*v) != uint64_t{kProtocolVersion}) {
      c.out = error_response(ErrorCode::kUnsupportedVersion,
                             "this sluiced speaks version " + std::to_string(kProtocolVersion) + " of the protocol");
    } else {
      c.out = handler(*request, take_file(c, *request));
    }
    c.out += '\n';
    c.reply_since = now;
    if (!flush(c, now)) return false;
  }
  return true;
}

bool ControlServer::flush(Client& c, Clock::time_point now) {
  while (!c.out.empty()) {
    const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out.erase(0, static_cast<size_t>(n));
  }
  c.active = now;
  return true;
}

bool ControlServer::within_deadlines(const Client& c, Clock::time_point now) const {
  if (!c.out.empty()) return now - c.reply_since <= limits_.reply_deadline;
  if (!c.in.empty()) return now - c.request_since <= limits_.request_deadline;
  return now - c.active <= limits_.idle_timeout;
}

void ControlServer::serve(const std::atomic<bool>& stop, const Handler& handler) {
  std::vector<pollfd> fds;
  while (!stop.load(std::memory_order_relaxed)) {
    fds.clear();
    fds.push_back({listen_fd_, POLLIN, 0});
    // A client with a reply outstanding is not read from until it takes it.
    for (const Client& c : clients_) fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    (void)poll(fds.data(), fds.size(), 100);
    const Clock::time_point now = Clock::now();
    for (size_t i = fds.size(); i-- > 1;) {
      Client& c = clients_[i - 1];
      const short ev = fds[i].revents;
      bool keep = true;
      if (ev & (POLLERR | POLLNVAL)) keep = false;
      if (keep && (ev & POLLOUT)) keep = flush(c, now);
      if (keep && (ev & (POLLIN | POLLHUP))) keep = receive(c, now);
      if (keep && (ev & (POLLIN | POLLHUP | POLLOUT))) keep = answer_lines(c, handler, now);
      if (keep) keep = within_deadlines(c, now);
      if (!keep) {
        drop(c);
        clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i - 1));
      }
    }
    if (fds[0].revents & POLLIN) accept_client(now);
  }
}

}  // namespace sluice::control
