// A `warmstart serve` child on a fixture model and curl as its client: what the server
// tests of every API share (tests/server_*test.cpp, the llama-server, Anthropic and
// Responses API tests).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "serve_process.h"

namespace ws::test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const fs::path kSharedDir = WS_SHARED_DIR;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The smallest fixture of a hybrid architecture (short-conv + attention), found by the
// general.architecture the files declare.
inline fs::path hybrid_model() {
  fs::path best;
  uintmax_t best_size = UINTMAX_MAX;
  for (const auto& e : fs::directory_iterator(kSharedDir / "fixtures" / "models")) {
    if (e.path().extension() != ".gguf") continue;
    const auto f = ws::gguf::File::open(e.path().string());
    if (f.get_string("general.architecture") != "lfm2" || f.get_string("tokenizer.chat_template").empty()) continue;
    if (e.file_size() < best_size) best = e.path(), best_size = e.file_size();
  }
  return best;
}

struct HttpResult {
  int status = 0;
  std::string body;
  json j() const { return json::parse(body, nullptr, false); }
};

// `warmstart serve -m MODEL EXTRA...` (tests/serve_process.h).
inline std::vector<std::string> serve_args(const fs::path& model, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"-m", model.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
class ServerProcess : public ws::test::ServeProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra, const fs::path& model = hybrid_model())
      : ServeProcess(WS_BINARY, serve_args(model, extra)) {}
};

// curl with the body in a file (no shell quoting of JSON); returns status and body.
inline HttpResult curl(int port, const std::string& path, const std::string& body = "", const std::string& extra = "") {
  static std::atomic<int> counter{0};
  const std::string stem = (fs::temp_directory_path() / ("ws-curl-" + std::to_string(getpid()) + "-" +
                                                         std::to_string(counter++))).string();
  std::string cmd = "curl -s -S -N --max-time 120 -o " + stem + ".out -w '%{http_code}' " + extra + " ";
  if (!body.empty()) {
    std::ofstream(stem + ".in", std::ios::binary) << body;
    cmd += "-H 'Content-Type: application/json' --data-binary @" + stem + ".in ";
  }
  cmd += "http://127.0.0.1:" + std::to_string(port) + path;
  HttpResult r;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[16] = {};
    if (fgets(buf, sizeof buf, p)) r.status = std::atoi(buf);
    pclose(p);
  }
  r.body = slurp(stem + ".out");
  fs::remove(stem + ".in");
  fs::remove(stem + ".out");
  return r;
}

inline json chat_body(const json& messages, int max_tokens, bool stream = false) {
  json b = {{"model", "anything"}, {"messages", messages}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (stream) b["stream"] = true, b["stream_options"] = {{"include_usage", true}};
  return b;
}

// The JSON events of an SSE body; `done` tells whether it ended with `data: [DONE]`.
inline std::vector<json> sse_events(const std::string& body, bool* done) {
  std::vector<json> out;
  std::istringstream in(body);
  std::string line;
  *done = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    EXPECT_FALSE(*done) << "event after [DONE]";
    if (line == "data: [DONE]") *done = true;
    else out.push_back(json::parse(line.substr(6)));
  }
  return out;
}

// One `warmstart serve` shared by the tests of a suite (started once per test process;
// ctest runs each test in a process of its own). A suite may declare its own
// `static std::vector<std::string> server_args()`.
template <class Suite>
class SharedServerTest : public ::testing::Test {
 protected:
  static std::vector<std::string> server_args() {
    return {"--parallel", "2", "-t", "2", "-c", "4096", "--cache-budget-mb", "64"};
  }
  static void SetUpTestSuite() { server_ = new ServerProcess(Suite::server_args()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << server_->log(); }
  static int port() { return server_->port(); }
  static inline ServerProcess* server_ = nullptr;
};

// A streamed chat choice's delta.content: "" when absent or null (the role chunk's).
inline std::string delta_text(const json& choice) {
  const auto it = choice["delta"].find("content");
  return it == choice["delta"].end() || !it->is_string() ? "" : it->get<std::string>();
}

inline double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

}  // namespace ws::test
