// The HTTP front: routes, API-key check, error objects, request accounting. It only
// translates HTTP into engine turns on leased slots; cache policy lives in src/cache/.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "server/chat_format.h"
#include "server/connection_limits.h"
#include "server/embeddings.h"
#include "server/media_turn.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/request_limits.h"
#include "server/slot_pool.h"
#include "server/structured_output.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace ws::server {

class ApiError;
class GuardedHttpServer;

// What /v1/models reports of the model (llama-server's "meta").
struct ModelMeta {
  int vocab_type = 0;  // llama.cpp's numbering: 1 SPM (tokenizer "llama"), 2 BPE ("gpt2"), 3 WPM, 4 UGM
  int64_t n_vocab = 0, n_ctx_train = 0, n_embd = 0;
  int64_t n_params = 0;    // elements of every tensor
  int64_t size_bytes = 0;  // bytes of the tensors' data
  bool vision = false;     // --mmproj given
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;          // 0: any free port (the chosen one is returned by bind())
  std::string api_key;      // empty: no authentication
  std::string model_name;   // listed by /v1/models, echoed when a request names none
  std::vector<std::string> aliases;  // --alias a,b,c: every name the model answers to (model_name first)
  ModelMeta model_meta;
  int32_t n_ctx = 4096;
  // Timeouts and caps of the connection layer; connection threads come from
  // max_connections, not from the slots, so idle sockets cannot hold back /health.
  ConnectionLimits limits;
  bool allow_local_files = false;  // file:// image URLs are read (--allow-local-files)
  std::string model_path;     // reported by /props
  std::string chat_template;  // the template's source, reported by /props (empty: ChatML)
  // --cors-origins: origins whose pages may call the server ("*": any). A request from one
  // of them gets Access-Control-Allow-Origin on every answer, and its OPTIONS preflights a
  // 204; empty: no CORS headers (browsers on other origins are refused).
  std::vector<std::string> cors_origins;
  ReasoningFormat reasoning_format = ReasoningFormat::auto_;  // --reasoning-format
  Pooling pooling = Pooling::mean;                             // --pooling (/v1/embeddings)
  // Decoded pixels one request's images may have in all (--max-image-pixels; more is 413),
  // and image decodes running at once in the server (--max-image-decodes): decode memory
  // stays under max_image_decodes x max_image_pixels x 3 bytes.
  int64_t max_image_pixels = int64_t(4096) * 4096;
  int max_image_decodes = 2;
  // --slot-save-path: the folder /slots/{id}?action=save|restore reads and writes (empty:
  // those actions are refused).
  std::string slot_save_path;
  int32_t n_predict = -1;  // --n-predict: the default reply length when a request sets none (-1: no limit)
};

class Server {
 public:
  // `vision` (serve --mmproj) must outlive the server; without it image requests are 400.
  Server(ServerConfig config, const Tokenizer& tok, PrefixCache& cache, SlotPool& slots, const ChatFormatter& chat,
         VisionSupport vision = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int bind();     // binds the listening socket; returns the port; throws on failure
  void listen();  // serves until stop()
  void stop();    // safe from any thread

 private:
  void install_routes();
  void install_request_gate();
  void install_endpoints();
  void install_error_handlers();
  bool authorized(const httplib::Request& req) const;
  std::string allowed_origin(const httplib::Request& req) const;  // empty: no CORS headers
  void handle_models(const httplib::Request& req, httplib::Response& res);
  void handle_metrics(const httplib::Request& req, httplib::Response& res);
  void handle_chat(const httplib::Request& req, httplib::Response& res);
  void handle_text(const httplib::Request& req, httplib::Response& res);
  // utility_routes.cpp
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  void handle_apply_template(const httplib::Request& req, httplib::Response& res);
  void handle_props(const httplib::Request& req, httplib::Response& res);
  void handle_embeddings(const httplib::Request& req, httplib::Response& res);  // embeddings.cpp
  // anthropic_routes.cpp: POST /v1/messages, POST /v1/messages/count_tokens (Anthropic Messages API)
  void handle_messages(const httplib::Request& req, httplib::Response& res);
  void handle_count_tokens(const httplib::Request& req, httplib::Response& res);
  void run_messages(const httplib::Request& req, httplib::Response& res);
  void stream_messages(httplib::Response& res, SlotPool::Lease&& lease, ResponseMeta meta, TurnRequest turn,
                       std::vector<std::string> stop);
  // responses_routes.cpp: POST /v1/responses (OpenAI Responses API)
  void handle_responses(const httplib::Request& req, httplib::Response& res);
  // native_routes.cpp: llama-server's native POST /completion and POST /infill
  void handle_completion(const httplib::Request& req, httplib::Response& res);
  void handle_infill(const httplib::Request& req, httplib::Response& res);
  // slot_routes.cpp: GET /slots, POST /slots/{id}?action=save|restore|erase
  void handle_slots(const httplib::Request& req, httplib::Response& res);
  void handle_slot_action(const httplib::Request& req, httplib::Response& res);
  // What every chat-shaped route (chat completions, Anthropic Messages, Responses) does
  // with a parsed and rendered conversation: the reply syntax and forced-call grammar
  // (`cr.gen.grammar` may be set), the length guard, the turn (images decoded only on a
  // held slot) and the slot, taken before any byte is sent (503 when the line is full).
  struct ChatTurn {
    ReplySyntax reply;
    TurnRequest turn;
    std::optional<SlotPool::Lease> lease;
  };
  ChatTurn prepare_chat_turn(const httplib::Request& req, ChatRequest& cr, const ChatOptions& opts,
                             const chat::RenderedPrompt& text, const char* param);
  // True once the client of `req` (being handled) has gone: polled while the request waits
  // for a slot and between prompt micro-batches (TurnRequest::cancelled).
  std::function<bool()> client_gone(const httplib::Request& req) const;
  // Runs (non-streaming) or schedules (streaming) the turn on a leased slot.
  // `lease`: the slot a request with images took before decoding them; empty: taken here.
  void respond(const httplib::Request& req, httplib::Response& res, ResponseMeta meta, TurnRequest turn,
               const GenerationOptions& gen, std::optional<SlotPool::Lease> lease = std::nullopt);
  void stream(httplib::Response& res, SlotPool::Lease&& lease, ResponseMeta meta, TurnRequest turn,
              std::vector<std::string> stop, int32_t top_logprobs);
  static void send_error(httplib::Response& res, const ApiError& e);

  ServerConfig cfg_;
  const Tokenizer& tok_;
  PrefixCache& cache_;
  SlotPool& slots_;
  const ChatFormatter& chat_;
  VisionSupport vision_;
  std::mutex encode_mu_;  // one image encode at a time on vision_.pool
  PromptLengthGuard prompt_guard_{tok_};
  ImageDecodeGate decode_gate_{cfg_.max_image_decodes};
  Metrics metrics_;
  GrammarVocabCache grammar_vocab_{tok_};  // for response_format / grammar requests
  std::unique_ptr<GuardedHttpServer> http_;
};

}  // namespace ws::server
