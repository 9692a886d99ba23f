// `warmstart serve`: the OpenAI-compatible HTTP server (src/server/) over one model.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "server/chat_format.h"
#include "server/http_server.h"
#include "server/slot_pool.h"

namespace ws::cli {
namespace {

struct ServeOptions {
  std::string model, host = "127.0.0.1", chat_template, api_key;
  int port = 8080;
  int parallel = 1;
  int ctx = 4096;
  int threads = default_threads();
  int checkpoint_every = 512;
  int queue = 16;
  double budget_mb = -1;  // < 0: default_cache_budget_mb()
};

// SIGINT/SIGTERM stop the server cleanly. They are blocked in every thread (the mask is
// inherited, so this runs before any thread starts) and taken by one waiting thread.
class ShutdownOnSignal {
 public:
  ShutdownOnSignal() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client closing its socket must not kill the server
  }
  void start(server::Server& srv) {
    waiter_ = std::thread([this, &srv] {
      int sig = 0;
      sigwait(&set_, &sig);
      srv.stop();
    });
  }
  ~ShutdownOnSignal() {
    if (!waiter_.joinable()) return;
    kill(getpid(), SIGTERM);  // wakes the waiter if the server stopped on its own
    waiter_.join();
  }

 private:
  sigset_t set_;
  std::thread waiter_;
};

int run_serve(const ServeOptions& o) {
  ShutdownOnSignal signals;
  LoadedModel m = load(o.model);
  const std::string tmpl_source =
      o.chat_template.empty() ? m.file.get_string("tokenizer.chat_template") : read_file(o.chat_template);
  const server::ChatFormatter chat(tmpl_source, *m.tokenizer);

  const double budget_mb = o.budget_mb < 0 ? default_cache_budget_mb() : o.budget_mb;
  PrefixCache cache(size_t(budget_mb * 1024 * 1024));
  EngineOptions eo;
  eo.memory.n_ctx = o.ctx;
  eo.checkpoints.every_n = o.checkpoint_every;
  const int threads_per_slot = std::max(1, o.threads / o.parallel);
  server::SlotPool slots(*m.model, *m.tokenizer, &cache, eo, o.parallel, threads_per_slot, o.queue);

  server::ServerConfig cfg;
  cfg.host = o.host;
  cfg.port = o.port;
  cfg.api_key = o.api_key;
  cfg.model_name = std::filesystem::path(o.model).filename().string();
  cfg.n_ctx = o.ctx;
  cfg.http_threads = o.parallel + o.queue + 8;
  server::Server srv(cfg, *m.tokenizer, cache, slots, chat);
  const int port = srv.bind();
  std::fprintf(stderr,
               "warmstart serve: listening on http://%s:%d (model %s, %d slots x %d threads, context %d, "
               "cache budget %.0f MiB, chat template: %s)\n",
               o.host.c_str(), port, cfg.model_name.c_str(), o.parallel, threads_per_slot, o.ctx, budget_mb,
               chat.uses_model_template() ? (o.chat_template.empty() ? "the model's" : o.chat_template.c_str())
                                          : "ChatML (the model has none)");
  std::fflush(stderr);
  signals.start(srv);
  srv.listen();
  std::fprintf(stderr, "warmstart serve: stopped\n");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& root) {
  auto o = std::make_shared<ServeOptions>();
  auto* app = root.add_subcommand("serve", "OpenAI-compatible HTTP server (chat/completions, completions, models)");
  app->add_option("-m,--model", o->model, "GGUF model file")->required();
  app->add_option("--host", o->host, "address to bind (default 127.0.0.1: this machine only)");
  app->add_option("--port", o->port, "TCP port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  app->add_option("--parallel", o->parallel, "slots served concurrently")->check(CLI::PositiveNumber);
  app->add_option("-c,--ctx", o->ctx, "context size per slot")->check(CLI::PositiveNumber);
  app->add_option("-t,--threads", o->threads, "threads in all (split between the slots)")->check(CLI::PositiveNumber);
  app->add_option("--cache-budget-mb", o->budget_mb, "prefix-cache budget in MiB (0 disables the cache)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--checkpoint-every", o->checkpoint_every, "also checkpoint every N prompt tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--queue", o->queue, "requests that may wait for a slot; more get 503")->check(CLI::NonNegativeNumber);
  app->add_option("--chat-template", o->chat_template, "Jinja chat template file (default: the model's own)");
  app->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' (all routes but /health)");
  return {app, [o] { return run_serve(*o); }};
}

}  // namespace ws::cli
