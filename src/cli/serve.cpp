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

#include "cache/tiers.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "chat/builtin_templates.h"
#include "cli/llama_server_flags.h"
#include "server/chat_format.h"
#include "server/http_server.h"
#include "server/slot_pool.h"
#include "vision/context.h"

namespace ws::cli {
namespace {

struct ServeOptions {
  std::string model, host = "127.0.0.1", chat_template, chat_template_file, api_key, mmproj, alias, cors_origin;
  std::string reasoning_format = "auto", pooling = "mean", slot_save_path;
  bool allow_local_files = false, embeddings = false, reranking = false;
  int n_predict = -1, ubatch = 512;
  int step_tokens = StepLoopOptions{}.step_tokens;  // -b: rows per batched step
  LlamaServerExtras extras;
  double image_cache_mb = 256;  // encoded image embeddings kept for later turns
  int port = 8080;
  int parallel = 1;
  CliContext context;
  int ctx = 0;  // context.resolve()d once the model is loaded
  CliKvType kv;
  int threads = default_threads();
  CliCheckpoints checkpoints;
  int queue = 16;
  double budget_mb = -1;  // < 0: default_cache_budget_mb()
  std::string cache_dir, cache_redis;
  double cache_disk_mb = 4096;
  RedisOptions redis;
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
    std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit fails a cache write (EFBIG), not the server
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

// The template's source and how the startup line names it: --chat-template-file FILE, or
// --chat-template as llama-server takes it (a built-in template's name, else the template
// text itself; an existing file is read, as warmstart always did), else the model's own.
std::pair<std::string, std::string> chat_template_source(const ServeOptions& o, const gguf::File& model) {
  if (!o.chat_template_file.empty()) return {read_file(o.chat_template_file), o.chat_template_file};
  if (o.chat_template.empty()) return {model.get_string("tokenizer.chat_template"), "the model's"};
  if (const std::string* builtin = chat::builtin_chat_template(o.chat_template))
    return {*builtin, "built-in " + o.chat_template};
  if (std::filesystem::is_regular_file(o.chat_template)) return {read_file(o.chat_template), o.chat_template};
  if (o.chat_template.find("{%") == std::string::npos && o.chat_template.find("{{") == std::string::npos) {
    std::string names;
    for (const auto& n : chat::builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::runtime_error("--chat-template '" + o.chat_template +
                             "' is neither a built-in template (" + names + "), a file, nor Jinja text");
  }
  return {o.chat_template, "given inline"};
}

// What /v1/models reports of the model.
server::ModelMeta model_meta(const LoadedModel& m, bool vision) {
  server::ModelMeta meta;
  const std::string kind = m.file.get_string("tokenizer.ggml.model");
  meta.vocab_type = kind == "llama" ? 1 : kind == "gpt2" ? 2 : kind == "bert" ? 3 : kind == "t5" ? 4 : 0;
  meta.n_vocab = m.tokenizer->n_vocab();
  meta.n_ctx_train = m.model->config().n_ctx_train;
  meta.n_embd = m.model->config().n_embd;
  for (const auto& t : m.file.tensors()) meta.n_params += t.n_elements(), meta.size_bytes += int64_t(t.nbytes);
  meta.vision = vision;
  return meta;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  for (size_t b = 0; b <= s.size();) {
    const size_t e = std::min(s.find(',', b), s.size());
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// --cache-dir and --cache-redis: the stores under the RAM cache, disk first.
std::unique_ptr<CheckpointTiers> open_tiers(const ServeOptions& o, const MemoryOptions& memory, double budget_mb) {
  std::vector<std::unique_ptr<RecordStore>> stores;
  if (!o.cache_dir.empty()) {
    auto disk = std::make_unique<DiskStore>(o.cache_dir, size_t(o.cache_disk_mb * 1024 * 1024));
    const auto r = disk->recovery();
    std::fprintf(stderr,
                 "warmstart serve: disk tier %s: %zu checkpoints and %zu pages (%.1f MiB of %.0f), %zu leftover files "
                 "removed\n",
                 o.cache_dir.c_str(), r.checkpoints, r.pages, double(disk->bytes_in_use()) / (1 << 20), o.cache_disk_mb,
                 r.removed);
    stores.push_back(std::move(disk));
  }
  if (!o.cache_redis.empty()) {
    RedisOptions redis = parse_redis_address(o.cache_redis);
    redis.password = o.redis.password;
    redis.user = o.redis.user;
    redis.key_prefix = o.redis.key_prefix;
    redis.timeout_ms = o.redis.timeout_ms;
    redis.ttl_s = o.redis.ttl_s;
    if (redis.password.empty())
      if (const char* p = std::getenv("WARMSTART_REDIS_PASSWORD")) redis.password = p;
    std::fprintf(stderr, "warmstart serve: redis tier %s:%d, keys %s*, timeout %d ms\n", redis.host.c_str(), redis.port,
                 redis.key_prefix.c_str(), redis.timeout_ms);
    stores.push_back(std::make_unique<RedisStore>(std::move(redis)));
  }
  if (stores.empty()) return nullptr;
  return std::make_unique<CheckpointTiers>(std::move(stores), memory, size_t(budget_mb * 1024 * 1024));
}

int run_serve(ServeOptions o) {
  if (o.reranking)
    throw std::runtime_error("--reranking: warmstart has no reranking models yet (llama-server's /rerank needs a "
                             "model with a classification head, pooling type rank)");
  ShutdownOnSignal signals;
  server::bound_allocator_retention();  // memory of large requests goes back to the system
  const std::string model_path = o.model.empty() ? shipped_model_path() : o.model;
  LoadedModel m = load(model_path);
  o.ctx = start_context(m, o.context, o.kv.types(), o.parallel, o.ubatch);
  const auto [tmpl_source, tmpl_label] = chat_template_source(o, m.file);
  const server::ChatFormatter chat(tmpl_source, *m.tokenizer);
  for (const auto& note : o.extras.notes) std::fprintf(stderr, "warmstart serve: %s\n", note.c_str());
  if (o.embeddings)
    std::fprintf(stderr, "warmstart serve: --embeddings accepted, changes nothing: /v1/embeddings is always served\n");

  const double budget_mb = o.budget_mb < 0 ? default_cache_budget_mb() : o.budget_mb;
  PrefixCache cache(size_t(budget_mb * 1024 * 1024));
  EngineOptions eo;
  eo.memory.n_ctx = o.ctx;
  eo.memory.kv_types = o.kv.types();
  const std::unique_ptr<CheckpointTiers> tiers = open_tiers(o, eo.memory, budget_mb);
  if (tiers && cache.enabled()) cache.attach_tiers(tiers.get());
  // A turn's micro-batches fit a step, so a client that leaves mid-prompt is noticed
  // within about one step (TurnRequest::cancelled is polled between micro-batches).
  eo.n_ubatch = std::min(o.ubatch, o.step_tokens);
  eo.checkpoints = o.checkpoints.policy();
  StepLoopOptions steps;
  steps.step_tokens = o.step_tokens;
  server::SlotPool slots(*m.model, *m.tokenizer, &cache, eo, o.parallel, o.threads, steps, o.queue);

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
  cfg.aliases = split_commas(o.alias);
  cfg.model_name = cfg.aliases.empty() ? std::filesystem::path(model_path).filename().string() : cfg.aliases[0];
  cfg.model_meta = model_meta(m, vis != nullptr);
  cfg.n_predict = o.n_predict;
  cfg.slot_save_path = o.slot_save_path;
  cfg.model_path = model_path;
  cfg.chat_template = tmpl_source;
  cfg.cors_origins = split_commas(o.cors_origin);
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
               "warmstart serve: listening on http://%s:%d (model %s, %d slots batched on %d threads, %d tokens a "
               "step, context %d, cache budget %.0f MiB, chat template: %s, images: %s)\n",
               o.host.c_str(), port, cfg.model_name.c_str(), o.parallel, o.threads, o.step_tokens, o.ctx, budget_mb,
               chat.uses_model_template() ? tmpl_label.c_str() : "ChatML (the model has none)",
               vis ? vision::projector_name(vis->model().hparams().projector) : "no (no --mmproj)");
  std::fflush(stderr);
  signals.start(srv);
  srv.listen();
  std::fprintf(stderr, "warmstart serve: stopped\n");
  return 0;
}

// The prefix cache's budget, checkpoints and tiers (RAM, --cache-dir, Redis).
void add_cache_options(CLI::App* app, ServeOptions& o) {
  app->add_option("--cache-budget-mb,--cache-ram", o.budget_mb, "prefix-cache budget in MiB (0 disables the cache)")
      ->check(CLI::NonNegativeNumber);
  add_checkpoint_options(app, o.checkpoints);
  app->add_option("--cache-dir", o.cache_dir,
                  "directory where checkpoints are kept across restarts (written through as they are taken, found "
                  "when RAM has nothing as deep; docs/cache-tiers.md)");
  app->add_option("--cache-disk-mb", o.cache_disk_mb, "size of --cache-dir in MiB; least recently used go first "
                  "(default 4096)")
      ->check(CLI::PositiveNumber);
  app->add_option("--cache-redis", o.cache_redis,
                  "HOST:PORT of a Redis server sharing checkpoints between replicas (after RAM and --cache-dir)");
  app->add_option("--cache-redis-password", o.redis.password,
                  "Redis AUTH password (or set WARMSTART_REDIS_PASSWORD, which stays out of the process list)");
  app->add_option("--cache-redis-user", o.redis.user, "Redis ACL user for AUTH (default: the default user)");
  app->add_option("--cache-redis-prefix", o.redis.key_prefix, "prefix of every Redis key (default warmstart:)");
  app->add_option("--cache-redis-timeout-ms", o.redis.timeout_ms,
                  "Redis connect and command timeout; past it the turn goes on without Redis (default 500)")
      ->check(CLI::Range(1, 600000));
  app->add_option("--cache-redis-ttl", o.redis.ttl_s,
                  "seconds a record lives in Redis (0: until Redis's maxmemory-policy evicts it; default 0)")
      ->check(CLI::NonNegativeNumber);
}

// What one client, one request and the whole server may take (connections, bodies, images).
void add_limit_options(CLI::App* app, ServeOptions& o) {
  server::ConnectionLimits& lim = o.limits;
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
  app->add_option("--max-body-mb", o.max_body_mb,
                  "largest request body in MiB, chunked or not; larger is 413 (default 64)")
      ->check(CLI::Range(0.001, 4096.0));
  app->add_option("--max-image-pixels", o.max_image_pixels,
                  "decoded pixels (width x height) one request's images may have in all; more is 413 "
                  "(default 16777216 = 4096 x 4096)")
      ->check(CLI::Range(int64_t(1), int64_t(8192) * 8192));
  app->add_option("--max-image-decodes", o.max_image_decodes,
                  "images decoded at once in the whole server (each holds width x height x 3 bytes; default 2)")
      ->check(CLI::Range(1, 256));
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
  add_context_options(app, o->context, "context size per slot", "-c,--ctx,--ctx-size");
  add_kv_type_option(app, o->kv);
  app->add_option("-t,--threads", o->threads, "threads in all (split between the slots)")->check(CLI::PositiveNumber);
  add_cache_options(app, *o);
  app->add_option("--queue", o->queue, "requests that may wait for a slot; more get 503")->check(CLI::NonNegativeNumber);
  app->add_option("--chat-template", o->chat_template,
                  "chat template: a built-in's name (chatml, llama3, ...), a file, or the Jinja text itself "
                  "(default: the model's own)");
  app->add_option("--chat-template-file", o->chat_template_file, "Jinja chat template file");
  app->add_option("--api-key", o->api_key,
                  "require 'Authorization: Bearer KEY' or 'X-Api-Key: KEY' (all routes but /health and /v1/models)");
  app->add_option("--alias", o->alias,
                  "model name reported by /v1/models and in replies (default: the file's name); a,b,c: several "
                  "names, the first one reported");
  app->add_option("-n,--predict,--n-predict", o->n_predict,
                  "tokens a reply may have when the request sets no limit (-1: until the context is full)")
      ->check(CLI::Range(-1, 1 << 30));
  app->add_option("--ubatch-size", o->ubatch, "prompt tokens per forward pass (alias -ub; default 512)")
      ->check(CLI::Range(1, 1 << 16));
  app->add_option("-b,--batch-size", o->step_tokens,
                  "rows one batched forward pass takes: the next token of every streaming slot plus prompt rows "
                  "(longer prompts continue in the next steps); bounds how long a new prompt delays the streams "
                  "(default 256)")
      ->check(CLI::Range(1, 1 << 16));
  app->add_option("--slot-save-path", o->slot_save_path,
                  "folder for POST /slots/ID?action=save|restore (default: those actions are refused)");
  app->add_flag("--embedding,--embeddings", o->embeddings,
                "accepted as llama-server takes it; /v1/embeddings is always served");
  app->add_flag("--reranking,--rerank", o->reranking, "refused: no reranking models are supported yet");
  app->add_option("--reasoning-format", o->reasoning_format,
                  "thinking blocks: none (left in content), deepseek or auto (moved to reasoning_content; default auto)")
      ->check(CLI::IsMember({"none", "deepseek", "auto"}));
  app->add_option("--pooling", o->pooling, "/v1/embeddings: mean or last (token) pooling of the final hidden state")
      ->check(CLI::IsMember({"mean", "last"}));
  app->add_option("--cors-origin,--cors-origins", o->cors_origin,
                  "origins allowed to call from a browser (a,b,c or '*'): Access-Control-Allow-Origin and OPTIONS "
                  "preflights (default: off)");
  app->add_option("--mmproj", o->mmproj, "vision projector GGUF: accept image_url content parts");
  app->add_option("--image-cache-mb", o->image_cache_mb, "encoded-image cache in MiB (with --mmproj)")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--allow-local-files", o->allow_local_files, "read file:// image URLs (off: data: URLs only)");
  add_limit_options(app, *o);
  // Whatever CLI11 did not take must be one of llama-server's flags (llama_server_flags.h).
  app->allow_extras();
  return {app, [o, app] {
            o->extras = parse_llama_server_extras(app->remaining());
            return run_serve(*o);
          }};
}

}  // namespace ws::cli
