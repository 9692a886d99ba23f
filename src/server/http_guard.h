// The connection layer under cpp-httplib's request parsing, so that no client can starve
// the others or make the server buffer more than configured. cpp-httplib 0.11 (Debian 12)
// restarts its read timeout with every byte (a client sending one byte now and then holds
// a thread forever), serves connections from a fixed pool that idle sockets can fill,
// buffers chunked bodies without limit and ignores conflicting Content-Length headers.
// GuardedHttpServer replaces its per-connection loop: it admits a connection only under
// the caps (in total and per client address), reads each request through a stream with a
// deadline for the head and a stall timeout for the body, bounds the bytes a request may
// send, and answers what it refuses with an OpenAI error object before hanging up.
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/api_error.h"
#include "server/connection_limits.h"

namespace ws::server {

// Threads for connections, started as connections need them (up to `max_threads`) and
// kept for later ones. Each open connection holds one thread for its lifetime, so the cap
// must exceed the connection cap for refusals to be answered while it is reached.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins every thread

 private:
  void work();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

// Open connections by client address, under the caps of ConnectionLimits.
class Admissions {
 public:
  explicit Admissions(const ConnectionLimits& limits) : limits_(limits) {}
  // The refusal to answer, or nullopt when admitted (then leave() must follow).
  std::optional<ApiError> enter(const std::string& address);
  void leave(const std::string& address);

 private:
  const ConnectionLimits& limits_;
  std::mutex mu_;
  int total_ = 0;
  std::map<std::string, int> by_address_;
};

// What the guard decided about requests whose head httplib has read, by request object
// (each lives on its connection's thread until its response is written).
class Refusals {
 public:
  void put(const httplib::Request* req, const ApiError& e);
  std::optional<ApiError> find(const httplib::Request* req) const;
  void erase(const httplib::Request* req);

 private:
  mutable std::mutex mu_;
  std::map<const httplib::Request*, ApiError> by_request_;
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits);

  // The error the guard decided for this request after reading its head (bad framing, a
  // body over the limit, a stalled body), or nullopt. The pre-routing and error handlers
  // answer it, so it goes out as an OpenAI error object and is counted like any response.
  std::optional<ApiError> refusal(const httplib::Request& req) const { return refusals_.find(&req); }

  // After binding: httplib listens with a backlog of 5, so a burst of connections (a
  // flood, or just many clients at once) overflows it and later connections, /health
  // included, wait a second or more for the client's SYN to be resent.
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }

  // False once the client of this request (being handled) has closed or reset its
  // connection: a handler computing a non-streaming answer polls it to stop early, as
  // nginx notices a client abort. A client that half-closes counts as gone.
  bool client_connected(const httplib::Request& req) const;

 private:
  bool process_and_close_socket(socket_t sock) override;
  void serve_connection(socket_t sock);

  ConnectionLimits limits_;
  Admissions admissions_;
  Refusals refusals_;
  mutable std::mutex sockets_mu_;
  std::map<const httplib::Request*, socket_t> sockets_;  // requests being handled -> their connection
};

}  // namespace ws::server
