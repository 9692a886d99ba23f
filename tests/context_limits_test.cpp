// Context limits (issue 28 item 3): the per-sequence byte estimate that start-up checks -c
// with equals what a state really holds once filled; -c above the model's trained context
// and a -c no memory can hold are refused at start-up with the numbers a user needs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/eval.h"
#include "model_fixtures.h"
#include "models/config.h"
#include "models/registry.h"
#include "not_supported.h"
#include "tensor/threadpool.h"

namespace fs = std::filesystem;

namespace {

struct Fixture {
  ws::test::GoldenFixture g;
  std::vector<ws::LayerKind> kinds;  // of its state's layers
};

bool has(const Fixture& f, ws::LayerKind k) {
  return std::find(f.kinds.begin(), f.kinds.end(), k) != f.kinds.end();
}

// The first F32 fixture whose layers satisfy `want`, or none.
std::optional<Fixture> find_fixture(const std::function<bool(const Fixture&)>& want) {
  for (const auto& g : ws::test::golden_fixtures()) {
    if (!g.f32) continue;
    const auto file = ws::gguf::File::open(g.model);
    if (ws::test::skip_not_supported(file, g.model)) continue;
    const auto model = ws::load_model(file);
    const ws::SeqState s = model->make_state(ws::MemoryOptions{});
    Fixture f{g, {}};
    for (size_t i = 0; i < s.n_layers(); ++i) f.kinds.push_back(s.layer(i).kind());
    if (want(f)) return f;
  }
  return std::nullopt;
}

// Fills a context of n_ctx positions in batches of n_batch and compares the state's bytes
// with the estimate made before anything was evaluated.
void expect_estimate_matches(const Fixture& f) {
  SCOPED_TRACE(f.g.model);
  const auto file = ws::gguf::File::open(f.g.model);
  const auto model = ws::load_model(file);
  ws::MemoryOptions mem;
  mem.n_ctx = 96;        // one sealed KV page of 64 and a partial tail
  mem.swa_slack = 8;     // small, so a sliding window drops cells within 96 positions
  const int32_t n_batch = 32;
  const size_t estimate = model->make_state(mem).bytes_at_full_context(n_batch);
  ws::SeqState state = model->make_state(mem);
  std::vector<ws::Token> tokens;
  const int32_t n_vocab = model->config().n_vocab;
  for (int32_t i = 0; i < mem.n_ctx; ++i) tokens.push_back(1 + (i * 7) % std::max(1, std::min(n_vocab - 1, 200)));
  ws::ThreadPool pool(2);
  std::vector<float> logits;
  ws::eval_tokens(*model, state, tokens, n_batch, ws::LogitsMode::last, logits, pool);
  ASSERT_EQ(state.position(), mem.n_ctx);
  EXPECT_EQ(estimate, state.bytes());
  EXPECT_GT(estimate, 0u);
}

TEST(ContextEstimate, FullKvModel) {
  const auto f = find_fixture([](const Fixture& f) {
    return !f.kinds.empty() && std::all_of(f.kinds.begin(), f.kinds.end(), [](auto k) { return k == ws::LayerKind::full_kv; });
  });
  ASSERT_TRUE(f) << "no F32 fixture with only full-KV layers";
  expect_estimate_matches(*f);
}

TEST(ContextEstimate, SlidingWindowModel) {
  const auto f = find_fixture([](const Fixture& f) { return has(f, ws::LayerKind::sliding_kv); });
  ASSERT_TRUE(f) << "no F32 fixture with sliding-window layers";
  expect_estimate_matches(*f);
}

TEST(ContextEstimate, HybridRecurrentModel) {
  const auto f = find_fixture([](const Fixture& f) {
    return has(f, ws::LayerKind::recurrent) && has(f, ws::LayerKind::full_kv);
  });
  ASSERT_TRUE(f) << "no F32 fixture with recurrent and attention layers";
  expect_estimate_matches(*f);
}

TEST(ContextEstimate, UsableContextFollowsRopeScaling) {
  for (const auto& g : ws::test::golden_fixtures()) {
    const auto file = ws::gguf::File::open(g.model);
    if (ws::test::skip_not_supported(file, g.model)) continue;
    const auto model = ws::load_model(file);
    const auto& c = model->config();
    const int32_t usable = ws::usable_context(file, c);
    EXPECT_GE(usable, c.n_ctx_train) << g.model;
    const std::string type = file.get_string(c.arch + ".rope.scaling.type");
    const int64_t original = file.get_int(c.arch + ".rope.scaling.original_context_length", 0);
    const double factor = file.get_float(c.arch + ".rope.scaling.factor", 0.0);
    if (type == "yarn" && original > 0 && factor > 1) {
      EXPECT_GE(double(usable), double(original) * factor) << g.model;
    }
    if (type.empty()) {
      EXPECT_EQ(usable, c.n_ctx_train) << g.model;
    }
  }
}

// ---------------------------------------------------------------- the CLI

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run_cli(const std::string& args, std::string* err) {
  const fs::path errfile = fs::temp_directory_path() / ("ws-ctx-" + std::to_string(::getpid()) + ".err");
  // timeout: a check that failed to fire would leave `serve` running.
  const int rc = std::system(("timeout 60 " + std::string(WS_BINARY) + " " + args + " 2>" + errfile.string() + " >/dev/null").c_str());
  *err = slurp(errfile);
  fs::remove(errfile);
  return rc;
}

// The F32 fixture with attention KV and the smallest usable context, and that context.
std::pair<std::string, int32_t> kv_fixture() {
  std::pair<std::string, int32_t> best{"", INT32_MAX};
  for (const auto& g : ws::test::golden_fixtures()) {
    if (!g.f32) continue;
    const auto file = ws::gguf::File::open(g.model);
    if (ws::test::skip_not_supported(file, g.model)) continue;
    const auto model = ws::load_model(file);
    const ws::SeqState s = model->make_state(ws::MemoryOptions{});
    bool kv = false;
    for (size_t i = 0; i < s.n_layers(); ++i) kv = kv || s.layer(i).kind() == ws::LayerKind::full_kv;
    const int32_t usable = ws::usable_context(file, model->config());
    if (kv && usable < best.second) best = {g.model, usable};
  }
  return best;
}

TEST(ContextCli, AboveTrainedContextIsRefusedNamingBoth) {
  const auto [model, usable] = kv_fixture();
  ASSERT_FALSE(model.empty());
  const std::string base = "run -m " + model + " --tokens 1,2,3 -n 1 -t 1";
  std::string err;
  const std::string over = std::to_string(usable + 1);
  EXPECT_NE(run_cli(base + " -c " + over, &err), 0);
  EXPECT_NE(err.find(over), std::string::npos) << err;
  EXPECT_NE(err.find(std::to_string(usable)), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-ctx-beyond-training"), std::string::npos) << err;
  EXPECT_EQ(run_cli(base + " -c " + std::to_string(usable), &err), 0) << err;
  EXPECT_EQ(run_cli(base + " -c 0", &err), 0) << err;  // the trained context
  EXPECT_EQ(run_cli(base + " -c " + over + " --allow-ctx-beyond-training", &err), 0) << err;
}

TEST(ContextCli, AbsurdContextFailsFastNamingTheBytes) {
  const auto [model, usable] = kv_fixture();
  ASSERT_FALSE(model.empty());
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = run_cli("run -m " + model + " --tokens 1,2,3 -n 1 -t 1 -c 2000000000 --allow-ctx-beyond-training", &err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(rc, -1);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) != 0) << err;  // an error, not a signal
  EXPECT_NE(err.find("context 2000000000 needs"), std::string::npos) << err;
  EXPECT_NE(err.find("bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("available"), std::string::npos) << err;
  EXPECT_LT(s, 20.0);
  // serve checks every slot's share.
  EXPECT_NE(run_cli("serve -m " + model + " -t 1 --parallel 2 -c 2000000000 --allow-ctx-beyond-training", &err),
            0);
  EXPECT_NE(err.find("for 2 slot(s)"), std::string::npos) << err;
}

}  // namespace
