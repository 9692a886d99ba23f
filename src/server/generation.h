// One completion on a leased engine: prompt checks, the engine turn, UTF-8-safe text
// streaming and stop sequences. Knows nothing of HTTP: text goes to a callback.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "chat/prompt.h"
#include "engine/prompt.h"
#include "engine/turn.h"
#include "server/openai_request.h"

namespace ws::server {

// Tokenizes the rendered prompt (message ends -> token positions for checkpoints) and
// checks it against the context. `param` names the request field in errors.
TurnRequest make_turn_request(const Tokenizer& tok, const chat::RenderedPrompt& prompt, const GenerationOptions& gen,
                              int32_t n_ctx, const char* param);
// The sampling settings and reply count of `gen` on `r` (token ids checked against the vocabulary).
void apply_generation(const Tokenizer& tok, const GenerationOptions& gen, TurnRequest& r);

// One generated token as logprobs report it: its id and text and its log-probability
// under the raw logits, with the most likely alternatives at its step. Without logprobs
// (run_completions' every_token alone) only `id` is set.
struct TokenInfo {
  Token id = -1;
  std::string piece;  // bytes as the model made them (a piece may end inside a UTF-8 character)
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // most likely first
  std::vector<Token> top_ids;                      // the ids of `top`, in its order
};

struct Completion {
  int32_t index = 0;          // which of the request's n replies
  std::string text;           // everything emitted (stop strings excluded)
  std::string finish_reason;  // "stop" or "length"
  std::string stop_word;      // the stop string that ended the text; "" when none did
  bool client_gone = false;   // the text callback refused more: the client disconnected
  bool context_full = false;  // generation ended because the context had no room left
  // Every token this reply generated (a stop string's included, an end-of-generation token not).
  std::vector<Token> tokens;
  // When requested: the tokens of `text` (those of a stop string excluded); with
  // every_token, also trailing ones that printed nothing.
  std::vector<TokenInfo> logprobs;
  TurnResult turn;            // shared by the n replies (turn.samples holds each one's tokens)
};

// Receives text as it becomes final; returns false when nobody is listening any more.
using TextSink = std::function<bool(const std::string&)>;
// The same for reply `index` of n, with the tokens that completed this text (logprobs).
using ChoiceSink = std::function<bool(int32_t index, const std::string& text, std::span<const TokenInfo> tokens)>;

Completion run_completion(Engine& engine, const Tokenizer& tok, const TurnRequest& request,
                          const std::vector<std::string>& stop, const TextSink& on_text);

// request.n_samples replies from one prompt computation. `top_logprobs` < 0: no logprobs;
// otherwise each token's logprob and that many alternatives. `special_text`: control
// tokens are decoded as their text (tool-call and thinking markers, for the reply parser).
// `every_token` (llama-server's accounting, which reports every token): each token reaches
// on_text and Completion::logprobs as a TokenInfo, logprobs or not, and tokens that
// printed nothing at the end come in a last call with empty text.
std::vector<Completion> run_completions(Engine& engine, const Tokenizer& tok, const TurnRequest& request,
                                        const std::vector<std::string>& stop, int32_t top_logprobs,
                                        const ChoiceSink& on_text, bool special_text = false,
                                        bool every_token = false);

}  // namespace ws::server
