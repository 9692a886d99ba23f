#include "server/generation.h"

#include "server/api_error.h"
#include "server/stop_matcher.h"

namespace ws::server {

TurnRequest make_turn_request(const Tokenizer& tok, const RenderedText& prompt, const GenerationOptions& gen,
                              int32_t n_ctx, const char* param) {
  PromptTokens p = tokenize_prompt(tok, prompt.text, prompt.message_ends);
  const int32_t n = int32_t(p.tokens.size());
  if (n == 0) throw bad_request("the prompt is empty after tokenization", param, "invalid_value");
  // The engine needs room for the prompt and at least one generated token.
  if (n >= n_ctx)
    throw bad_request("this model's context holds " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                          std::to_string(n) + " tokens; shorten it or start the server with a larger -c",
                      param, "context_length_exceeded");
  TurnRequest r;
  r.prompt = std::move(p.tokens);
  r.message_ends = std::move(p.message_ends);
  r.max_tokens = gen.max_tokens > 0 ? gen.max_tokens : n_ctx - n;
  r.sampling = gen.sampling;
  return r;
}

Completion run_completion(Engine& engine, const Tokenizer& tok, const TurnRequest& request,
                          const std::vector<std::string>& stop, const TextSink& on_text) {
  Completion c;
  StreamDecoder decoder(tok);
  StopMatcher matcher(stop);
  bool stopped = false;
  auto emit = [&](const std::string& text) {
    if (text.empty()) return true;
    c.text += text;
    if (on_text && !on_text(text)) c.client_gone = true;
    return !c.client_gone;
  };
  const TokenSink sink = [&](Token t) {
    StopMatcher::Result r = matcher.push(decoder.push(t));
    if (!emit(r.emit)) return false;
    stopped = r.stopped;
    return !stopped;  // a completed stop string ends generation at once
  };
  c.turn = engine.run_turn(request, sink);
  if (!stopped && !c.client_gone) {
    StopMatcher::Result r = matcher.push(decoder.flush());
    stopped = r.stopped;
    if (emit(r.emit) && !stopped) emit(matcher.flush());
  }
  const std::string& why = c.turn.stop_reason;
  c.finish_reason = stopped || why == "eog" ? "stop" : "length";
  return c;
}

}  // namespace ws::server
