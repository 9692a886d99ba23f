// `warmstart replay`: runs a scripted multi-turn session and reports reuse per turn.
#include <cstdio>
#include <fstream>
#include <memory>

#include "chat/chat_prompt.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "engine/replay.h"

namespace ws::cli {
namespace {

struct ReplayOptions {
  std::string model, script, cache = "on";
  bool verify = false, json = false, ideal = false;
  int threads = default_threads();
  CliContext context;
  int ctx = 0;  // context.resolve()d once the model is loaded
  CliKvType kv;
  int ubatch = 512;
  CliCheckpoints checkpoints;
  double budget_mb = -1;  // < 0: default_cache_budget_mb()
};

int run_replay(ReplayOptions o) {
  LoadedModel m = load(o.model);
  o.ctx = start_context(m, o.context, o.kv.types(), 1, o.ubatch);
  std::ifstream in(o.script);
  if (!in) throw std::runtime_error(o.script + ": cannot open");
  const double budget_mb = o.cache == "off" ? 0 : (o.budget_mb < 0 ? default_cache_budget_mb() : o.budget_mb);
  PrefixCache cache(size_t(budget_mb * 1024 * 1024));
  EngineOptions eo;
  eo.memory.n_ctx = o.ctx;
  eo.memory.kv_types = o.kv.types();
  eo.n_ubatch = o.ubatch;
  eo.checkpoints = o.checkpoints.policy();
  ThreadPool pool(o.threads);
  Engine engine(*m.model, *m.tokenizer, &cache, eo, pool);
  // Scripts are rendered as ChatML whatever the model's template (the benchmarks' format).
  const auto chatml = [](const nlohmann::json& msgs) {
    chat::RenderedPrompt r = chat::render_chatml(msgs, true);
    return std::pair{std::move(r.text), std::move(r.message_ends)};
  };
  Replay replay(engine, *m.tokenizer, chatml, o.verify, o.ideal);
  std::string line;
  int line_no = 0;
  if (!o.json)
    std::printf("%4s %-12s %7s %7s %8s %9s %8s %s\n", "turn", "conversation", "prompt", "reused", "computed",
                "ttft_ms", "rss_mb", o.verify ? "max|dlogit| same / plain, |dNLL|" : "");
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json req;
    try {
      req = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw std::runtime_error(o.script + ":" + std::to_string(line_no) + ": invalid JSON: " + e.what());
    }
    ReplayTurn t;
    try {
      t = replay.run(req);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(o.script + ":" + std::to_string(line_no) + ": " + e.what());
    }
    if (o.json) {
      std::printf("%s\n", t.to_json().dump().c_str());
    } else {
      std::printf("%4d %-12s %7d %7d %8d %9.1f %8.1f", t.turn, t.conversation.c_str(), t.prompt_tokens,
                  t.reused_tokens, t.computed_tokens, t.ttft_ms, t.rss_mb);
      if (t.ideal_ms > 0) std::printf("  ideal %.1f ms (x%.2f)", t.ideal_ms, t.ttft_ms / t.ideal_ms);
      if (t.verified) std::printf("  %.3g / %.3g, %.3g", t.max_abs_logit_diff, t.max_abs_logit_diff_plain, t.mean_nll_diff);
      if (!t.miss_reason.empty()) std::printf("  (%s)", t.miss_reason.c_str());
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  const CacheStats s = cache.stats();
  std::fprintf(stderr, "cache: %llu hits / %llu lookups, %llu reused, %llu computed, %llu evictions, %.1f MiB in use\n",
               (unsigned long long)s.hits, (unsigned long long)s.lookups, (unsigned long long)s.reused_tokens,
               (unsigned long long)s.computed_tokens, (unsigned long long)s.evictions, s.bytes_in_use / 1048576.0);
  return 0;
}

}  // namespace

Command add_replay(CLI::App& root) {
  auto o = std::make_shared<ReplayOptions>();
  auto* app = root.add_subcommand("replay", "Run a scripted multi-turn session (JSON Lines) and report reuse");
  app->add_option("-m,--model", o->model, "GGUF model file")->required();
  app->add_option("--script", o->script, "JSON Lines: one request per line")->required();
  app->add_option("--cache", o->cache, "prefix cache on or off")->check(CLI::IsMember({"on", "off"}));
  app->add_flag("--verify", o->verify, "recompute each turn cold and report logit differences");
  app->add_flag("--ideal", o->ideal, "also time computing only each turn's new tokens (benchmarks: ttft_ratio)");
  app->add_flag("--json", o->json, "print one JSON object per turn and nothing else on stdout");
  app->add_option("--cache-budget-mb", o->budget_mb, "cache budget in MiB (0 disables the cache)");
  add_checkpoint_options(app, o->checkpoints);
  app->add_option("-t,--threads", o->threads, "threads")->check(CLI::PositiveNumber);
  add_context_options(app, o->context, "context size");
  add_kv_type_option(app, o->kv);
  app->add_option("--ubatch", o->ubatch, "micro-batch size")->check(CLI::PositiveNumber);
  return {app, [o] { return run_replay(*o); }};
}

}  // namespace ws::cli
