// `warmstart serve`: the OpenAI-compatible HTTP server (src/server/) over one model.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "server/chat_format.h"
#include "server/http_server.h"
#include "server/slot_pool.h"
#include "vision/media.h"

namespace ws::cli {
namespace {

struct ServeOptions {
  std::string model, host = "127.0.0.1", chat_template, api_key, mmproj, alias, cors_origin;
  std::string reasoning_format = "auto", pooling = "mean";
  bool allow_local_files = false;
  double image_cache_mb = 256;  // encoded image embeddings kept for later turns
  int port = 8080;
  int parallel = 1;
  int ctx = 4096;
  CliKvType kv;
  int threads = default_threads();
  CliCheckpoints checkpoints;
  int queue = 16;
  double budget_mb = -1;  // < 0: default_cache_budget_mb()
  server::ConnectionLimits limits;
  double max_body_mb = 64;
  int64_t max_image_pixels = int64_t(4096) * 4096;
  int max_image_decodes = 2;
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
  server::bound_allocator_retention();  // memory of large requests goes back to the system
  const std::string model_path = o.model.empty() ? embedded_model_path() : o.model;
  LoadedModel m = load(model_path);
  const std::string tmpl_source =
      o.chat_template.empty() ? m.file.get_string("tokenizer.chat_template") : read_file(o.chat_template);
  const server::ChatFormatter chat(tmpl_source, *m.tokenizer);

  const double budget_mb = o.budget_mb < 0 ? default_cache_budget_mb() : o.budget_mb;
  PrefixCache cache(size_t(budget_mb * 1024 * 1024));
  EngineOptions eo;
  eo.memory.n_ctx = o.ctx;
  eo.memory.kv_type = o.kv.type();
  eo.checkpoints = o.checkpoints.policy();
  const int threads_per_slot = std::max(1, o.threads / o.parallel);
  server::SlotPool slots(*m.model, *m.tokenizer, &cache, eo, o.parallel, threads_per_slot, o.queue);

  // --mmproj: the projector file (the tower's weights point into its mapping), its
  // context and the encode pool live until the server stops, because image embeddings
  // are computed inside each turn, after the request handler built the prompt.
  std::optional<gguf::File> mm_file;
  std::unique_ptr<vision::VisionContext> vis;
  std::unique_ptr<ThreadPool> vis_pool;
  server::VisionSupport vision_support;
  if (!o.mmproj.empty()) {
    mm_file.emplace(gguf::File::open(o.mmproj));
    vis = std::make_unique<vision::VisionContext>(*mm_file, size_t(o.image_cache_mb * 1024 * 1024));
    vis_pool = std::make_unique<ThreadPool>(o.threads);
    vision_support = {vis.get(), vis_pool.get(), m.model->config().n_embd};
  }

  server::ServerConfig cfg;
  cfg.host = o.host;
  cfg.port = o.port;
  cfg.api_key = o.api_key;
  cfg.model_name = o.alias.empty() ? std::filesystem::path(model_path).filename().string() : o.alias;
  cfg.model_path = model_path;
  cfg.chat_template = tmpl_source;
  cfg.cors_origin = o.cors_origin;
  cfg.reasoning_format = server::parse_reasoning_format(o.reasoning_format);
  cfg.pooling = server::parse_pooling(o.pooling);
  cfg.n_ctx = o.ctx;
  cfg.limits = o.limits;
  cfg.limits.max_body_bytes = size_t(o.max_body_mb * 1024 * 1024);
  cfg.allow_local_files = o.allow_local_files;
  cfg.max_image_pixels = o.max_image_pixels;
  cfg.max_image_decodes = o.max_image_decodes;
  server::Server srv(cfg, *m.tokenizer, cache, slots, chat, vision_support);
  const int port = srv.bind();
  std::fprintf(stderr,
               "warmstart serve: listening on http://%s:%d (model %s, %d slots x %d threads, context %d, "
               "cache budget %.0f MiB, chat template: %s, images: %s)\n",
               o.host.c_str(), port, cfg.model_name.c_str(), o.parallel, threads_per_slot, o.ctx, budget_mb,
               chat.uses_model_template() ? (o.chat_template.empty() ? "the model's" : o.chat_template.c_str())
                                          : "ChatML (the model has none)",
               vis ? vision::projector_name(vis->model().hparams().projector) : "no (no --mmproj)");
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
  app->add_option("-m,--model", o->model, "GGUF model file (default: the embedded chat model)");
  app->add_option("--host", o->host, "address to bind (default 127.0.0.1: this machine only)");
  app->add_option("--port", o->port, "TCP port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  // llama-server's names are aliases where they mean the same (-np is handled in run's
  // argument check: CLI11 takes no multi-letter short names).
  app->add_option("--parallel", o->parallel, "slots served concurrently (alias -np)")->check(CLI::PositiveNumber);
  app->add_option("-c,--ctx,--ctx-size", o->ctx, "context size per slot")->check(CLI::PositiveNumber);
  add_kv_type_option(app, o->kv);
  app->add_option("-t,--threads", o->threads, "threads in all (split between the slots)")->check(CLI::PositiveNumber);
  app->add_option("--cache-budget-mb,--cache-ram", o->budget_mb, "prefix-cache budget in MiB (0 disables the cache)")
      ->check(CLI::NonNegativeNumber);
  add_checkpoint_options(app, o->checkpoints);
  app->add_option("--queue", o->queue, "requests that may wait for a slot; more get 503")->check(CLI::NonNegativeNumber);
  app->add_option("--chat-template,--chat-template-file", o->chat_template,
                  "Jinja chat template file (default: the model's own)");
  app->add_option("--api-key", o->api_key,
                  "require 'Authorization: Bearer KEY' or 'X-Api-Key: KEY' (all routes but /health)");
  app->add_option("--alias", o->alias, "model name reported by /v1/models and in replies (default: the file's name)");
  app->add_option("--reasoning-format", o->reasoning_format,
                  "thinking blocks: none (left in content), deepseek or auto (moved to reasoning_content; default auto)")
      ->check(CLI::IsMember({"none", "deepseek", "auto"}));
  app->add_option("--pooling", o->pooling, "/v1/embeddings: mean or last (token) pooling of the final hidden state")
      ->check(CLI::IsMember({"mean", "last"}));
  app->add_option("--cors-origin", o->cors_origin,
                  "send Access-Control-Allow-Origin: ORIGIN ('*': any) and answer OPTIONS preflights (default: off)");
  app->add_option("--mmproj", o->mmproj, "vision projector GGUF: accept image_url content parts");
  app->add_option("--image-cache-mb", o->image_cache_mb, "encoded-image cache in MiB (with --mmproj)")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--allow-local-files", o->allow_local_files, "read file:// image URLs (off: data: URLs only)");
  server::ConnectionLimits& lim = o->limits;
  app->add_option("--read-timeout", lim.read_timeout_s,
                  "seconds a client may take to send a request's head, to resume a stalled body or to start its "
                  "next request; then it gets 408 and is disconnected (default 5)")
      ->check(CLI::Range(1, 3600));
  app->add_option("--max-connections", lim.max_connections,
                  "open connections in all; more are refused with 503 (default 256)")
      ->check(CLI::Range(1, 65536));
  app->add_option("--max-connections-per-client", lim.max_connections_per_client,
                  "open connections per client address; more are refused with 429 (0: no cap; default 64)")
      ->check(CLI::Range(0, 65536));
  app->add_option("--max-body-mb", o->max_body_mb,
                  "largest request body in MiB, chunked or not; larger is 413 (default 64)")
      ->check(CLI::Range(0.001, 4096.0));
  app->add_option("--max-image-pixels", o->max_image_pixels,
                  "decoded pixels (width x height) one request's images may have in all; more is 413 "
                  "(default 16777216 = 4096 x 4096)")
      ->check(CLI::Range(int64_t(1), int64_t(8192) * 8192));
  app->add_option("--max-image-decodes", o->max_image_decodes,
                  "images decoded at once in the whole server (each holds width x height x 3 bytes; default 2)")
      ->check(CLI::Range(1, 256));
  // Whatever CLI11 did not take must be llama-server's -np N; anything else is an error.
  app->allow_extras();
  return {app, [o, app] {
            const std::vector<std::string> rest = app->remaining();
            for (size_t i = 0; i < rest.size(); i += 2) {
              if (rest[i] != "-np") throw std::runtime_error("serve: unknown option or argument '" + rest[i] + "'");
              int n = 0;
              try {
                n = i + 1 < rest.size() ? std::stoi(rest[i + 1]) : 0;
              } catch (const std::exception&) {
              }
              if (n <= 0) throw std::runtime_error("serve: -np needs a positive number of slots");
              o->parallel = n;
            }
            return run_serve(*o);
          }};
}

}  // namespace ws::cli
