// The connection layer (server/http_guard) alone, in process, under concurrent clients:
// many keep-alive clients at once, pipelined requests, slowloris connections, oversized
// chunked bodies and clients that leave while their request is handled. Small and without
// a model, so that the sanitizer builds (tests/sanitize.sh: ASan+UBSan and TSan) run it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"
#include "server/http_guard.h"

using namespace std::chrono_literals;
using ws::server::ApiError;
using ws::server::ConnectionLimits;
using ws::server::GuardedHttpServer;
using ws::test::RawClient;

namespace {

// A GuardedHttpServer on a free loopback port with the routes a test needs, wired to
// answer the guard's refusals as the real server does; stopped and joined on destruction.
class GuardedServer {
 public:
  explicit GuardedServer(ConnectionLimits limits) : http_(limits) {
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (const auto refused = http_.refusal(req)) {
        answer(res, *refused);
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (const auto refused = http_.refusal(req)) answer(res, *refused);
    });
    http_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(std::to_string(req.body.size()) + ":" + req.body.substr(0, 16), "text/plain");
    });
    // Waits until its client leaves (or 5 s), as a non-streaming generation polls.
    http_.Post("/wait", [this](const httplib::Request& req, httplib::Response& res) {
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (http_.client_connected(req) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
      if (!http_.client_connected(req)) ++noticed_gone_;
      res.set_content("done", "text/plain");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    http_.widen_backlog();
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (!http_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~GuardedServer() {
    http_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int noticed_gone() const { return noticed_gone_; }

 private:
  static void answer(httplib::Response& res, const ApiError& e) {
    res.status = e.status();
    res.set_content(e.to_json().dump(), "application/json");
  }

  GuardedHttpServer http_;
  int port_ = 0;
  std::atomic<int> noticed_gone_{0};
  std::thread thread_;
};

std::string echo_request(const std::string& body, bool close = false) {
  return "POST /echo HTTP/1.1\r\nHost: x\r\n" + std::string(close ? "Connection: close\r\n" : "") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

TEST(HttpGuard, ConcurrentKeepAliveClientsAllGetTheirOwnAnswers) {
  ConnectionLimits limits;
  limits.max_connections_per_client = 0;
  GuardedServer srv(limits);
  // httplib serves at most 5 requests per connection (keep_alive_max_count): 4 per
  // connection, two connections per client.
  constexpr int kClients = 12, kConnections = 2, kRequests = 4;
  std::atomic<int> right{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      for (int k = 0; k < kConnections; ++k) {
        RawClient conn(srv.port());
        for (int r = 0; r < kRequests; ++r) {
          const std::string body = "client" + std::to_string(c) + "-" + std::to_string(k) + "-" + std::to_string(r);
          if (!conn.send_all(echo_request(body))) break;
          const std::string want = std::to_string(body.size()) + ":" + body;
          if (conn.read_until(want, 10s).find(want) != std::string::npos) ++right;
        }
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(right.load(), kClients * kConnections * kRequests);
}

TEST(HttpGuard, PipelinedRequestsAreAnsweredInOrder) {
  GuardedServer srv(ConnectionLimits{});
  RawClient conn(srv.port());
  conn.send_all(echo_request("first") + echo_request("second") + echo_request("third", /*close=*/true));
  const std::string got = conn.read_until("", 10s);
  const size_t a = got.find("5:first"), b = got.find("6:second"), c = got.find("5:third");
  ASSERT_NE(a, std::string::npos) << got;
  ASSERT_NE(b, std::string::npos) << got;
  ASSERT_NE(c, std::string::npos) << got;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(HttpGuard, SlowClientsAreCutOffWhileOthersAreServed) {
  ConnectionLimits limits;
  limits.read_timeout_s = 1;
  limits.max_connections = 64;
  limits.max_connections_per_client = 0;
  GuardedServer srv(limits);
  std::vector<RawClient> slow;
  for (int i = 0; i < 40; ++i) {
    slow.emplace_back(srv.port());
    slow.back().send_all("POST /echo HTTP/1.1\r\nHo");
  }
  // Served meanwhile, on connections of its own.
  for (int i = 0; i < 5; ++i) {
    RawClient c(srv.port());
    c.send_all(echo_request("ok", true));
    EXPECT_NE(c.read_until("2:ok", 5s).find("2:ok"), std::string::npos);
  }
  // Each slow head passes its deadline: the server closes the connection (EOF, maybe after a 408).
  int closed = 0;
  for (auto& s : slow) {
    s.read_until("", 5s);
    closed += !s.send_all("st: x\r\n\r\n") || s.read_until("", 1s).empty();
  }
  EXPECT_EQ(closed, int(slow.size()));
}

TEST(HttpGuard, OversizedChunkedBodyIs413) {
  ConnectionLimits limits;
  limits.max_body_bytes = 64 << 10;
  GuardedServer srv(limits);
  RawClient c(srv.port());
  c.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "4000\r\n" + std::string(0x4000, 'z') + "\r\n";
  for (int i = 0; i < 16 && c.send_all(chunk, /*answered_stops=*/true); ++i) {
  }
  EXPECT_EQ(ws::test::http_status(c.read_until("\r\n\r\n", 5s)), 413);
}

TEST(HttpGuard, HandlerSeesItsClientLeave) {
  GuardedServer srv(ConnectionLimits{});
  std::vector<RawClient> leaving;
  for (int i = 0; i < 4; ++i) {
    leaving.emplace_back(srv.port());
    leaving.back().send_all("POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  }
  std::this_thread::sleep_for(100ms);
  for (auto& c : leaving) c.reset();
  for (int i = 0; i < 200 && srv.noticed_gone() < 4; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(srv.noticed_gone(), 4);
}
