// `warmstart bench`: prompt-processing and generation throughput in the spirit of
// llama-bench. pp N: N fixed pseudo-random token ids into an empty state (micro-batch
// -b); tg M: M single-token steps into an empty state; -d D first fills the state with
// D tokens, untimed in the tests (llama-bench's depth), to measure at a long context: once,
// and every repetition forks that state, as a warm turn forks a cached conversation (the
// fill's own speed is reported as the cold prefill of the history: depth_prefill_ts).
// Mean and sample standard deviation over -r repetitions after one warm-up; --json prints
// a list with one object per test using llama-bench's field names (n_prompt, n_gen,
// avg_ts, stddev_ts, ...).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/eval.h"
#include "tensor/threadpool.h"

namespace ws::cli {
namespace {

struct BenchOptions {
  std::string model;
  std::vector<int> prompts = {512};
  std::vector<int> gens = {128};
  int depth = 0;
  CliKvType kv;
  int threads = default_threads();
  int reps = 5;
  int ubatch = 512;
  bool json = false;
  bool allow_beyond_training = false;
};

// The same ids as bench/state_bench and the peer (bench/peer/bench.mjs): an LCG over
// ordinary ids below min(8000, n_vocab).
std::vector<Token> bench_tokens(int n, int32_t n_vocab) {
  std::vector<Token> out(static_cast<size_t>(n));  // [n] token ids
  const uint64_t limit = uint64_t(std::min(n_vocab, 8000));
  uint64_t x = 12345;
  for (auto& t : out) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t = Token((x >> 33) % limit);
  }
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The state the tests start from: `depth` tokens evaluated into a state of n_ctx positions,
// and how long that took.
struct DepthState {
  SeqState state;
  double prefill_s = 0;
};

DepthState prefill_depth(const Model& model, KvTypes kv, int depth, int n_ctx, int ubatch, ThreadPool& pool) {
  MemoryOptions mem;
  mem.kv_types = kv;
  mem.n_ctx = std::max(n_ctx, 16);
  DepthState d{model.make_state(mem)};
  std::vector<float> logits;  // [n_vocab] of the last token
  const auto tokens = bench_tokens(depth, model.config().n_vocab);
  const auto t0 = std::chrono::steady_clock::now();
  if (depth > 0) eval_tokens(model, d.state, tokens, ubatch, LogitsMode::last, logits, pool);
  d.prefill_s = seconds_since(t0);
  return d;
}

// Seconds for one test on a fork of base (which holds the depth's tokens): pp (n_prompt
// tokens at once) or tg (n_gen single steps).
double run_once(const Model& model, const SeqState& base, int n_prompt, int n_gen, int ubatch, ThreadPool& pool) {
  SeqState state = base.fork();
  const int depth = state.position();
  std::vector<float> logits;  // [n_vocab] of the last token
  const auto tokens = bench_tokens(depth + std::max(n_prompt, n_gen), model.config().n_vocab);
  const std::span<const Token> all(tokens);
  const auto t0 = std::chrono::steady_clock::now();
  if (n_prompt > 0) {
    eval_tokens(model, state, all.subspan(size_t(depth), size_t(n_prompt)), ubatch, LogitsMode::last, logits, pool);
  } else {
    for (int i = 0; i < n_gen; ++i)
      eval_tokens(model, state, all.subspan(size_t(depth + i), 1), 1, LogitsMode::last, logits, pool);
  }
  return seconds_since(t0);
}

nlohmann::json run_test(const LoadedModel& m, const BenchOptions& o, const DepthState& depth, int n_prompt, int n_gen,
                        ThreadPool& pool) {
  const int n = n_prompt > 0 ? n_prompt : n_gen;
  const DepthState empty = prefill_depth(*m.model, o.kv.types(), 0, 20, o.ubatch, pool);
  run_once(*m.model, empty.state, std::min(n_prompt, 16), std::min(n_gen, 4), o.ubatch, pool);  // warm-up (pages, caches)
  std::vector<double> ts, ns;  // per repetition: tokens/s, nanoseconds
  for (int r = 0; r < o.reps; ++r) {
    const double s = run_once(*m.model, depth.state, n_prompt, n_gen, o.ubatch, pool);
    ts.push_back(n / s);
    ns.push_back(s * 1e9);
  }
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
  };
  const auto stddev = [&](const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double mu = mean(v);
    double s = 0;
    for (double x : v) s += (x - mu) * (x - mu);
    return std::sqrt(s / double(v.size() - 1));
  };
  const std::string path = o.model;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"build", std::string("warmstart ") + WARMSTART_VERSION},
          {"cpu_info", cpu_model()},
          {"backends", "CPU"},
          {"model_filename", path.substr(path.find_last_of('/') + 1)},
          {"model_type", m.model->config().arch},
          {"n_threads", pool.size()},
          {"n_batch", o.ubatch},
          {"n_ubatch", o.ubatch},
          {"n_prompt", n_prompt},
          {"n_gen", n_gen},
          {"n_depth", o.depth},
          {"depth_prefill_ts", depth.prefill_s > 0 ? o.depth / depth.prefill_s : 0.0},
          {"type_k", kv_type_name(o.kv.types().k)},
          {"type_v", kv_type_name(o.kv.types().v)},
          {"test_time", date},
          {"avg_ns", int64_t(mean(ns))},
          {"stddev_ns", int64_t(stddev(ns))},
          {"avg_ts", mean(ts)},
          {"stddev_ts", stddev(ts)},
          {"samples_ns", ns},
          {"samples_ts", ts}};
}

int run_bench(const BenchOptions& o) {
  const LoadedModel m = load(o.model);
  // The deepest test's context (run_once), held to the same limits as -c elsewhere.
  CliContext deepest{0, o.allow_beyond_training};
  for (int n : o.prompts) deepest.ctx = std::max(deepest.ctx, o.depth + n + 1);
  for (int n : o.gens) deepest.ctx = std::max(deepest.ctx, o.depth + n + 1);
  if (deepest.ctx > 0) start_context(m, deepest, o.kv.types(), 1, o.ubatch);
  ThreadPool pool(o.threads);
  const DepthState depth = prefill_depth(*m.model, o.kv.types(), o.depth, deepest.ctx, o.ubatch, pool);
  nlohmann::json results = nlohmann::json::array();
  if (!o.json && o.depth > 0)
    std::printf("depth %d: filled in %.2f s (%.2f t/s, cold prefill)\n", o.depth, depth.prefill_s, o.depth / depth.prefill_s);
  if (!o.json) std::printf("| %-32s | %7s | %14s | %20s |\n", "model", "threads", "test", "t/s");
  const std::string at = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
  const auto report = [&](nlohmann::json r, const std::string& test) {
    if (!o.json)
      std::printf("| %-32s | %7d | %14s | %11.2f ± %6.2f |\n", r["model_filename"].get<std::string>().c_str(),
                  pool.size(), test.c_str(), r["avg_ts"].get<double>(), r["stddev_ts"].get<double>());
    std::fflush(stdout);
    results.push_back(std::move(r));
  };
  for (int n : o.prompts)
    if (n > 0) report(run_test(m, o, depth, n, 0, pool), "pp" + std::to_string(n) + at);
  for (int n : o.gens)
    if (n > 0) report(run_test(m, o, depth, 0, n, pool), "tg" + std::to_string(n) + at);
  if (o.json) std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

}  // namespace

Command add_bench(CLI::App& root) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* app = root.add_subcommand("bench", "Measure prompt processing (pp) and generation (tg) speed");
  app->add_option("-m,--model", opts->model, "GGUF model")->required();
  app->add_option("-p,--n-prompt", opts->prompts, "prompt lengths (comma-separated), 0 to skip")->delimiter(',');
  app->add_option("-n,--n-gen", opts->gens, "generation lengths (comma-separated), 0 to skip")->delimiter(',');
  app->add_option("-d,--n-depth", opts->depth, "tokens in the state before each test (untimed)")->check(CLI::Range(0, 1 << 24));
  add_kv_type_option(app, opts->kv);
  app->add_option("-t,--threads", opts->threads, "threads")->check(CLI::Range(1, 1024));
  app->add_option("-r,--repetitions", opts->reps, "repetitions per test")->check(CLI::Range(1, 1000));
  app->add_option("-b,--ubatch", opts->ubatch, "micro-batch size for prompt processing")->check(CLI::Range(1, 1 << 20));
  app->add_flag("--allow-ctx-beyond-training", opts->allow_beyond_training,
                "accept tests deeper than the model's trained context");
  app->add_flag("--json", opts->json, "print a JSON list, one object per test (llama-bench field names)");
  return {app, [opts] { return run_bench(*opts); }};
}

}  // namespace ws::cli
