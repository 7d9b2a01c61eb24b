// serve/http_connection.cpp — how the server holds a connection (server_impl.h, HttpServer): the
// per-address limit, the whole-request deadline and keep-alive, around httplib's request parsing
// and routing (Server::process_request), over a socket stream of our own.
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "toy/serve/server_impl.h"

namespace toy::serve {
namespace {

using Clock = std::chrono::steady_clock;

// What the thread handling a connection knows about it, for the handlers it calls.
struct Connection {
  int fd = -1;
  uint64_t id = 0;  // in arrival order
  HttpServer* server = nullptr;
  bool close_after_response = false;
};
thread_local Connection* current = nullptr;

// Milliseconds from now until `t` for poll(): 0 when past, at most a minute per wait.
int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return int(std::clamp<int64_t>(ms, 0, 60'000));
}

// Waits until `fd` is ready for `events` or `until` passes; poll() restarts after a signal.
bool wait_for(int fd, short events, Clock::time_point until) {
  for (;;) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int n = ::poll(&p, 1, ms_until(until));
    if (n > 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && Clock::now() < until) continue;  // a wait capped at a minute
    return false;
  }
}

// The connection as httplib's Stream. Reads are buffered (httplib reads a request line and
// headers a byte at a time) and fail once the request's deadline has passed, however the bytes
// trickle in; writes fail when the socket stays full for the write timeout. One stream serves
// every request of the connection, so bytes of a pipelined request read ahead are kept.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(int fd, std::chrono::seconds write_timeout) : fd_(fd), write_timeout_(write_timeout) {}

  // Waits up to `idle` for the first byte of the next request; false when none came.
  bool next_request(std::chrono::seconds idle) { return pos_ < end_ || wait_for(fd_, POLLIN, Clock::now() + idle); }
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }

  bool is_readable() const override { return pos_ < end_ || wait_for(fd_, POLLIN, deadline_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, Clock::now() + write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == end_) {
      if (!wait_for(fd_, POLLIN, deadline_)) return -1;
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof buf_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      pos_ = 0;
      end_ = size_t(n);
    }
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, buf_ + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(::getsockname, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  template <class Get>
  void address_of(Get get, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  int fd_;
  std::chrono::seconds write_timeout_;
  Clock::time_point deadline_ = Clock::now();
  char buf_[4096];
  size_t pos_ = 0, end_ = 0;
};

// The answer to a connection over the per-address limit, written before it is closed.
void refuse_connection(int fd, int limit) {
  const std::string body = ApiError(429,
                                    "Too many connections from this address (the limit is " + std::to_string(limit) +
                                        "); close idle ones or retry later",
                                    "", "too_many_connections")
                               .body()
                               .dump();
  const std::string response = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  // The socket is new and its send buffer empty: this does not block.
  [[maybe_unused]] const ssize_t n = ::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Closes the sending side and discards what the client still sends, for up to `time`. A response
// that went out before its request was read to the end (413, 429) would otherwise be followed by
// a reset, which can destroy it before the client reads it.
void linger(int fd, std::chrono::milliseconds time) {
  ::shutdown(fd, SHUT_WR);
  const auto until = Clock::now() + time;
  char buf[16384];
  for (size_t drained = 0; drained < (size_t(8) << 20) && wait_for(fd, POLLIN, until);) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    drained += size_t(n);
  }
}

}  // namespace

void close_connection_after_response() {
  if (current) current->close_after_response = true;
}

void headers_received() {
  if (current) current->server->headers_received(current->id);
}

int client_socket() { return current ? current->fd : -1; }

bool client_alive(int fd) {
  if (fd < 0) return true;
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, 0) <= 0) return true;  // nothing to read
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));  // 0: the client closed
}

bool HttpServer::admit(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  int& n = connections_[address];
  if (n >= limits_.max_connections_per_address) return false;
  ++n;
  return true;
}

void HttpServer::leave(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--connections_[address] == 0) connections_.erase(address);
}

void HttpServer::wait_for_headers(uint64_t id, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_for_headers_[id] = fd;
  if (waiting_for_headers_.size() > size_t(limits_.max_connections_sending_headers)) {
    // The oldest socket is still open: its thread takes it out of the map before closing it.
    ::shutdown(waiting_for_headers_.begin()->second, SHUT_RD);
    waiting_for_headers_.erase(waiting_for_headers_.begin());
  }
}

void HttpServer::headers_received(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_for_headers_.erase(id);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  ConnectionStream strm(sock, limits_.write_timeout);
  std::string address;
  int port = 0;
  strm.get_remote_ip_and_port(address, port);
  bool ok = false;
  if (!admit(address)) {
    refuse_connection(sock, limits_.max_connections_per_address);
    if (on_refused_) on_refused_(429, address);
    // A lingering close, so that a client still sending its request reads the 429 rather than a
    // reset; a refusal holds a thread meanwhile, so only a few linger at once.
    const bool may_linger = lingering_refusals_.fetch_add(1) < kMaxLingeringRefusals;
    linger(sock, may_linger ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(0));
    --lingering_refusals_;
  } else {
    Connection conn{.fd = sock, .server = this};
    {
      std::lock_guard<std::mutex> lock(mu_);
      conn.id = next_connection_++;
    }
    current = &conn;
    for (size_t left = keep_alive_max_count_; left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
      wait_for_headers(conn.id, sock);  // until the routing (pre-routing handler) calls headers_received()
      const bool more = strm.next_request(std::chrono::seconds(keep_alive_timeout_sec_));
      bool closed = false;
      if (more) {
        strm.set_deadline(Clock::now() + limits_.request_timeout);
        ok = process_request(strm, /*close_connection=*/left == 1 || conn.close_after_response, closed, nullptr);
      }
      headers_received(conn.id);  // none came, or httplib refused the request before routing it
      if (!more || !ok || closed || conn.close_after_response) break;
    }
    current = nullptr;
    if (conn.close_after_response) linger(sock, std::chrono::seconds(1));
    leave(address);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

void HttpServer::widen_backlog(int n) {
  // Calling listen() again on a listening socket only changes its backlog (POSIX/Linux).
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, n);
}

void HttpServer::halt() {
  // What httplib::Server::stop() does, without its "is the loop running yet" check: the accept
  // loop tests svr_sock_ before every accept, and a shut-down socket wakes a blocked accept.
  const socket_t s = svr_sock_.exchange(INVALID_SOCKET);
  if (s != INVALID_SOCKET) {
    ::shutdown(s, SHUT_RDWR);
    ::close(s);
  }
}

}  // namespace toy::serve
