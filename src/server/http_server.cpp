#include "server/http_server.h"

#include <httplib.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "server/api_error.h"
#include "server/http_guard.h"

namespace ws::server {
namespace {

using json = nlohmann::ordered_json;

// Routes we count by name; everything else is "other" so a scanner cannot blow up the
// label set of /metrics.
std::string endpoint_label(const std::string& path) {
  // Each route is counted under the path it was called by (with or without /v1).
  const std::string p = path.starts_with("/v1/") ? path.substr(3) : path;
  for (const char* known : {"/chat/completions", "/completions", "/models", "/embeddings", "/embedding", "/health",
                            "/metrics", "/tokenize", "/detokenize", "/apply-template", "/props", "/completion",
                            "/infill", "/messages", "/messages/count_tokens", "/responses", "/slots"})
    if (p == known) return path;
  if (p.starts_with("/slots/")) return "/slots/{id}";
  return "other";
}

// Compares without an early exit so the time taken does not reveal how much of a guessed key matched.
bool same_secret(const std::string& given, const std::string& key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

}  // namespace

Server::Server(ServerConfig config, const Tokenizer& tok, PrefixCache& cache, SlotPool& slots,
               const ChatFormatter& chat, VisionSupport vision)
    : cfg_(std::move(config)), tok_(tok), cache_(cache), slots_(slots), chat_(chat), vision_(vision),
      http_(std::make_unique<GuardedHttpServer>(cfg_.limits)) {
  install_routes();
}

Server::~Server() = default;

void Server::send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  // Busy (the waiting line or the connections are full): clients that honour it back off.
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(dump_json(e.to_json()), "application/json");
}

bool Server::authorized(const httplib::Request& req) const {
  // The routes llama-server leaves public: health checks and the model list.
  if (cfg_.api_key.empty()) return true;
  for (const char* open : {"/health", "/v1/health", "/models", "/v1/models"})
    if (req.path == open) return true;
  // X-Api-Key as llama-server also takes it, for clients that cannot set Authorization.
  if (req.has_header("X-Api-Key")) return same_secret(req.get_header_value("X-Api-Key"), cfg_.api_key);
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  return auth.starts_with(prefix) && same_secret(auth.substr(prefix.size()), cfg_.api_key);
}

std::string Server::allowed_origin(const httplib::Request& req) const {
  const std::string origin = req.get_header_value("Origin");
  for (const auto& allowed : cfg_.cors_origins) {
    if (allowed == "*") return "*";
    if (allowed == origin) return origin;
  }
  return "";
}

void Server::install_routes() {
  install_request_gate();
  install_endpoints();
  install_error_handlers();
}

// Before any route: CORS headers, the connection guard's refusals, preflights, the API key.
void Server::install_request_gate() {
  using httplib::Request;
  using httplib::Response;
  http_->set_pre_routing_handler([this](const Request& req, Response& res) {
    // The connection guard's verdict on the request's framing comes first (its body is
    // unread; the guard closes the connection after the answer).
    const std::string origin = allowed_origin(req);
    if (!origin.empty()) {
      // On every answer, errors included, so a browser page can read why it failed.
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
    }
    if (const auto refused = http_->refusal(req)) {
      send_error(res, *refused);
      return httplib::Server::HandlerResponse::Handled;
    }
    // A preflight carries no credentials: it is answered before the key check.
    if (req.method == "OPTIONS" && !origin.empty()) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
      res.set_header("Access-Control-Max-Age", "86400");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "invalid or missing API key: send 'Authorization: Bearer <key>' or 'X-Api-Key: <key>'",
                             "authentication_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
}

void Server::install_endpoints() {
  using httplib::Request;
  using httplib::Response;
  // Every handler's errors become OpenAI error objects; nothing escapes to httplib.
  auto guard = [this](void (Server::*fn)(const Request&, Response&)) {
    return [this, fn](const Request& req, Response& res) {
      try {
        (this->*fn)(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
      }
    };
  };
  http_->Get("/health", [](const Request&, Response& res) { res.set_content(R"({"status":"ok"})", "application/json"); });
  // llama-server's paths: each OpenAI route also without its /v1 prefix.
  for (const std::string prefix : {"", "/v1"}) {
    http_->Get(prefix + "/models", guard(&Server::handle_models));
    http_->Post(prefix + "/chat/completions", guard(&Server::handle_chat));
    http_->Post(prefix + "/completions", guard(&Server::handle_text));
    http_->Post(prefix + "/embeddings", guard(&Server::handle_embeddings));
  }
  http_->Get("/v1/health", [](const Request&, Response& res) { res.set_content(R"({"status":"ok"})", "application/json"); });
  http_->Get("/metrics", guard(&Server::handle_metrics));
  http_->Post("/tokenize", guard(&Server::handle_tokenize));
  http_->Post("/detokenize", guard(&Server::handle_detokenize));
  http_->Post("/apply-template", guard(&Server::handle_apply_template));
  http_->Get("/props", guard(&Server::handle_props));
  http_->Post("/embedding", guard(&Server::handle_embeddings));
  http_->Post("/v1/messages", guard(&Server::handle_messages));
  http_->Post("/v1/messages/count_tokens", guard(&Server::handle_count_tokens));
  http_->Post("/v1/responses", guard(&Server::handle_responses));
  http_->Post("/responses", guard(&Server::handle_responses));
  http_->Post("/completion", guard(&Server::handle_completion));
  http_->Post("/infill", guard(&Server::handle_infill));
  // llama-server routes whose feature warmstart lacks: its 501 "not supported" answer,
  // not a 404, so a client can tell a missing feature from a wrong path.
  auto unsupported = [this](const std::string& what) {
    return [this, what](const Request&, Response& res) {
      send_error(res, ApiError(501, what, "not_supported_error"));
    };
  };
  for (const char* path : {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"})
    http_->Post(path, unsupported("reranking is not supported: warmstart runs no reranking models yet"));
  http_->Get("/lora-adapters", unsupported("LoRA adapters are not supported"));
  http_->Post("/lora-adapters", unsupported("LoRA adapters are not supported"));
  http_->Get("/slots", guard(&Server::handle_slots));
  http_->Post(R"(/slots/(\d+))", guard(&Server::handle_slot_action));
}

// What httplib answers by itself (no route, unreadable body, an escaped exception) becomes an
// OpenAI error object too; every answer is counted.
void Server::install_error_handlers() {
  using httplib::Request;
  using httplib::Response;
  http_->set_error_handler([this](const Request& req, Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote an error object
    // Reading the body failed because the guard stopped it (too large, stalled): httplib
    // says 400, the guard knows better.
    if (const auto refused = http_->refusal(req)) {
      send_error(res, *refused);
      return;
    }
    const std::string what = res.status == 404 ? "no route " + req.method + " " + req.path : "request failed";
    if (res.status == 404) send_error(res, ApiError(404, what, "not_found_error", "", "not_found"));
    else send_error(res, ApiError(res.status, what, "invalid_request_error"));
  });
  http_->set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "internal error: " + what, "server_error"));
  });
  http_->set_logger([this](const Request& req, const Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
  });
}

void Server::handle_models(const httplib::Request&, httplib::Response& res) {
  // OpenAI's list in "data" (with llama-server's meta and aliases), and llama-server's
  // Ollama-style "models" list beside it.
  const ModelMeta& mm = cfg_.model_meta;
  const json meta = {{"vocab_type", mm.vocab_type}, {"n_vocab", mm.n_vocab},   {"n_ctx_train", mm.n_ctx_train},
                     {"n_embd", mm.n_embd},           {"n_params", mm.n_params}, {"size", mm.size_bytes}};
  json aliases = json::array();
  for (const auto& a : cfg_.aliases) aliases.push_back(a);
  const json data = {{"id", cfg_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "warmstart"},
                     {"aliases", aliases},    {"meta", meta}};
  json capabilities = json::array({"completion"});
  if (mm.vision) capabilities.push_back("multimodal");
  const json ollama = {{"name", cfg_.model_name},
                       {"model", cfg_.model_name},
                       {"modified_at", ""},
                       {"size", ""},
                       {"digest", ""},
                       {"type", "model"},
                       {"description", ""},
                       {"tags", json::array({""})},
                       {"capabilities", capabilities},
                       {"parameters", ""},
                       {"details", {{"parent_model", ""}, {"format", "gguf"}, {"family", ""},
                                    {"families", json::array({""})}, {"parameter_size", ""},
                                    {"quantization_level", ""}}}};
  res.set_content(dump_json({{"models", json::array({ollama})}, {"object", "list"}, {"data", json::array({data})}}),
                  "application/json");
}

void Server::handle_metrics(const httplib::Request&, httplib::Response& res) {
  MetricsSnapshot now;
  now.cache = cache_.stats();
  if (const CheckpointTiers* tiers = cache_.tiers()) now.tiers = tiers->stats();
  now.slots_total = slots_.size();
  now.slots_busy = slots_.busy();
  now.queue_waiting = slots_.waiting();
  now.steps = slots_.step_stats();
  res.set_content(metrics_.render(now), "text/plain; version=0.0.4");
}

int Server::bind() {
  const int port = cfg_.port == 0 ? http_->bind_to_any_port(cfg_.host) : (http_->bind_to_port(cfg_.host, cfg_.port) ? cfg_.port : -1);
  if (port <= 0) {
    const int err = errno;  // from the failed bind or listen (httplib keeps it)
    throw std::runtime_error("cannot listen on " + cfg_.host + ":" + std::to_string(cfg_.port) +
                             (err ? std::string(": ") + std::strerror(err) : "") +
                             (err == EADDRINUSE ? " (another server has this port: choose one with --port)" : ""));
  }
  http_->widen_backlog();
  return port;
}

void Server::listen() { http_->listen_after_bind(); }

void Server::stop() { http_->stop(); }

}  // namespace ws::server
