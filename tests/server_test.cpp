// `warmstart serve` end to end: the real binary on a free loopback port, driven with curl
// (and a raw socket where a client must vanish mid-stream) on a hybrid fixture model.
// Images: server_vision_test.cpp; sampling fields and structured output:
// server_sampling_test.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "server_client.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

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

// A streamed or whole reply that cannot end early: end-of-generation tokens banned
// (ignore_eos), so a random-weight model runs to max_tokens (none: the context's end).
json endless_reply(int max_tokens, bool stream) {
  json b = chat_body({{{"role", "user"}, {"content", "Write a very long story."}}}, max_tokens, stream);
  if (max_tokens <= 0) b.erase("max_tokens");
  b["ignore_eos"] = true;
  return b;
}

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

// llama-server's ignore_eos on the chat route: the end-of-sequence token, pushed to the top
// by logit_bias, ends the reply at once unless ignore_eos bans it.
TEST_F(ServerTest, IgnoreEosRunsTheReplyToMaxTokens) {
  const int64_t eos = ws::gguf::File::open(hybrid_model().string()).get_int("tokenizer.ggml.eos_token_id", -1);
  ASSERT_GE(eos, 0);
  json body = chat_body({{{"role", "user"}, {"content", "Say something."}}}, 6);
  body["logit_bias"] = {{std::to_string(eos), 100}};
  const HttpResult stopped = curl(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  EXPECT_EQ(stopped.j()["usage"]["completion_tokens"], 0) << stopped.body;
  EXPECT_EQ(stopped.j()["choices"][0]["finish_reason"], "stop");
  body["ignore_eos"] = true;
  const HttpResult ran = curl(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(ran.j()["usage"]["completion_tokens"], 6) << ran.body;
  EXPECT_EQ(ran.j()["choices"][0]["finish_reason"], "length");
  body["ignore_eos"] = "yes";
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).status, 400);
}

// Without streaming nothing is written until the end, so the server must notice the
// closed socket itself: generation stops early and the slot is freed.
TEST_F(ServerTest, ClientDisconnectWithoutStreamingStopsTheWork) {
  const std::string before = curl(port(), "/metrics").body;
  const int max_tokens = 3500;
  {
    RawStream client(port(), endless_reply(max_tokens, false), 0);
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
    RawStream client(port(), endless_reply(max_tokens, true), 4);
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

// The holders below run to the end of a 32768-token context: seconds on any fixture.
TEST(ServerLimits, BusyBeyondTheQueueIs503) {
  ServerProcess srv({"--parallel", "1", "--queue", "0", "-t", "1", "-c", "32768"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  RawStream holder(srv.port(), endless_reply(0, true), 2);
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
  ServerProcess srv({"--parallel", "1", "--queue", "4", "-t", "1", "-c", "32768"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  RawStream holder(srv.port(), endless_reply(0, true), 2);
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

}  // namespace
