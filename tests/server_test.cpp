// `warmstart serve` end to end: the real binary on a free loopback port, driven with curl
// (and a raw socket where a client must vanish mid-stream) on a hybrid fixture model, and
// with images (--mmproj) on a vision fixture pair.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include "chat/chat_prompt.h"
#include "engine/prompt.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "server/media_turn.h"
#include "tokenizer/tokenizer.h"
#include "engine/media_prompt.h"
#include "vision/context.h"
#include "not_supported.h"
#include "server_client.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

extern char** environ;

namespace {

using namespace ws::test;


// A raw client that sends a streaming request and reads `events` SSE events, then is
// closed by the caller (the way a browser tab or a killed client vanishes).
class RawStream {
 public:
  RawStream(int port, const json& body, int events) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    const std::string b = body.dump();
    const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
    send(fd_, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[4096];
    size_t seen = 0;
    while (seen < size_t(events)) {
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, size_t(n));
      seen = 0;
      for (size_t p = received_.find("data: "); p != std::string::npos; p = received_.find("data: ", p + 1)) ++seen;
    }
  }
  ~RawStream() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  std::string received_;
};

class ServerTest : public SharedServerTest<ServerTest> {};

TEST_F(ServerTest, HealthAndModels) {
  const HttpResult h = curl(port(), "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.j(), json({{"status", "ok"}}));
  const HttpResult m = curl(port(), "/v1/models");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.j()["object"], "list");
  ASSERT_EQ(m.j()["data"].size(), 1u);
  EXPECT_EQ(m.j()["data"][0]["id"], hybrid_model().filename().string());
}

TEST_F(ServerTest, NonStreamingAndStreamingChatAgree) {
  const json msgs = {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Say hi."}}};
  const HttpResult r = curl(port(), "/v1/chat/completions", chat_body(msgs, 12).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "anything");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string text = j["choices"][0]["message"]["content"];
  const json usage = j["usage"];
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(usage["total_tokens"], usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  EXPECT_TRUE(usage["prompt_tokens_details"].contains("cached_tokens"));
  for (const char* k : {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "cache_n"})
    EXPECT_TRUE(j["timings"].contains(k)) << k;

  const HttpResult s = curl(port(), "/v1/chat/completions", chat_body(msgs, 12, true).dump());
  ASSERT_EQ(s.status, 200) << s.body;
  bool done = false;
  const auto ev = sse_events(s.body, &done);
  EXPECT_TRUE(done) << "no data: [DONE]";
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", nullptr}}));
  std::string streamed;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(ev[i]["id"], ev[0]["id"]);
    EXPECT_TRUE(ev[i].contains("created") && ev[i].contains("model"));
    if (i + 2 < ev.size()) {
      EXPECT_TRUE(ev[i]["choices"][0]["finish_reason"].is_null());
      if (i > 0) streamed += ev[i]["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  const json& fin = ev[ev.size() - 2];
  EXPECT_EQ(fin["choices"][0]["finish_reason"], j["choices"][0]["finish_reason"]);
  EXPECT_EQ(fin["choices"][0]["delta"], json::object());
  const json& last = ev.back();
  EXPECT_EQ(last["choices"], json::array());
  EXPECT_EQ(last["usage"]["completion_tokens"], usage["completion_tokens"]);
  EXPECT_EQ(streamed, text) << "greedy streaming and non-streaming answers differ";
}

TEST_F(ServerTest, FiveTurnConversationReusesTheCache) {
  json msgs = {{{"role", "system"}, {"content", "You are a helpful assistant who answers briefly."}}};
  for (int turn = 1; turn <= 5; ++turn) {
    msgs.push_back({{"role", "user"}, {"content", "Question number " + std::to_string(turn) + ": tell me more."}});
    const HttpResult r = curl(port(), "/v1/chat/completions", chat_body(msgs, 8).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.j();
    const int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
    const int prompt = j["usage"]["prompt_tokens"];
    EXPECT_EQ(j["timings"]["cache_n"], cached);
    EXPECT_EQ(j["timings"]["prompt_n"], prompt - cached);
    // Restoring and checkpointing are parts of prompt_ms; every turn snapshots its
    // frontier after the first token (part of predicted_ms).
    const double restore_ms = j["timings"]["restore_ms"], checkpoint_ms = j["timings"]["checkpoint_ms"];
    EXPECT_GT(j["timings"]["frontier_ms"].get<double>(), 0.0) << "turn " << turn;
    EXPECT_LE(j["timings"]["frontier_ms"].get<double>(), j["timings"]["predicted_ms"].get<double>()) << "turn " << turn;
    EXPECT_LE(restore_ms + checkpoint_ms, j["timings"]["prompt_ms"].get<double>()) << "turn " << turn;
    if (turn == 1) {
      EXPECT_EQ(restore_ms, 0.0) << "nothing to restore on the first turn";
    } else {
      EXPECT_GT(cached, 0) << "turn " << turn;
      EXPECT_GT(restore_ms, 0.0) << "turn " << turn;
    }
    msgs.push_back({{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
  }
}

TEST_F(ServerTest, StopSequenceSplitAcrossTokensIsNeverEmitted) {
  const json msgs = {{{"role", "user"}, {"content", "Count for me, please."}}};
  bool done = false;
  const auto ev = sse_events(curl(port(), "/v1/chat/completions", chat_body(msgs, 24, true).dump()).body, &done);
  std::vector<std::string> pieces;
  for (size_t i = 1; i + 2 < ev.size(); ++i) pieces.push_back(ev[i]["choices"][0]["delta"]["content"]);
  // A stop string made of the last byte of one delta and the first of the next one.
  size_t k = 1;
  while (k + 1 < pieces.size() && (pieces[k].empty() || pieces[k + 1].empty() || uint8_t(pieces[k].back()) >= 0x80 ||
                                   uint8_t(pieces[k + 1][0]) >= 0x80))
    ++k;
  ASSERT_LT(k + 1, pieces.size()) << "the reply has no two ASCII-bounded deltas to build a stop string from";
  std::string full;
  for (const auto& p : pieces) full += p;
  const std::string stop = std::string(1, pieces[k].back()) + pieces[k + 1][0];
  const std::string expected = full.substr(0, full.find(stop));
  json body = chat_body(msgs, 24);
  body["stop"] = json::array({"never-appears", stop});
  const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "stop");
  body["stream"] = true;
  std::string streamed;
  for (const auto& e : sse_events(curl(port(), "/v1/chat/completions", body.dump()).body, &done))
    if (!e["choices"].empty()) streamed += delta_text(e["choices"][0]);
  EXPECT_EQ(streamed, expected);
}

TEST_F(ServerTest, TextCompletions) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}};
  const HttpResult r = curl(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["object"], "text_completion");
  EXPECT_TRUE(r.j()["choices"][0]["text"].is_string());
  EXPECT_EQ(r.j()["usage"]["completion_tokens"].get<int>() <= 6, true);
}

TEST_F(ServerTest, ErrorsUseOpenAiErrorObjects) {
  auto expect_error = [&](const std::string& body, int status, const std::string& param) {
    const HttpResult r = curl(port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, status) << body << " -> " << r.body;
    const json j = r.j();
    ASSERT_TRUE(j.contains("error")) << r.body;
    for (const char* k : {"message", "type", "param", "code"}) { EXPECT_TRUE(j["error"].contains(k)) << k; }
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r.body;
    }
  };
  const json ok = chat_body({{{"role", "user"}, {"content", "hi"}}}, 4);
  expect_error("{\"messages\": [", 400, "");
  expect_error("[1, 2]", 400, "");
  expect_error(R"({"messages": "hi"})", 400, "messages");
  json b = ok;
  b["temperature"] = "hot";
  expect_error(b.dump(), 400, "temperature");
  b = ok, b["max_tokens"] = 2.5;
  expect_error(b.dump(), 400, "max_tokens");
  b = ok, b["stream"] = "yes";
  expect_error(b.dump(), 400, "stream");
  b = ok, b["stop"] = 7;
  expect_error(b.dump(), 400, "stop");
  b = ok, b["n"] = 0;
  expect_error(b.dump(), 400, "n");
  b = ok, b["prompt_cache_key"] = 42;
  expect_error(b.dump(), 400, "prompt_cache_key");
  b = ok, b["prompt_cache_key"] = "conversation-7";  // OpenAI's routing hint is accepted
  EXPECT_EQ(curl(port(), "/v1/chat/completions", b.dump()).status, 200);
  const HttpResult nf = curl(port(), "/v1/nothing");
  EXPECT_EQ(nf.status, 404);
  EXPECT_TRUE(nf.j().contains("error"));
}

TEST_F(ServerTest, MetricsExposeRequestsTokensCacheAndTtft) {
  curl(port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "metrics"}}}, 4).dump());
  const HttpResult m = curl(port(), "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("warmstart_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}"),
            std::string::npos);
  for (const char* name : {"warmstart_prompt_tokens_total", "warmstart_computed_tokens_total",
                           "warmstart_reused_tokens_total", "warmstart_cache_bytes", "warmstart_cache_evictions_total",
                           "warmstart_ttft_seconds_count", "warmstart_slots_busy"})
    EXPECT_GE(metric(m.body, name), 0) << name << " missing";
  EXPECT_GT(metric(m.body, "warmstart_prompt_tokens_total"), 0);
  EXPECT_GT(metric(m.body, "warmstart_cache_bytes"), 0);
  EXPECT_NE(m.body.find("warmstart_ttft_seconds_bucket{le=\"+Inf\"}"), std::string::npos);
  // The batching loop ran the turn's passes: its prompt rows and the tokens fed back.
  EXPECT_GT(metric(m.body, "warmstart_step_rows_count"), 0);
  EXPECT_GT(metric(m.body, "warmstart_step_rows_total{kind=\"prompt\"}"), 0);
  for (const char* name : {"warmstart_step_last_rows", "warmstart_step_busy_seconds_total", "warmstart_step_waiting",
                           "warmstart_decode_tokens_per_second"})
    EXPECT_GE(metric(m.body, name), 0) << name << " missing";
}

// Without streaming nothing is written until the end, so the server must notice the
// closed socket itself: generation stops early and the slot is freed.
TEST_F(ServerTest, ClientDisconnectWithoutStreamingStopsTheWork) {
  const std::string before = curl(port(), "/metrics").body;
  const int max_tokens = 3500;
  {
    RawStream client(port(), chat_body({{{"role", "user"}, {"content", "Write a very long story."}}}, max_tokens, false),
                     0);
    for (int i = 0; i < 200 && metric(curl(port(), "/metrics").body, "warmstart_slots_busy") == 0; ++i)
      std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(100ms);  // a few tokens into the reply
  }  // the client vanishes here
  std::string after;
  for (int i = 0; i < 200; ++i) {
    after = curl(port(), "/metrics").body;
    if (metric(after, "warmstart_slots_busy") == 0 && metric(after, "warmstart_client_disconnects_total") >
                                                          metric(before, "warmstart_client_disconnects_total"))
      break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(metric(after, "warmstart_slots_busy"), 0);
  EXPECT_EQ(metric(after, "warmstart_client_disconnects_total"), metric(before, "warmstart_client_disconnects_total") + 1);
  EXPECT_LT(metric(after, "warmstart_generated_tokens_total") - metric(before, "warmstart_generated_tokens_total"),
            max_tokens)
      << "generation ran to the end although the client was gone";
  EXPECT_EQ(curl(port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "still there?"}}}, 4).dump()).status,
            200);
}

TEST_F(ServerTest, ClientDisconnectMidStreamFreesTheSlot) {
  const std::string before = curl(port(), "/metrics").body;
  const int max_tokens = 3500;
  {
    RawStream client(port(), chat_body({{{"role", "user"}, {"content", "Write a very long story."}}}, max_tokens, true),
                     4);
    ASSERT_EQ(client.received().find("[DONE]"), std::string::npos) << "the reply ended before the disconnect";
    ASSERT_NE(client.received().find("chat.completion.chunk"), std::string::npos) << client.received();
  }  // the client vanishes here
  std::string after;
  for (int i = 0; i < 100; ++i) {
    after = curl(port(), "/metrics").body;
    if (metric(after, "warmstart_slots_busy") == 0 && metric(after, "warmstart_client_disconnects_total") > 0) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(metric(after, "warmstart_slots_busy"), 0);
  EXPECT_EQ(metric(after, "warmstart_client_disconnects_total"), metric(before, "warmstart_client_disconnects_total") + 1);
  EXPECT_LT(metric(after, "warmstart_generated_tokens_total") - metric(before, "warmstart_generated_tokens_total"),
            max_tokens)
      << "generation ran to the end although the client was gone";
  EXPECT_EQ(curl(port(), "/health").status, 200);
  EXPECT_EQ(curl(port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "still there?"}}}, 4).dump()).status,
            200);
}

// ---- Hostile and careless clients: no crash, no starvation, 4xx for client errors ----

// A TCP connection to the server from `source`, a loopback address: each address is
// another client for the per-address connection cap. -1 when it cannot be made.
int connect_from(int port, const char* source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(uint16_t(port));
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0 &&
      connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) == 0)
    return fd;
  if (fd >= 0) close(fd);
  return -1;
}

bool can_bind(const char* address) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  inet_pton(AF_INET, address, &local.sin_addr);
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

// Sends all of `data`; false at the first error (the server may hang up early).
bool send_all(int fd, const std::string& data) {
  for (size_t off = 0; off < data.size();) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// What the server sends until it closes the connection or `deadline` passes; `closed`
// tells which.
std::string read_until_closed(int fd, std::chrono::steady_clock::time_point deadline, bool* closed = nullptr) {
  std::string out;
  char buf[16384];
  if (closed) *closed = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, int(left.count())) <= 0) return out;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return out;
    }
    out.append(buf, size_t(n));
  }
}

// One raw exchange: the request bytes as given, the response until the server closes.
std::string exchange(int port, const std::string& request, const char* source = "127.0.0.1") {
  const int fd = connect_from(port, source);
  if (fd < 0) return "";
  send_all(fd, request);
  const std::string response = read_until_closed(fd, std::chrono::steady_clock::now() + 20s);
  close(fd);
  return response;
}

int status_of(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(response.c_str() + 9) : 0;
}

json body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? json() : json::parse(response.substr(at + 4), nullptr, false);
}

std::string chat_head(const std::string& framing) {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n" +
         framing + "\r\n";
}

void expect_error_object(const json& j, const std::string& context) {
  ASSERT_TRUE(j.is_object() && j.contains("error")) << context;
  for (const char* k : {"message", "type", "param", "code"}) { EXPECT_TRUE(j["error"].contains(k)) << k << ": " << context; }
}

TEST_F(ServerTest, DeeplyNestedJsonIs400AndTheServerStaysUp) {
  const std::string ok = chat_body({{{"role", "user"}, {"content", "Name three colors."}}}, 8).dump();
  const HttpResult before = curl(port(), "/v1/chat/completions", ok);
  ASSERT_EQ(before.status, 200) << before.body;
  // 80,000 levels (160 KB) followed by another key overflowed the parser's stack; 10,000
  // levels inside a message were a 500.
  const std::string deep = R"({"messages":)" + std::string(80000, '[') + std::string(80000, ']') + R"(,"x":1})";
  const std::string in_message =
      R"({"messages":[{"role":"user","content":)" + std::string(10000, '[') + std::string(10000, ']') + "}]}";
  const std::string in_prompt = R"({"prompt":)" + std::string(10000, '{') + "}";
  for (const auto& [path, body] : {std::pair{"/v1/chat/completions", &deep},
                                   std::pair{"/v1/chat/completions", &in_message},
                                   std::pair{"/v1/completions", &in_prompt}}) {
    const HttpResult r = curl(port(), path, *body);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 300);
    expect_error_object(r.j(), r.body);
    EXPECT_NE(r.body.find("nesting deeper than 64 levels"), std::string::npos) << r.body;
  }
  // Brackets inside strings are text, escaped quotes included.
  const json text = chat_body({{{"role", "user"}, {"content", "\"" + std::string(200, '[') + "\\"}}}, 1);
  EXPECT_EQ(curl(port(), "/v1/chat/completions", text.dump()).status, 200);
  EXPECT_EQ(curl(port(), "/health").status, 200);
  const HttpResult after = curl(port(), "/v1/chat/completions", ok);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.j()["choices"][0]["message"]["content"], before.j()["choices"][0]["message"]["content"]);
}

TEST_F(ServerTest, MalformedRequestsAre4xxWithErrorObjects) {
  auto expect_status = [](const HttpResult& r, int status, const std::string& param, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << " -> " << r.body;
    expect_error_object(r.j(), what + " -> " + r.body);
    if (!param.empty() && r.j().contains("error")) {
      EXPECT_EQ(r.j()["error"]["param"], param) << what;
    }
  };
  const std::string user = R"({"role":"user","content":"hi"})";
  const std::vector<std::tuple<std::string, std::string>> cases = {
      {R"({"messages":[)" + user + R"(],"temperature":1e400})", ""},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":null}]})", "messages[0].content"},
      {R"({"messages":[{"role":"assistant","tool_calls":5},)" + user + "]}", "messages[0].tool_calls"},
      {R"({"messages":[{"role":"assistant","content":"x","tool_calls":[{"function":7}]},)" + user + "]}",
       "messages[0].tool_calls[0].function"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"arguments":"{}"}}]},)" + user +
           "]}",
       "messages[0].tool_calls[0].function.name"},
      {R"({"messages":[)" + user + R"(],"tools":[{"type":"function","function":{"name":5}}]})", "tools[0].function.name"},
      {R"({"messages":[{"role":"user","content":"hi","name":["x"]}]})", "messages[0].name"},
  };
  for (const auto& [body, param] : cases) expect_status(curl(port(), "/v1/chat/completions", body), 400, param, body);

  // Framing the server cannot trust, on raw sockets (curl would not send it).
  const std::string b = chat_body({{{"role", "user"}, {"content", "hi"}}}, 2).dump();
  const std::string len = std::to_string(b.size());
  const std::vector<std::tuple<std::string, std::string, int>> raw = {
      {"Content-Length: " + len + "\r\nContent-Length: 5\r\n", b, 400},
      {"Transfer-Encoding: chunked\r\nContent-Length: " + len + "\r\n", b, 400},
      {"Transfer-Encoding: gzip\r\n", b, 501},
      {"Content-Length: 300000000\r\n", "", 413},  // refused before any of the body is read
      {"", "", 400},                               // no framing: an empty body, not a hang
  };
  for (const auto& [framing, body, status] : raw) {
    const std::string r = exchange(port(), chat_head(framing) + body);
    EXPECT_EQ(status_of(r), status) << framing << " -> " << r;
    expect_error_object(body_of(r), framing + " -> " + r);
  }
  // The same Content-Length twice is one length.
  const std::string twice = "Content-Length: " + len + "\r\nContent-Length: " + len + "\r\n";
  EXPECT_EQ(status_of(exchange(port(), chat_head(twice) + b)), 200);
  // Pipelined requests are all answered, in order.
  const std::string pipelined = exchange(port(),
                                         "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                                         "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n"
                                         "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::vector<int> statuses;
  for (size_t at = pipelined.find("HTTP/1.1 "); at != std::string::npos; at = pipelined.find("HTTP/1.1 ", at + 1))
    statuses.push_back(std::atoi(pipelined.c_str() + at + 9));
  EXPECT_EQ(statuses, std::vector<int>({200, 404, 200})) << pipelined;
  EXPECT_EQ(curl(port(), "/health").status, 200);
}

TEST_F(ServerTest, ASecondServerOnTheSamePortFailsToStart) {
  const fs::path out = fs::temp_directory_path() / ("ws-port-" + std::to_string(getpid()) + ".txt");
  // `timeout`: were the port shared, the second server would serve until killed.
  const std::string cmd = "timeout 60 " + std::string(WS_BINARY) + " serve -t 1 -m " + hybrid_model().string() +
                          " --port " + std::to_string(port()) + " > " + out.string() + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(slurp(out).find("Address already in use"), std::string::npos) << slurp(out);
  fs::remove(out);
  EXPECT_EQ(curl(port(), "/health").status, 200);
}

// Slowloris: clients that open connections, send a byte and wait. They must not delay
// anyone else, and the server hangs up on them after the read timeout.
TEST(ServerLimits, SlowClientsCannotStarveOthers) {
  using Clock = std::chrono::steady_clock;
  // Other loopback addresses are other clients for the per-address cap; where they cannot
  // be bound, every connection comes from 127.0.0.1 and the per-address cap is off.
  const bool other_addresses = can_bind("127.0.0.2") && can_bind("127.0.0.3");
  constexpr int kReadTimeout = 2, kPerClient = 40, kSlow = 60;
  ServerProcess srv({"-t", "1", "--read-timeout", std::to_string(kReadTimeout), "--max-body-mb", "1",
                     "--max-connections-per-client", other_addresses ? std::to_string(kPerClient) : "0"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  auto health_ms = [&] {
    const auto t0 = Clock::now();
    const std::string r = exchange(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(status_of(r), 200) << r;
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  const double idle_ms = health_ms();

  std::vector<int> slow;
  const auto opened = Clock::now();
  for (int i = 0; i < kSlow; ++i) {
    const int fd = connect_from(srv.port(), !other_addresses ? "127.0.0.1" : i < kPerClient ? "127.0.0.2" : "127.0.0.3");
    ASSERT_GE(fd, 0) << "connection " << i;
    send_all(fd, "P");
    slow.push_back(fd);
  }
  // Each connection is admitted on its own thread, in the order the threads run: let them
  // all run before the next connection from the same address, which must be the refused one.
  std::this_thread::sleep_for(500ms);
  if (other_addresses) {  // one more from the full address is refused at once
    const std::string refused = exchange(srv.port(), "", "127.0.0.2");
    EXPECT_EQ(status_of(refused), 429) << refused;
    EXPECT_EQ(body_of(refused)["error"]["code"], "too_many_connections") << refused;
  }
  double worst_ms = 0;
  for (int i = 0; i < 5; ++i) worst_ms = std::max(worst_ms, health_ms());
  const std::string hi = chat_body({{{"role", "user"}, {"content", "hi"}}}, 4).dump();
  const HttpResult chat = curl(srv.port(), "/v1/chat/completions", hi);
  EXPECT_EQ(chat.status, 200) << chat.body;
  std::printf("[ info ] /health: %.1f ms idle, at most %.1f ms with %d slow connections held\n", idle_ms, worst_ms, kSlow);
  EXPECT_LT(worst_ms, 1000.0);

  int answered_408 = 0;
  for (int fd : slow) {
    bool closed = false;
    const std::string r = read_until_closed(fd, opened + std::chrono::seconds(kReadTimeout + 3), &closed);
    answered_408 += closed && status_of(r) == 408;
    if (!closed || status_of(r) != 408) ADD_FAILURE() << "slow connection " << (closed ? "closed" : "open") << ": " << r;
    close(fd);
  }
  EXPECT_EQ(answered_408, kSlow) << "slow connections must be answered 408 and closed within the read timeout + 3 s";
  std::printf("[ info ] %d slow connections closed %.1f s after they opened (--read-timeout %d)\n", answered_408,
              std::chrono::duration<double>(Clock::now() - opened).count(), kReadTimeout);

  // A chunked body is held to the body limit too: 413 once 1 MiB has come, not buffered.
  const int fd = connect_from(srv.port());
  ASSERT_GE(fd, 0);
  send_all(fd, chat_head("Transfer-Encoding: chunked\r\n"));
  const std::string chunk = "10000\r\n" + std::string(65536, ' ') + "\r\n";
  for (int i = 0; i < 32 && send_all(fd, chunk); ++i) {
  }
  const std::string r = read_until_closed(fd, Clock::now() + 20s);
  close(fd);
  EXPECT_EQ(status_of(r), 413) << r.substr(0, 300);
  EXPECT_EQ(body_of(r)["error"]["code"], "request_too_large") << r.substr(0, 300);
  EXPECT_EQ(curl(srv.port(), "/health").status, 200);
}

TEST(ServerLimits, PromptLongerThanTheContextIs400WithTheCounts) {
  ServerProcess srv({"-c", "64", "-t", "1"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  const HttpResult r = curl(srv.port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", long_text}}}, 4).dump());
  EXPECT_EQ(r.status, 400) << r.body;
  const json e = r.j()["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["type"], "exceed_context_size_error");
  EXPECT_EQ(e["n_ctx"], 64);
  EXPECT_GT(e["n_prompt_tokens"].get<int>(), 64) << e;
  EXPECT_NE(e["message"].get<std::string>().find("64 tokens"), std::string::npos) << e;
  EXPECT_EQ(curl(srv.port(), "/v1/completions", json({{"prompt", long_text}}).dump()).status, 400);
}

TEST(ServerLimits, ApiKeyIsRequiredWhenSet) {
  ServerProcess srv({"--api-key", "s3cret", "-t", "1"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const std::string body = chat_body({{{"role", "user"}, {"content", "hi"}}}, 2).dump();
  const HttpResult none = curl(srv.port(), "/v1/chat/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.j()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(none.j()["error"]["type"], "authentication_error");
  EXPECT_EQ(curl(srv.port(), "/v1/chat/completions", body, "-H 'Authorization: Bearer wrong'").status, 401);
  EXPECT_EQ(curl(srv.port(), "/props", "", "-H 'Authorization: Bearer s3cret1'").status, 401);
  EXPECT_EQ(curl(srv.port(), "/v1/chat/completions", body, "-H 'Authorization: Bearer s3cret'").status, 200);
  EXPECT_EQ(curl(srv.port(), "/health").status, 200);
}

TEST(ServerLimits, BusyBeyondTheQueueIs503) {
  ServerProcess srv({"--parallel", "1", "--queue", "0", "-t", "1"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  RawStream holder(srv.port(), chat_body({{{"role", "user"}, {"content", "Write a very long story."}}}, 3500, true), 2);
  ASSERT_EQ(holder.received().find("[DONE]"), std::string::npos);
  const std::string hdr = (fs::temp_directory_path() / ("ws-busy-" + std::to_string(getpid()))).string();
  const HttpResult r =
      curl(srv.port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "hi"}}}, 2).dump(), "-D " + hdr);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.j()["error"]["code"], "server_busy");
  EXPECT_NE(slurp(hdr).find("Retry-After: 1"), std::string::npos) << slurp(hdr);
  fs::remove(hdr);
  holder.close();
  HttpResult again;
  for (int i = 0; i < 100 && again.status != 200; ++i) {
    again = curl(srv.port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "hi"}}}, 2).dump());
    if (again.status != 200) std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(again.status, 200) << "the slot was not freed after the client left";
}

// A request waiting in line whose client hangs up leaves the line (and is never run).
TEST(ServerLimits, ClientLeavingTheQueueGivesItsPlaceBack) {
  ServerProcess srv({"--parallel", "1", "--queue", "4", "-t", "1"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  RawStream holder(srv.port(), chat_body({{{"role", "user"}, {"content", "Write a very long story."}}}, 3500, true), 2);
  ASSERT_EQ(holder.received().find("[DONE]"), std::string::npos);
  {
    RawStream waiter(srv.port(), chat_body({{{"role", "user"}, {"content", "queued"}}}, 4, false), 0);
    double waiting = 0;
    for (int i = 0; i < 200 && waiting == 0; ++i) {
      waiting = metric(curl(srv.port(), "/metrics").body, "warmstart_queue_waiting");
      if (waiting == 0) std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(waiting, 1);
  }  // the waiting client vanishes here
  std::string after;
  for (int i = 0; i < 100; ++i) {
    after = curl(srv.port(), "/metrics").body;
    if (metric(after, "warmstart_queue_waiting") == 0) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(metric(after, "warmstart_queue_waiting"), 0) << "the gone client still holds its place in line";
  EXPECT_EQ(metric(after, "warmstart_slots_busy"), 1) << "the holder's turn should still run";
  EXPECT_NE(after.find("status=\"499\""), std::string::npos) << after;
}

TEST(ServerLimits, ChatTemplateFileAndTemplateErrors) {
  const fs::path dir = fs::temp_directory_path() / ("ws-tmpl-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // Only the contents, no role markers: a prompt much shorter than the model's ChatML one.
  std::ofstream(dir / "plain.jinja") << "{% if messages[0].role == 'system' %}{{ raise_exception('no system "
                                        "messages, please') }}{% endif %}{% for m in messages %}{{ m.content }}"
                                        "{{ m.missing.attribute }}{% endfor %}";
  std::ofstream(dir / "broken.jinja") << "{% for m in messages %}{{ m.content }";
  {
    ServerProcess srv({"--chat-template", (dir / "plain.jinja").string(), "-t", "1"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    const HttpResult raised = curl(srv.port(), "/v1/chat/completions",
                                   chat_body({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}}, 2).dump());
    EXPECT_EQ(raised.status, 400) << raised.body;
    EXPECT_NE(raised.j()["error"]["message"].get<std::string>().find("no system messages, please"), std::string::npos);
    // The template dereferences an attribute of undefined: a runtime error, reported, not a crash.
    const HttpResult failed = curl(srv.port(), "/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "u"}}}, 2).dump());
    EXPECT_TRUE(failed.status == 400 || failed.status == 500) << failed.body;
    EXPECT_TRUE(failed.j().contains("error")) << failed.body;
    EXPECT_EQ(curl(srv.port(), "/health").status, 200);
  }
  // A template that does not parse: the server refuses to start, naming the problem.
  const std::string cmd = std::string(WS_BINARY) + " serve -m " + hybrid_model().string() + " --port 0 --chat-template " +
                          (dir / "broken.jinja").string() + " > " + (dir / "err.txt").string() + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(slurp(dir / "err.txt").find("error"), std::string::npos) << slurp(dir / "err.txt");
  fs::remove_all(dir);
}

// A conversation of `turns` greedy turns; returns the replies.
std::vector<std::string> converse(int port, int conv, int turns, std::vector<int>* cached = nullptr) {
  json msgs = {{{"role", "system"}, {"content", "You are a concise assistant. Answer every question in one line."}}};
  std::vector<std::string> replies;
  for (int t = 1; t <= turns; ++t) {
    msgs.push_back({{"role", "user"}, {"content", "Conversation " + std::to_string(conv) + ", question " +
                                                      std::to_string(t) + ": what comes next?"}});
    const HttpResult r = curl(port, "/v1/chat/completions", chat_body(msgs, 12).dump());
    if (r.status != 200) {
      ADD_FAILURE() << "conversation " << conv << " turn " << t << ": " << r.status << " " << r.body;
      return replies;
    }
    const json j = r.j();
    replies.push_back(j["choices"][0]["message"]["content"]);
    if (cached) cached->push_back(j["usage"]["prompt_tokens_details"]["cached_tokens"]);
    msgs.push_back({{"role", "assistant"}, {"content", replies.back()}});
  }
  return replies;
}

// Templates with thinking blocks drop them from the history: the second turn diverges right
// after the first user message, a few tokens before the first turn's frontier. The end of
// that message must be a checkpoint (it was dropped as too close to the frontier, and a
// model with recurrent layers recomputed the whole first turn), and the reply must be the
// one a server without a cache gives.
TEST(ServerReuse, ThinkingTemplateSecondTurnReusesThroughTheLastMessage) {
  const json first = json::array({{{"role", "user"}, {"content", "Tell me about lighthouses."}}});
  int tried = 0;
  for (const auto& e : fs::directory_iterator(kSharedDir / "fixtures" / "templates")) {
    if (e.path().extension() != ".jinja" || slurp(e.path()).find("<think>") == std::string::npos) continue;
    ServerProcess srv(std::vector<std::string>{"-t", "2", "--chat-template-file", e.path().string()});
    ASSERT_GT(srv.port(), 0) << srv.log();
    const HttpResult r1 = curl(srv.port(), "/v1/chat/completions", chat_body(first, 6).dump());
    ASSERT_EQ(r1.status, 200) << e.path() << r1.body;
    json second = first;
    second.push_back(r1.j()["choices"][0]["message"]);
    second.push_back({{"role", "user"}, {"content", "And the tallest one?"}});
    // Only templates whose history re-renders the generation prompt differently test this.
    const std::string p1 = curl(srv.port(), "/apply-template", json({{"messages", first}}).dump()).j()["prompt"];
    const std::string p2 = curl(srv.port(), "/apply-template", json({{"messages", second}}).dump()).j()["prompt"];
    if (p2.starts_with(p1)) continue;
    ++tried;
    const json warm = curl(srv.port(), "/v1/chat/completions", chat_body(second, 6).dump()).j();
    ServerProcess cold(std::vector<std::string>{"-t", "2", "--chat-template-file", e.path().string(), "--cache-budget-mb", "0"});
    ASSERT_GT(cold.port(), 0) << cold.log();
    const json truth = curl(cold.port(), "/v1/chat/completions", chat_body(second, 6).dump()).j();
    EXPECT_EQ(warm["choices"][0]["message"], truth["choices"][0]["message"]) << e.path();
    EXPECT_GT(warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << e.path() << warm["usage"];
    if (tried == 2) break;  // two templates are enough; each costs three server starts
  }
  EXPECT_GT(tried, 0) << "no fixture template with thinking blocks re-renders its history differently";
}

TEST(ServerConcurrency, ParallelConversationsMatchTheSameConversationsRunAlone) {
  constexpr int kConvs = 4, kTurns = 6, kBudgetMb = 16;
  const std::vector<std::string> args = {"--parallel", "4", "-t", "4", "-c", "2048",
                                         "--cache-budget-mb", std::to_string(kBudgetMb)};
  std::vector<std::vector<std::string>> alone(kConvs), together(kConvs);
  {
    ServerProcess srv(args);
    ASSERT_GT(srv.port(), 0) << srv.log();
    for (int c = 0; c < kConvs; ++c) alone[c] = converse(srv.port(), c, kTurns);
  }
  ServerProcess srv(args);
  ASSERT_GT(srv.port(), 0) << srv.log();
  std::vector<std::vector<int>> cached(kConvs);
  std::vector<std::thread> clients;
  for (int c = 0; c < kConvs; ++c)
    clients.emplace_back([&, c] { together[c] = converse(srv.port(), c, kTurns, &cached[c]); });
  for (auto& t : clients) t.join();
  for (int c = 0; c < kConvs; ++c) {
    ASSERT_EQ(together[c].size(), size_t(kTurns));
    for (int t = 0; t < kTurns; ++t) {
      EXPECT_EQ(together[c][t], alone[c][t]) << "conversation " << c << " turn " << t + 1;
      if (t > 0) {
        EXPECT_GT(cached[c][t], 0) << "conversation " << c << " turn " << t + 1;
      }
    }
  }
  const std::string metrics = curl(srv.port(), "/metrics").body;
  EXPECT_LE(metric(metrics, "warmstart_cache_bytes"), kBudgetMb * 1048576.0);
  // Budget + model + an allowance for the runtime, 4 slots' context state and HTTP threads.
  const double model_mb = double(fs::file_size(hybrid_model())) / 1048576.0;
  const double allowance_mb = 64;
  const double peak_mb = double(srv.peak_rss_kb()) / 1024.0;
  EXPECT_GT(peak_mb, 0);
  EXPECT_LT(peak_mb, kBudgetMb + model_mb + allowance_mb)
      << "peak RSS " << peak_mb << " MiB; budget " << kBudgetMb << ", model " << model_mb;
  std::printf("[ info ] server peak RSS %.1f MiB (budget %d MiB, model %.1f MiB, cache in use %.2f MiB)\n", peak_mb,
              kBudgetMb, model_mb, metric(metrics, "warmstart_cache_bytes") / 1048576.0);
}

// ---- Images (serve --mmproj) ----

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += abc[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | (two ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0);
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += two ? abc[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

const fs::path kShared = WS_SHARED_DIR;
const fs::path kShapesPng = kShared / "fixtures" / "images" / "shapes-256.png";

json png_url(const std::string& png) { return "data:image/png;base64," + base64(png); }

// A user message as OpenAI clients send an image: text, image_url, text.
json image_message(const json& url, const std::string& question) {
  return {{"role", "user"},
          {"content", json::array({{{"type", "text"}, {"text", "Here is a picture:"}},
                                   {{"type", "image_url"}, {"image_url", {{"url", url}}}},
                                   {{"type", "text"}, {"text", question}}})}};
}

// Every vision golden (dense, hybrid, sliding-window pairs).
std::vector<json> vision_goldens() {
  std::vector<json> out;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vision-", 0) != 0 || e.path().extension() != ".json") continue;
    json g = json::parse(slurp(e.path()));
    if (!ws::test::skip_not_supported_pair((kShared / g["model_file"].get<std::string>()).string(),
                                           (kShared / g["mmproj_file"].get<std::string>()).string(), name))
      out.push_back(std::move(g));
  }
  return out;
}

void expect_400(const HttpResult& r, const std::string& needle) {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = r.j();
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

TEST(ServerVision, ImageHistoryIsReusedAndBadImagesAre400) {
  const std::vector<json> goldens = vision_goldens();
  ASSERT_FALSE(goldens.empty()) << "no vision goldens under " << kShared / "fixtures" / "golden";
  const std::string png = slurp(kShapesPng);
  for (const json& g : goldens) {
    SCOPED_TRACE(g["model_file"].get<std::string>());
    // The rows before the image's end: its position under M-RoPE (an image takes fewer
    // positions than rows), so count by token when the golden has it.
    const int boundary = g["layout"].value("media_boundary_token", g["layout"]["media_boundary_pos"].get<int>());
    // The last server reads file:// URLs; the first refuses them.
    const bool local_files = &g == &goldens.back() && goldens.size() > 1;
    std::vector<std::string> args = {"--mmproj", (kShared / g["mmproj_file"].get<std::string>()).string(), "-t", "2",
                                     "-c", "2048", "--cache-budget-mb", "64"};
    if (local_files) args.push_back("--allow-local-files");
    ServerProcess srv(args, kShared / g["model_file"].get<std::string>());
    ASSERT_GT(srv.port(), 0) << srv.log();
    // Turn 1 with the image, then two turns that resend it in the history.
    json msgs = {{{"role", "system"}, {"content", "You are a helpful assistant. Describe pictures briefly and precisely."}},
                 image_message(png_url(png), "Which shapes and colors do you see in it, and where are they?")};
    for (int turn = 1; turn <= 3; ++turn) {
      const HttpResult r = curl(srv.port(), "/v1/chat/completions", chat_body(msgs, 4).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const json j = r.j();
      const int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
      const int prompt = j["usage"]["prompt_tokens"];
      EXPECT_GT(prompt, boundary) << "turn " << turn;
      if (turn > 1) {
        EXPECT_GE(cached, boundary) << "turn " << turn << ": the image was not reused";
      }
      std::printf("[ info ] %s turn %d: prompt %d, cached %d (media boundary %d)\n",
                  g["model_file"].get<std::string>().c_str(), turn, prompt, cached, boundary);
      msgs.push_back({{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
      msgs.push_back({{"role", "user"}, {"content", "And what else, in turn " + std::to_string(turn + 1) + "?"}});
    }
    if (local_files) {
      // The same bytes from a file: the same image, so its cached state is reused.
      msgs[1] = image_message("file://" + kShapesPng.string(), "Which shapes and colors do you see in it, and where are they?");
      const HttpResult r = curl(srv.port(), "/v1/chat/completions", chat_body(msgs, 4).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_GE(r.j()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), boundary);
    }
    if (&g != &goldens.front()) continue;  // bad input: once is enough
    const json q = "What is this?";
    expect_400(curl(srv.port(), "/v1/chat/completions",
                    chat_body(json::array({image_message(png_url(png.substr(0, png.size() / 2)), q)}), 4).dump()),
               "image");
    expect_400(curl(srv.port(), "/v1/chat/completions",
                    chat_body(json::array({image_message("http://example.com/cat.png", q)}), 4).dump()),
               "remote image URLs are not fetched");
    expect_400(curl(srv.port(), "/v1/chat/completions",
                    chat_body(json::array({image_message("file://" + kShapesPng.string(), q)}), 4).dump()),
               "--allow-local-files");
    // The server survives all of them.
    EXPECT_EQ(curl(srv.port(), "/health").status, 200);
  }
}

// Message ends (byte offsets in the rendered text) land on the token positions right after
// each message's closing tokens in the media prompt, on every vision pair's layout.
TEST(ServerVision, MessageEndsMapToTokenPositionsInMediaPrompts) {
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vision-", 0) != 0 || e.path().extension() != ".json") continue;
    SCOPED_TRACE(name);
    const json g = json::parse(slurp(e.path()));
    if (ws::test::skip_not_supported_pair((kShared / g["model_file"].get<std::string>()).string(),
                                          (kShared / g["mmproj_file"].get<std::string>()).string(), name))
      continue;
    const auto lm = ws::gguf::File::open((kShared / g["model_file"].get<std::string>()).string());
    const auto mm = ws::gguf::File::open((kShared / g["mmproj_file"].get<std::string>()).string());
    const auto model = ws::load_model(lm);
    const auto tok = ws::Tokenizer::from_gguf(lm);
    ws::vision::VisionContext vis(mm, 0);
    ws::ThreadPool pool(1);
    const ws::chat::RenderedPrompt text = ws::chat::render_chatml(g["prompt"]["messages"], true);
    const std::string png = slurp(kShared / g["image_file"].get<std::string>());
    const std::vector<std::vector<uint8_t>> images = {std::vector<uint8_t>(png.begin(), png.end())};
    const auto mp = ws::build_media_prompt(*tok, model->config().n_embd, text.text, images, vis, pool);
    const auto ends = ws::media_message_ends(mp, text.message_ends);
    ASSERT_EQ(ends.size(), 2u);  // system, user
    // Before the image: the same position as text-only tokenization gives.
    EXPECT_EQ(ends[0], ws::tokenize_prompt(*tok, text.text, text.message_ends).message_ends[0]);
    EXPECT_GT(ends[1], g["layout"].value("media_boundary_token", g["layout"]["media_boundary_pos"].get<int32_t>()));
    for (int32_t at : ends) {
      ASSERT_GE(at, 2);
      ASSERT_LT(size_t(at), mp.tokens.size());
      EXPECT_EQ(tok->token_to_piece(mp.tokens[size_t(at) - 2], true) + tok->token_to_piece(mp.tokens[size_t(at) - 1], true),
                "<|im_end|>\n");
      EXPECT_EQ(tok->token_to_piece(mp.tokens[size_t(at)], true), "<|im_start|>");
    }
  }
}

TEST_F(ServerTest, ImageWithoutMmprojIs400) {
  const std::string png = slurp(kShapesPng);
  expect_400(curl(port(), "/v1/chat/completions", chat_body(json::array({image_message(png_url(png), "What is this?")}), 4).dump()),
             "--mmproj");
}

// ---- Issue 21: sampling fields (penalties, logit_bias, logprobs, seed, n > 1), the
// utility routes (/tokenize, /detokenize, /apply-template, /props), CORS, X-Api-Key and
// llama-server's flag names.

std::vector<int> tokenize(int port, const std::string& text) {
  const HttpResult r = curl(port, "/tokenize", json({{"content", text}, {"add_special", true}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.j()["tokens"].get<std::vector<int>>();
}

// Log-softmax of the model's logits after `tokens`, from `warmstart logits` (the external
// truth: a separate process, a plain evaluation with no server, cache or sampler).
std::vector<double> reference_logprobs(const std::vector<int>& tokens) {
  const std::string out = (fs::temp_directory_path() / ("ws-lp-" + std::to_string(getpid()))).string();
  std::string list;
  for (int t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  const std::string cmd = std::string(WS_BINARY) + " logits -t 2 --kv-type f16 -m " + hybrid_model().string() + " --tokens " + list +
                          " --out " + out + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json head = json::parse(slurp(out + ".json"));
  const json& probe = head["probes"][0];
  const auto positions = probe["full_logits"]["positions"].get<std::vector<int>>();
  const size_t n_vocab = probe["full_logits"]["shape"][1];
  const std::string raw = slurp(out + ".logits.f32");
  fs::remove(out + ".json");
  fs::remove(out + ".logits.f32");
  const size_t row = size_t(std::find(positions.begin(), positions.end(), int(tokens.size()) - 1) - positions.begin());
  EXPECT_LT(row, positions.size());
  std::vector<float> l(n_vocab);
  std::memcpy(l.data(), raw.data() + row * n_vocab * sizeof(float), n_vocab * sizeof(float));
  double m = -INFINITY, total = 0;
  for (float x : l) m = std::max(m, double(x));
  for (float x : l) total += std::exp(double(x) - m);
  std::vector<double> lp(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) lp[i] = double(l[i]) - m - std::log(total);
  return lp;
}

TEST_F(ServerTest, LogprobsAreLogSoftmaxOfTheModelsLogits) {
  const std::string prompt = "The capital of France is";
  const std::vector<int> toks = tokenize(port(), prompt);
  const std::vector<double> ref = reference_logprobs(toks);
  ASSERT_FALSE(ref.empty());
  std::vector<int> order(ref.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) { return ref[size_t(a)] > ref[size_t(b)]; });

  const json body = {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 5}};
  const HttpResult r = curl(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = r.j()["choices"][0]["logprobs"];
  ASSERT_GE(lp["tokens"].size(), 1u) << r.body;
  // The greedy token is the reference argmax, with the reference log-probability.
  const std::string piece0 = curl(port(), "/detokenize", json({{"tokens", {order[0]}}}).dump()).j()["content"];
  EXPECT_EQ(lp["tokens"][0], piece0);
  EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), ref[size_t(order[0])], 1e-4);
  const json top = lp["top_logprobs"][0];
  EXPECT_EQ(top.size(), 5u);
  double sum = 0;
  for (int k = 0; k < 5; ++k) {
    const std::string piece = curl(port(), "/detokenize", json({{"tokens", {order[size_t(k)]}}}).dump()).j()["content"];
    if (top.contains(piece)) { EXPECT_NEAR(top[piece].get<double>(), ref[size_t(order[size_t(k)])], 1e-4) << piece; }
    sum += std::exp(ref[size_t(order[size_t(k)])]);
  }
  EXPECT_LE(sum, 1.0 + 1e-6);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());

  // Chat: OpenAI's content list, the same streamed, the pieces spelling the reply.
  json cb = chat_body({{{"role", "user"}, {"content", "Name a colour."}}}, 6);
  cb["logprobs"] = true, cb["top_logprobs"] = 3;
  const HttpResult c = curl(port(), "/v1/chat/completions", cb.dump());
  ASSERT_EQ(c.status, 200) << c.body;
  const json content = c.j()["choices"][0]["logprobs"]["content"];
  ASSERT_GE(content.size(), 1u) << c.body;
  std::string spelled;
  for (const json& e : content) {
    spelled += e["token"].get<std::string>();
    std::string from_bytes;
    for (int b : e["bytes"]) from_bytes += char(b);
    EXPECT_EQ(from_bytes, e["token"].get<std::string>());
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]) << "greedy: the chosen token is the most likely";
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
  }
  EXPECT_EQ(spelled, c.j()["choices"][0]["message"]["content"]);
  cb["stream"] = true;
  bool done = false;
  json streamed = json::array();
  for (const json& e : sse_events(curl(port(), "/v1/chat/completions", cb.dump()).body, &done))
    if (!e["choices"].empty() && e["choices"][0]["logprobs"].is_object())
      for (const json& x : e["choices"][0]["logprobs"]["content"]) streamed.push_back(x);
  EXPECT_TRUE(done);
  EXPECT_EQ(streamed, content);
}

TEST_F(ServerTest, NTwoComputesThePromptOnceAndInterleavesStreams) {
  std::string long_text = "Please read this carefully before answering:";
  for (int i = 0; i < 12; ++i) long_text += " item " + std::to_string(i * 7919 % 1000) + ",";
  json body = chat_body({{{"role", "user"}, {"content", long_text}}}, 6);
  body["n"] = 2;
  const double before = metric(curl(port(), "/metrics").body, "warmstart_computed_tokens_total");
  const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const double after = metric(curl(port(), "/metrics").body, "warmstart_computed_tokens_total");
  const json j = r.j();
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][0]["message"], j["choices"][1]["message"]) << "temperature 0: the forks must agree";
  const int prompt = j["usage"]["prompt_tokens"], cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
  const int completion = j["usage"]["completion_tokens"];
  EXPECT_EQ(j["timings"]["prompt_n"], prompt - cached);
  ASSERT_GT(prompt - cached, completion) << "the prompt must outweigh the replies for the count below to tell";
  // Computed: the prompt once, plus the tokens each reply fed back (at most its own).
  EXPECT_GE(after - before, prompt - cached);
  EXPECT_LE(after - before, prompt - cached + completion) << "the prompt was computed more than once";
  // The n=1 answer is the same text.
  body["n"] = 1;
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).j()["choices"][0]["message"], j["choices"][0]["message"]);

  body["n"] = 2, body["stream"] = true, body["stream_options"] = {{"include_usage", true}};
  bool done = false;
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  std::vector<int> order;
  for (const json& e : sse_events(curl(port(), "/v1/chat/completions", body.dump()).body, &done)) {
    for (const json& ch : e["choices"]) {
      const int i = ch["index"];
      if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
        text[i] += delta_text(ch), order.push_back(i);
      if (!ch["finish_reason"].is_null()) finish[i] = ch["finish_reason"];
    }
    if (e.contains("usage") && e["usage"].is_object()) { EXPECT_EQ(e["usage"]["completion_tokens"], completion); }
  }
  EXPECT_TRUE(done);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(text[0], j["choices"][0]["message"]["content"]);
  EXPECT_EQ(text[1], j["choices"][1]["message"]["content"]);
  EXPECT_EQ(finish.size(), 2u);
  // Interleaved: some chunk of choice 1 comes before the last chunk of choice 0.
  if (j["choices"][0]["message"]["content"].get<std::string>().size() > 1) {
    const auto first1 = std::find(order.begin(), order.end(), 1);
    const auto last0 = std::find(order.rbegin(), order.rend(), 0).base();
    EXPECT_LT(first1 - order.begin(), last0 - order.begin());
  }

  // Sampled: a seed reproduces both replies; the two replies draw from different streams.
  json sb = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1.5}, {"top_k", 0}, {"top_p", 1},
             {"min_p", 0}, {"n", 2}, {"seed", 42}};
  const json s1 = curl(port(), "/v1/completions", sb.dump()).j(), s2 = curl(port(), "/v1/completions", sb.dump()).j();
  ASSERT_EQ(s1["choices"].size(), 2u) << s1.dump();
  EXPECT_EQ(s1["choices"], s2["choices"]);
  EXPECT_NE(s1["choices"][0]["text"], s1["choices"][1]["text"]) << "two replies from one seed stream";
  sb["seed"] = 43;
  EXPECT_NE(curl(port(), "/v1/completions", sb.dump()).j()["choices"], s1["choices"]);
}

// First-step candidates (piece, logprob) of a greedy completion, most likely first.
std::vector<std::pair<std::string, double>> first_step(int port, json body) {
  body["logprobs"] = 20, body["max_tokens"] = 1, body["temperature"] = 0;
  const HttpResult r = curl(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  std::vector<std::pair<std::string, double>> out;
  const json top = r.j()["choices"][0]["logprobs"]["top_logprobs"][0];
  for (const auto& [k, v] : top.items()) out.emplace_back(k, v.get<double>());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string first_token(int port, json body) {
  body["logprobs"] = 0, body["max_tokens"] = 1, body["temperature"] = 0;
  const HttpResult r = curl(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.j()["choices"][0]["logprobs"]["tokens"][0];
}

TEST_F(ServerTest, PenaltiesAndLogitBiasMoveTheGreedyChoiceAsDefined) {
  // " one" 29 times in the prompt: in the penalty window (llama-server's rule: the last 64
  // tokens accepted, prompt included).
  std::string prompt = "one";
  for (int i = 0; i < 29; ++i) prompt += " one";
  const json base = {{"prompt", prompt}};
  const std::vector<int> one = curl(port(), "/tokenize", json({{"content", " one"}}).dump()).j()["tokens"];
  ASSERT_EQ(one.size(), 1u);
  const std::vector<int> toks = tokenize(port(), prompt);
  const int count = int(std::count(toks.end() - std::min<ptrdiff_t>(64, ptrdiff_t(toks.size())), toks.end(), one[0]));
  ASSERT_GE(count, 20);
  const auto cands = first_step(port(), base);
  ASSERT_EQ(cands.size(), 20u);
  ASSERT_NE(cands[0].first, " one") << "the crafted case needs another greedy token";
  // The raw logprob of " one" (logprobs ignore the bias that makes it the reply).
  json lifted = base;
  lifted["logit_bias"] = {{std::to_string(one[0]), 100}};
  lifted["logprobs"] = 0, lifted["max_tokens"] = 1, lifted["temperature"] = 0;
  const json lj = curl(port(), "/v1/completions", lifted.dump()).j();
  ASSERT_EQ(lj["choices"][0]["logprobs"]["tokens"][0], " one") << lj.dump();
  const double gap = cands[0].second - lj["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
  ASSERT_GT(gap, 0);
  ASSERT_LT(gap + count + 1, 100);
  auto first = [&](double bias, double presence, double frequency) {
    json b = base;
    b["logit_bias"] = {{std::to_string(one[0]), bias}};
    b["presence_penalty"] = presence, b["frequency_penalty"] = frequency;
    // Logprobs are of the raw logits: neither bias nor penalties move them.
    EXPECT_EQ(first_step(port(), b), cands);
    return first_token(port(), b);
  };
  // The bias lifts " one" 0.5 above the greedy token; the penalty takes back count * f
  // (frequency) or p once (presence), as llama.cpp's penalties sampler defines them.
  EXPECT_EQ(first(gap + 0.5 + count * 1.0, 0, 1.0), " one");
  EXPECT_EQ(first(gap + 0.5 + count * 1.0, 0, 1.0 + 1.0 / count), cands[0].first);
  EXPECT_EQ(first(gap + 0.5 + 1.0, 1.0, 0), " one");
  EXPECT_EQ(first(gap + 0.5 + 1.0, 1.6, 0), cands[0].first);
  EXPECT_EQ(first(gap - 0.5, 0, 0), cands[0].first);
  // Negative values reward repetition: count * 2 nats lift " one" past the gap.
  if (gap < 2.0 * count) { EXPECT_EQ(first(0, 0, -2), " one"); }
  // -100 bans the greedy token: the runner-up wins. llama-server's [[id, bias]] form too.
  const std::vector<int> top = curl(port(), "/tokenize", json({{"content", cands[0].first}}).dump()).j()["tokens"];
  if (top.size() == 1) {
    json b = base;
    b["logit_bias"] = {{std::to_string(top[0]), -100}};
    EXPECT_EQ(first_token(port(), b), cands[1].first);
    b["logit_bias"] = json::array({json::array({top[0], false})});
    EXPECT_EQ(first_token(port(), b), cands[1].first);
  }
}

TEST_F(ServerTest, SamplingFieldsOutOfRangeAre400NamingThem) {
  const json ok = chat_body({{{"role", "user"}, {"content", "hi"}}}, 2);
  auto expect_param = [&](const char* path, json body, const std::string& param) {
    const HttpResult r = curl(port(), path, body.dump());
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    EXPECT_EQ(r.j()["error"]["param"], param) << r.body;
  };
  for (const auto& [k, v] : std::vector<std::pair<std::string, json>>{{"repeat_penalty", 0},
                                                                       {"presence_penalty", 2.5},
                                                                       {"frequency_penalty", -3},
                                                                       {"logit_bias", {{"abc", 1}}},
                                                                       {"logit_bias", {{"1", 101}}},
                                                                       {"logit_bias", {{"99999999", 1}}},
                                                                       {"logit_bias", "x"},
                                                                       {"top_logprobs", 3},
                                                                       {"logprobs", 3},
                                                                       {"n", 17},
                                                                       {"seed", "x"}}) {
    json b = ok;
    b[k] = v;
    expect_param("/v1/chat/completions", b, k == "logit_bias" ? "logit_bias" : k);
  }
  json b = ok;
  b["logprobs"] = true, b["top_logprobs"] = 21;
  expect_param("/v1/chat/completions", b, "top_logprobs");
  const json text = {{"prompt", "hi"}, {"max_tokens", 2}};
  for (const auto& [k, v] : std::vector<std::pair<std::string, json>>{
           {"echo", true}, {"suffix", "x"}, {"best_of", 2}, {"logprobs", 21}, {"logprobs", true}}) {
    json t = text;
    t[k] = v;
    expect_param("/v1/completions", t, k);
  }
}

TEST_F(ServerTest, TokenizeDetokenizeApplyTemplateAndProps) {
  const std::string text = "Hello world, hello again.";
  const HttpResult t = curl(port(), "/tokenize", json({{"content", text}}).dump());
  ASSERT_EQ(t.status, 200) << t.body;
  const std::vector<int> ids = t.j()["tokens"];
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(curl(port(), "/detokenize", json({{"tokens", ids}}).dump()).j()["content"], text);
  const json pieces = curl(port(), "/tokenize", json({{"content", text}, {"with_pieces", true}}).dump()).j()["tokens"];
  ASSERT_EQ(pieces.size(), ids.size());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(pieces[i]["id"], ids[i]);
    joined += pieces[i]["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(curl(port(), "/tokenize", json({{"content", 5}}).dump()).status, 400);
  EXPECT_EQ(curl(port(), "/detokenize", json({{"tokens", {-1}}}).dump()).status, 400);

  // apply-template gives the exact prompt a chat request computes.
  const json msgs = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi there"}}};
  const HttpResult a = curl(port(), "/apply-template", json({{"messages", msgs}}).dump());
  ASSERT_EQ(a.status, 200) << a.body;
  const std::string rendered = a.j()["prompt"];
  EXPECT_NE(rendered.find("Hi there"), std::string::npos);
  const HttpResult c = curl(port(), "/v1/chat/completions", chat_body(msgs, 1).dump());
  EXPECT_EQ(int(tokenize(port(), rendered).size()), c.j()["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(curl(port(), "/apply-template", json({{"messages", "x"}}).dump()).status, 400);

  const HttpResult p = curl(port(), "/props");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.j()["default_generation_settings"]["n_ctx"], 4096);
  EXPECT_EQ(p.j()["total_slots"], 2);
  EXPECT_EQ(p.j()["model_path"], hybrid_model().string());
  EXPECT_NE(p.j()["chat_template"].get<std::string>().find("im_start"), std::string::npos);
  EXPECT_TRUE(p.j()["build_info"].is_string());
}

TEST(ServerLlamaServerFlags, AliasesCorsAndXApiKey) {
  const fs::path tmpl = fs::temp_directory_path() / ("ws-flags-" + std::to_string(getpid()) + ".jinja");
  const std::string tmpl_text = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  std::ofstream(tmpl) << tmpl_text;
  ServerProcess srv({"--ctx-size", "2048", "-np", "3", "--alias", "my-model", "--cache-ram", "32", "--threads", "2",
                     "--api-key", "k3y", "--cors-origin", "https://app.example", "--chat-template-file", tmpl.string()});
  fs::remove(tmpl);
  ASSERT_GT(srv.port(), 0) << srv.log();
  const HttpResult applied = curl(srv.port(), "/apply-template",
                                  json({{"messages", {{{"role", "user"}, {"content", "hey"}}}}}).dump(),
                                  "-H 'X-Api-Key: k3y'");
  EXPECT_EQ(applied.j()["prompt"], "[user] hey\n") << applied.body;
  const std::string hdr = (fs::temp_directory_path() / ("ws-hdr-" + std::to_string(getpid()))).string();
  const HttpResult pre = curl(srv.port(), "/v1/chat/completions", "",
                              "-X OPTIONS -D " + hdr + " -H 'Origin: https://app.example' "
                              "-H 'Access-Control-Request-Method: POST'");
  EXPECT_EQ(pre.status, 204);
  std::string h = slurp(hdr);
  EXPECT_NE(h.find("Access-Control-Allow-Origin: https://app.example"), std::string::npos) << h;
  EXPECT_NE(h.find("Access-Control-Allow-Headers:"), std::string::npos) << h;
  const HttpResult m = curl(srv.port(), "/v1/models", "", "-D " + hdr + " -H 'Origin: https://app.example'");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.j()["data"][0]["id"], "my-model");
  h = slurp(hdr);
  EXPECT_NE(h.find("Access-Control-Allow-Origin: https://app.example"), std::string::npos) << h;
  // The model list is public, as llama-server leaves it; the rest needs the key.
  EXPECT_EQ(curl(srv.port(), "/v1/models", "", "-H 'X-Api-Key: nope'").status, 200);
  EXPECT_EQ(curl(srv.port(), "/props", "", "-H 'X-Api-Key: nope'").status, 401);
  EXPECT_EQ(curl(srv.port(), "/props").status, 401);
  const json props = curl(srv.port(), "/props", "", "-H 'Authorization: Bearer k3y'").j();
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 2048);
  EXPECT_EQ(props["total_slots"], 3);
  EXPECT_EQ(props["chat_template"], tmpl_text);
  EXPECT_NE(srv.log().find("cache budget 32 MiB"), std::string::npos) << srv.log();
  fs::remove(hdr);
  // Without --cors-origin no CORS header is sent.
  ServerProcess plain({"-t", "1"});
  ASSERT_GT(plain.port(), 0);
  curl(plain.port(), "/health", "", "-D " + hdr);
  EXPECT_EQ(slurp(hdr).find("Access-Control"), std::string::npos);
  fs::remove(hdr);
}

// ---- Structured output (issue 21, item 2): response_format and grammar on a random-weight
// model. The schema check below is written independently of the converter.

// Whether `v` validates against `s` for the keywords these tests use.
bool validates(const json& v, const json& s, std::string& why) {
  auto no = [&](const std::string& w) {
    why = w + " in " + v.dump();
    return false;
  };
  if (s.contains("anyOf")) {
    for (const auto& alt : s["anyOf"])
      if (validates(v, alt, why)) return true;
    return no("no anyOf branch matches");
  }
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return no("not in enum");
  if (!s.contains("type")) return true;
  const std::string t = s["type"];
  if (t == "null") return v.is_null() || no("not null");
  if (t == "boolean") return v.is_boolean() || no("not a boolean");
  if (t == "integer") return v.is_number_integer() || no("not an integer");
  if (t == "number") return v.is_number() || no("not a number");
  if (t == "string") {
    if (!v.is_string()) return no("not a string");
    const std::string str = v;
    size_t n = 0;  // code points
    for (const unsigned char c : str) n += (c & 0xC0) != 0x80;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return no("too long");
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return no("too short");
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) return no("pattern");
    return true;
  }
  if (t == "array") {
    if (!v.is_array()) return no("not an array");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return no("too many items");
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return no("too few items");
    for (const auto& e : v)
      if (!validates(e, s["items"], why)) return false;
    return true;
  }
  if (!v.is_object()) return no("not an object");
  for (const auto& r : s.value("required", json::array()))
    if (!v.contains(r.get<std::string>())) return no("missing " + r.get<std::string>());
  for (const auto& [k, e] : v.items()) {
    if (!s["properties"].contains(k)) return no("extra key " + k);
    if (!validates(e, s["properties"][k], why)) return false;
  }
  return true;
}

TEST_F(ServerTest, JsonSchemaRepliesValidateForEverySeedAndTemperature) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer"},
      "color": {"enum": ["red", "green", "blue"]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
      "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2}$"},
      "ok": {"type": "boolean"},
      "where": {"type": "object", "properties": {"x": {"type": "number"}, "note": {"anyOf": [{"type": "null"},
                {"type": "string", "maxLength": 4}]}}, "required": ["x", "note"], "additionalProperties": false}
    },
    "required": ["name", "age", "color", "tags", "code", "where"],
    "additionalProperties": false
  })");
  const json msgs = {{{"role", "user"}, {"content", "Describe a person as JSON."}}};
  int n = 0;
  for (const double temp : {0.0, 0.8, 1.5})
    for (const int seed : {1, 2, 3}) {
      json body = chat_body(msgs, 600, seed == 3);
      body["temperature"] = temp;
      body["seed"] = seed;
      body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}, {"strict", true}}}};
      const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      std::string text, finish;
      if (seed == 3) {
        bool done = false;
        for (const auto& e : sse_events(r.body, &done)) {
          if (e["choices"].empty()) continue;
          text += delta_text(e["choices"][0]);
          if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
        }
        EXPECT_TRUE(done);
      } else {
        text = r.j()["choices"][0]["message"]["content"];
        finish = r.j()["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(finish, "stop") << "temperature " << temp << " seed " << seed << ": " << text;
      const json v = json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << "temperature " << temp << " seed " << seed << ": not JSON: " << text;
      std::string why;
      EXPECT_TRUE(validates(v, schema, why)) << "temperature " << temp << " seed " << seed << ": " << why;
      ++n;
    }
  EXPECT_EQ(n, 9);
}

// Whether `text` is a prefix of some JSON text (the parser fails only at its end).
bool json_prefix(const std::string& text) {
  struct Sax : nlohmann::json_sax<json> {
    size_t at = std::string::npos;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception&) override {
      at = pos;
      return false;
    }
  } sax;
  json::sax_parse(text, &sax);
  return sax.at == std::string::npos || sax.at >= text.size();
}

TEST_F(ServerTest, JsonObjectRepliesAreObjects) {
  for (const int seed : {1, 2, 3, 4}) {
    json body = chat_body({{{"role", "user"}, {"content", "JSON please."}}}, 300);
    body["temperature"] = 1.0;
    body["seed"] = seed;
    body["response_format"] = {{"type", "json_object"}};
    const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.j()["choices"][0]["message"]["content"];
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text[0], '{') << text;
    // An unbounded string may outlast max_tokens on a random model; then the text must
    // still be a prefix of an object.
    if (r.j()["choices"][0]["finish_reason"] == "stop") {
      const json v = json::parse(text, nullptr, false);
      EXPECT_TRUE(v.is_object()) << text;
    } else {
      EXPECT_TRUE(json_prefix(text)) << text;
    }
  }
}

TEST_F(ServerTest, GrammarFieldConstrainsCompletions) {
  const std::string gbnf = R"(root ::= ("yes" | "no") " " num ("," word){0,3}
num ::= [1-9] [0-9]{0,2}   # no leading zero
word ::= [a-z]{1,4})";
  const std::regex same("(yes|no) [1-9][0-9]{0,2}(,[a-z]{1,4}){0,3}");
  for (const double temp : {0.0, 1.0})
    for (const int seed : {5, 6, 7}) {
      const json body = {{"prompt", "Answer:"}, {"max_tokens", 60}, {"temperature", temp}, {"seed", seed}, {"grammar", gbnf}};
      const HttpResult r = curl(port(), "/v1/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const std::string text = r.j()["choices"][0]["text"];
      EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "stop") << text;
      EXPECT_TRUE(std::regex_match(text, same)) << "temperature " << temp << " seed " << seed << ": " << text;
    }
  // n = 2: each reply has its own grammar state.
  const json body = {{"prompt", "Answer:"}, {"max_tokens", 60}, {"temperature", 1.0}, {"seed", 9}, {"n", 2}, {"grammar", gbnf}};
  const HttpResult r = curl(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.j()["choices"].size(), 2u) << r.body;
  for (const auto& c : r.j()["choices"]) { EXPECT_TRUE(std::regex_match(c["text"].get<std::string>(), same)) << c; }
}

TEST_F(ServerTest, UnsupportedSchemasAndBadGrammarsAre400NamingTheProblem) {
  json body = chat_body({{{"role", "user"}, {"content", "x"}}}, 4);
  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"name", "n"}, {"schema", {{"type", "integer"}, {"minimum", 3}}}}}};
  HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("'minimum'"), std::string::npos) << r.body;
  EXPECT_EQ(r.j()["error"]["param"], "response_format.json_schema.schema");
  body["response_format"] = {{"type", "xml"}};
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).status, 400);
  body.erase("response_format");
  body["grammar"] = "root ::= \"a\" bogus";
  r = curl(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("line 1, column 14: undefined rule 'bogus'"), std::string::npos)
      << r.body;
  body["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).status, 400);
  const json text = {{"prompt", "p"}, {"grammar", "root ::= [a-"}};
  EXPECT_EQ(curl(port(), "/v1/completions", text.dump()).status, 400);
}

}  // namespace
