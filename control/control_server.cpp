// poll() over the listening socket and up to kMaxClients connections; each
// complete line is one request.
#include "control_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "protocol.h"

namespace sluice::control {
namespace {

constexpr size_t kMaxClients = 32;

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
  for (Client& c : clients_) close(c.fd);
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

void ControlServer::accept_client() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  ucred peer{};
  socklen_t len = sizeof peer;
  const bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0;
  const bool allowed = known && (peer.uid == 0 || peer.uid == geteuid() ||
                                 (group_ != static_cast<gid_t>(-1) && peer.gid == group_));
  if (!allowed || clients_.size() >= kMaxClients) {
    const std::string r = error_response(ErrorCode::kForbidden, allowed ? "too many control connections"
                                                                        : "this user may not use sluiced's control socket") +
                          "\n";
    (void)!send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    return;
  }
  clients_.push_back({fd, {}});
}

bool ControlServer::serve_client(Client& c, const Handler& handler) {
  char buf[4096];
  const ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  c.in.append(buf, static_cast<size_t>(n));
  for (;;) {
    const size_t nl = c.in.find('\n');
    if (nl == std::string::npos) {
      if (c.in.size() > kMaxRequestBytes) {
        const std::string r = error_response(ErrorCode::kRequestTooLarge, "a request is one line of at most 64 KiB") + "\n";
        (void)!send(c.fd, r.data(), r.size(), MSG_NOSIGNAL);
        return false;
      }
      return true;
    }
    const std::string line = c.in.substr(0, nl);
    c.in.erase(0, nl + 1);
    std::string error;
    const std::optional<JsonValue> request = parse_json(line, error);
    std::string response;
    if (!request || request->object() == nullptr) {
      response = error_response(ErrorCode::kBadRequest, request ? "a request is a JSON object" : "not JSON: " + error);
    } else if (const JsonValue* v = request->get("v"); v != nullptr && v->number() != double{kProtocolVersion}) {
      response = error_response(ErrorCode::kUnsupportedVersion,
                                "this sluiced speaks version " + std::to_string(kProtocolVersion) + " of the protocol");
    } else {
      response = handler(*request);
    }
    response += '\n';
    if (send(c.fd, response.data(), response.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(response.size())) {
      return false;
    }
  }
}

void ControlServer::serve(const std::atomic<bool>& stop, const Handler& handler) {
  std::vector<pollfd> fds;
  while (!stop.load(std::memory_order_relaxed)) {
    fds.clear();
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Client& c : clients_) fds.push_back({c.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 100) <= 0) continue;
    for (size_t i = fds.size(); i-- > 1;) {
      if (fds[i].revents == 0) continue;
      Client& c = clients_[i - 1];
      if (!serve_client(c, handler)) {
        close(c.fd);
        clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(i - 1));
      }
    }
    if (fds[0].revents & POLLIN) accept_client();
  }
}

}  // namespace sluice::control
