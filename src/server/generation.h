// One completion on a leased engine: prompt checks, the engine turn, UTF-8-safe text
// streaming and stop sequences. Knows nothing of HTTP: text goes to a callback.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/prompt.h"
#include "engine/turn.h"
#include "server/openai_request.h"

namespace ws::server {

// Tokenizes the rendered prompt (message ends -> token positions for checkpoints) and
// checks it against the context. `param` names the request field in errors.
TurnRequest make_turn_request(const Tokenizer& tok, const RenderedText& prompt, const GenerationOptions& gen,
                              int32_t n_ctx, const char* param);

struct Completion {
  std::string text;           // everything emitted (stop strings excluded)
  std::string finish_reason;  // "stop" or "length"
  bool client_gone = false;   // the text callback refused more: the client disconnected
  TurnResult turn;
};

// Receives text as it becomes final; returns false when nobody is listening any more.
using TextSink = std::function<bool(const std::string&)>;

Completion run_completion(Engine& engine, const Tokenizer& tok, const TurnRequest& request,
                          const std::vector<std::string>& stop, const TextSink& on_text);

}  // namespace ws::server
