#include "server/http_guard.h"

#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>


namespace ws::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kMaxHeadBytes = size_t(64) << 10;  // request line and headers together
constexpr size_t kRefusalThreads = 8;  // threads beyond the connection cap, to answer refusals
constexpr int kPollSliceMs = 200;      // how soon a waiting connection notices stop()
constexpr int kLingerMs = 1000;        // reading what a refused client still sends, at most
constexpr size_t kTrimAfterBodyBytes = size_t(4) << 20;  // bodies this large give their memory back (malloc_trim)

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// A whole response for when the guard answers by itself: before httplib has a request
// object (a head that never completes) or before it runs at all (a refused connection).
std::string raw_response(const ApiError& e) {
  // As dump_json does (invalid UTF-8 replaced); not called from here so that the connection
  // layer links without the response formatting (its sanitizer tests build it alone).
  const std::string body = e.to_json().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return "HTTP/1.1 " + std::to_string(e.status()) + " " + reason_phrase(e.status()) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

void socket_address(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? getpeername(sock, sa, &len) : getsockname(sock, sa, &len)) != 0) return;
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) return;
  ip = host;
  port = std::atoi(serv);
}

// Closing a socket with unread request bytes sends a reset, which can destroy the answer
// before the client reads it. So the write side is shut first and what the client still
// sends is read and dropped for up to `max_ms` (nginx's lingering close).
void linger_close(socket_t sock, int max_ms) {
  shutdown(sock, SHUT_WR);
  const auto until = Clock::now() + milliseconds(max_ms);
  char buf[16384];
  for (size_t drained = 0; drained < (size_t(1) << 20);) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
    pollfd p{sock, POLLIN, 0};
    if (poll(&p, 1, int(std::max<int64_t>(0, left))) <= 0) break;
    const ssize_t n = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;
    drained += size_t(n);
  }
  close(sock);
}

std::string lower_trimmed(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// How the body of a request whose head is read is delimited, checked before httplib reads
// it: headers that disagree about where the body ends let a request smuggle another one
// past a proxy, so they are refused as nginx refuses them.
std::optional<ApiError> check_framing(httplib::Request& req, size_t max_body) {
  const size_t n_length = req.get_header_value_count("Content-Length");
  const size_t n_encoding = req.get_header_value_count("Transfer-Encoding");
  if (n_encoding > 1) return bad_request("the request has more than one Transfer-Encoding header", "", "invalid_framing");
  if (n_encoding == 1) {
    const std::string te = lower_trimmed(req.get_header_value("Transfer-Encoding"));
    if (te != "chunked")
      return ApiError(501, "Transfer-Encoding '" + te + "' is not supported: send the body with Content-Length or "
                      "'Transfer-Encoding: chunked'", "not_supported_error", "", "unsupported_transfer_encoding");
    if (n_length > 0)
      return bad_request("the request has both Transfer-Encoding and Content-Length: send only one", "",
                         "invalid_framing");
    return std::nullopt;
  }
  // Neither header: the body is empty (RFC 9112 section 6.3). httplib would read until the
  // client closes, so a POST without Content-Length would hang.
  if (n_length == 0) {
    req.set_header("Content-Length", "0");
    return std::nullopt;
  }
  const std::string length = req.get_header_value("Content-Length");
  for (size_t i = 1; i < n_length; ++i)
    if (req.get_header_value("Content-Length", i) != length)
      return bad_request("the request has conflicting Content-Length headers", "", "invalid_framing");
  const auto digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (length.empty() || length.size() > 18 || !std::all_of(length.begin(), length.end(), digit))
    return bad_request("invalid Content-Length '" + lower_trimmed(length) + "'", "", "invalid_framing");
  if (std::stoull(length) > max_body)
    return ApiError(413, "the request body has " + length + " bytes; this server accepts at most " +
                    std::to_string(max_body) + " (serve --max-body-mb)", "invalid_request_error", "",
                    "request_too_large");
  return std::nullopt;
}

// One connection's socket as httplib reads and writes it. Reads are buffered across the
// connection's requests (pipelined requests are kept) and bounded per request: the head
// must arrive in full within the read timeout of the request's start, the body may not
// stall longer than the read timeout, and neither may exceed its byte budget. Past a
// bound the stream trips: reads fail from then on, and the refusal is answered by the
// handlers when httplib has a request object for it, else by the stream itself.
class GuardedStream : public httplib::Stream {
 public:
  GuardedStream(socket_t sock, const ConnectionLimits& limits, const std::atomic<socket_t>& listener,
                Refusals& refusals)
      : sock_(sock), limits_(limits), listener_(listener), refusals_(refusals),
        head_deadline_(Clock::now() + timeout()) {
    socket_address(sock, true, remote_ip_, remote_port_);
  }

  // Waits for the first byte of the next request (or finds it buffered); false when the
  // client closed, stayed idle for the read timeout, or the server stops. A new
  // connection's wait counts against its first head's deadline (as nginx's
  // client_header_timeout starts at accept).
  bool wait_for_request() {
    in_body_ = wrote_ = false;
    request_bytes_ = 0;
    const auto idle_until = first_request_ ? head_deadline_ : Clock::now() + timeout();
    if (buf_off_ == buf_len_ && wait_readable(idle_until) <= 0) return false;
    if (!first_request_) head_deadline_ = Clock::now() + timeout();
    first_request_ = false;
    return true;
  }
  // The head is read: from here bytes count against the body budget, refusals go to `req`.
  void begin_body(httplib::Request& req) {
    in_body_ = true;
    request_bytes_ = 0;
    req_ = &req;
  }
  void expect_body(bool expected) { body_expected_ = expected; }
  // A handler answered without reading the body (a 401 does): its bytes would be read as
  // the next request, so the connection must end.
  bool body_left_unread() const { return in_body_ && body_expected_ && request_bytes_ == 0; }
  size_t body_bytes_read() const { return in_body_ ? request_bytes_ : 0; }
  void end_request() {
    if (req_) refusals_.erase(req_);
    req_ = nullptr;
  }
  void trip(const ApiError& e);
  bool tripped() const { return tripped_; }

  bool is_readable() const override { return buf_off_ < buf_len_ || poll_socket(POLLIN, 0) > 0; }
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override { socket_address(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

 private:
  std::chrono::seconds timeout() const { return std::chrono::seconds(limits_.read_timeout_s); }
  int poll_socket(short events, int timeout_ms) const {
    pollfd p{sock_, events, 0};
    return poll(&p, 1, timeout_ms);
  }
  int wait_readable(Clock::time_point deadline) const;
  bool fill();

  socket_t sock_;
  const ConnectionLimits& limits_;
  const std::atomic<socket_t>& listener_;  // INVALID_SOCKET once the server stops
  Refusals& refusals_;
  std::string remote_ip_;
  int remote_port_ = -1;
  std::vector<char> buf_ = std::vector<char>(16384);
  size_t buf_off_ = 0, buf_len_ = 0;
  bool first_request_ = true;
  Clock::time_point head_deadline_;
  bool in_body_ = false;
  bool body_expected_ = false;  // Content-Length above 0, or chunked
  httplib::Request* req_ = nullptr;  // set while its body is read and its response written
  size_t request_bytes_ = 0;         // of the current head, then of the current body
  bool wrote_ = false;               // response bytes went out for the current request
  bool tripped_ = false;
  bool writes_closed_ = false;
};

// 1: readable (data or end of stream); 0: `deadline` passed; -1: error or the server stops.
int GuardedStream::wait_readable(Clock::time_point deadline) const {
  for (;;) {
    if (listener_ == INVALID_SOCKET) return -1;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    const int r = poll_socket(POLLIN, int(std::min<int64_t>(left, kPollSliceMs)));
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

bool GuardedStream::fill() {
  // The head has one deadline for all of it; the body a stall timeout for each read.
  const int ready = wait_readable(in_body_ ? Clock::now() + timeout() : head_deadline_);
  if (ready == 0) {
    const std::string what = in_body_ ? "the request body stalled" : "the request head was not complete";
    trip(ApiError(408, what + " for " + std::to_string(limits_.read_timeout_s) + " s (serve --read-timeout)",
                  "invalid_request_error", "", "request_timeout"));
  }
  if (ready <= 0) return false;
  ssize_t n;
  do {
    n = recv(sock_, buf_.data(), buf_.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  buf_off_ = 0;
  buf_len_ = size_t(n);
  return true;
}

ssize_t GuardedStream::read(char* ptr, size_t size) {
  if (tripped_) return -1;
  if (buf_off_ == buf_len_ && !fill()) return -1;
  const size_t n = std::min(size, buf_len_ - buf_off_);
  if (request_bytes_ + n > (in_body_ ? limits_.max_body_bytes : kMaxHeadBytes)) {
    trip(in_body_ ? ApiError(413, "the request body exceeds this server's limit of " +
                                      std::to_string(limits_.max_body_bytes) + " bytes (serve --max-body-mb)",
                             "invalid_request_error", "", "request_too_large")
                  : ApiError(431, "the request line and headers exceed " + std::to_string(kMaxHeadBytes) + " bytes",
                             "invalid_request_error", "", "request_too_large"));
    return -1;
  }
  std::memcpy(ptr, buf_.data() + buf_off_, n);
  buf_off_ += n;
  request_bytes_ += n;
  return ssize_t(n);
}

void GuardedStream::trip(const ApiError& e) {
  if (tripped_) return;
  tripped_ = true;
  if (req_) {
    refusals_.put(req_, e);
    // httplib then says "Connection: close" in the answer; the connection ends after it.
    req_->headers.erase("Connection");
    req_->set_header("Connection", "close");
    return;
  }
  // Still in the head: httplib will answer a half-read head with a generic 400, so the
  // stream answers instead and drops whatever httplib writes after it. A client that sent
  // nothing of this request is just closed.
  if (!wrote_ && request_bytes_ > 0) {
    const std::string response = raw_response(e);
    send(sock_, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  writes_closed_ = true;
}

bool GuardedStream::is_writable() const {
  if (writes_closed_ || poll_socket(POLLOUT, limits_.write_timeout_s * 1000) <= 0) return false;
  // Gone clients show as readable with nothing to read (end of stream or an error).
  if (poll_socket(POLLIN, 0) <= 0) return true;
  char byte;
  return recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

ssize_t GuardedStream::write(const char* ptr, size_t size) {
  if (writes_closed_ || poll_socket(POLLOUT, limits_.write_timeout_s * 1000) <= 0) return -1;
  ssize_t n;
  do {
    n = send(sock_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n > 0) wrote_ = true;
  return n;
}

}  // namespace

void ConnectionThreads::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(fn));
  // A new thread only when every started one is busy; threads stay for later connections.
  if (jobs_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
  else cv_.notify_one();
}

void ConnectionThreads::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left to run
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

void ConnectionThreads::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

std::optional<ApiError> Admissions::enter(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (total_ >= limits_.max_connections)
    return ApiError(503, "the server has " + std::to_string(total_) + " open connections, its limit (serve "
                    "--max-connections); retry later", "unavailable_error", "", "too_many_connections");
  int& mine = by_address_[address];
  if (limits_.max_connections_per_client > 0 && mine >= limits_.max_connections_per_client)
    return ApiError(429, "too many open connections from " + address + " (at most " +
                    std::to_string(limits_.max_connections_per_client) +
                    ", serve --max-connections-per-client): close idle ones or reuse them",
                    "rate_limit_error", "", "too_many_connections");
  ++mine;
  ++total_;
  return std::nullopt;
}

void Admissions::leave(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  --total_;
  if (auto it = by_address_.find(address); it != by_address_.end() && --it->second <= 0) by_address_.erase(it);
}

void Refusals::put(const httplib::Request* req, const ApiError& e) {
  std::lock_guard<std::mutex> lock(mu_);
  by_request_.insert_or_assign(req, e);
}

std::optional<ApiError> Refusals::find(const httplib::Request* req) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_request_.find(req);
  if (it == by_request_.end()) return std::nullopt;
  return it->second;
}

void Refusals::erase(const httplib::Request* req) {
  std::lock_guard<std::mutex> lock(mu_);
  by_request_.erase(req);
}

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits), admissions_(limits_) {
  const size_t threads = size_t(std::max(1, limits_.max_connections)) + kRefusalThreads;
  new_task_queue = [threads] { return new ConnectionThreads(threads); };
  // httplib also applies these to accepted sockets (SO_RCVTIMEO/SO_SNDTIMEO): a backstop,
  // since the guarded stream polls before every read and write.
  set_read_timeout(limits_.read_timeout_s);
  set_write_timeout(limits_.write_timeout_s);
  set_payload_max_length(limits_.max_body_bytes);
  set_keep_alive_timeout(limits_.read_timeout_s);  // only advertised: the stream waits for the next request
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second
  // server starts on a port in use and takes part of its connections.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  std::string address;
  int port = 0;
  socket_address(sock, true, address, port);
  if (const auto refused = admissions_.enter(address)) {
    // Answered without waiting for the request: refusals must stay cheap while the caps
    // are reached. Only what already arrived is drained before closing.
    const std::string response = raw_response(*refused);
    send(sock, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    linger_close(sock, 0);
    return false;
  }
  serve_connection(sock);
  admissions_.leave(address);
  return true;
}

void GuardedHttpServer::serve_connection(socket_t sock) {
  GuardedStream strm(sock, limits_, svr_sock_, refusals_);
  bool linger = false;
  for (size_t served = 0; served < keep_alive_max_count_; ++served) {
    if (!strm.wait_for_request()) break;
    bool closed = false;
    const httplib::Request* current = nullptr;
    const bool ok = process_request(strm, served + 1 == keep_alive_max_count_, closed, [&](httplib::Request& req) {
      current = &req;
      {
        std::lock_guard<std::mutex> lock(sockets_mu_);
        sockets_[current] = sock;
      }
      strm.begin_body(req);
      if (const auto problem = check_framing(req, limits_.max_body_bytes)) strm.trip(*problem);
      strm.expect_body(req.get_header_value("Content-Length") != "0");  // chunked has none
    });
    if (current) {
      std::lock_guard<std::mutex> lock(sockets_mu_);
      sockets_.erase(current);
    }
    const bool unread = strm.body_left_unread();
    const size_t body_bytes = strm.body_bytes_read();
    strm.end_request();
    // A large body leaves its buffers (and the strings parsed from it) as free heap that
    // glibc keeps; hand it back to the system now, as the request is over.
    if (body_bytes >= kTrimAfterBodyBytes) malloc_trim(0);
    if (!ok || closed || strm.tripped() || unread) {
      if (unread) linger = true;
      break;
    }
  }
  if (strm.tripped() || linger) {
    linger_close(sock, kLingerMs);
  } else {
    shutdown(sock, SHUT_RDWR);
    close(sock);
  }
}

bool GuardedHttpServer::client_connected(const httplib::Request& req) const {
  socket_t sock = INVALID_SOCKET;
  {
    std::lock_guard<std::mutex> lock(sockets_mu_);
    const auto it = sockets_.find(&req);
    if (it == sockets_.end()) return true;  // not a request of ours: nothing to tell
    sock = it->second;
  }
  pollfd p{sock, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return true;  // nothing happened on the socket
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return false;
  char c;
  // Readable: either the next pipelined request (still connected) or end of stream.
  return ::recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

}  // namespace ws::server
