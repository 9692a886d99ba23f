#include "server/generation.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "server/api_error.h"
#include "server/stop_matcher.h"

namespace ws::server {

TurnRequest make_turn_request(const Tokenizer& tok, const chat::RenderedPrompt& prompt, const GenerationOptions& gen,
                              int32_t n_ctx, const char* param) {
  PromptTokens p = tokenize_prompt(tok, prompt.text, prompt.message_ends);
  const int32_t n = int32_t(p.tokens.size());
  if (n == 0) throw bad_request("the prompt is empty after tokenization", param, "invalid_value");
  // The engine needs room for the prompt and at least one generated token.
  if (n >= n_ctx)
    throw context_exceeded("this model's context holds " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                               std::to_string(n) + " tokens; shorten it or start the server with a larger -c",
                           param, n, n_ctx);
  TurnRequest r;
  r.prompt = std::move(p.tokens);
  r.message_ends = std::move(p.message_ends);
  r.max_tokens = gen.max_tokens > 0 ? gen.max_tokens : n_ctx - n;
  apply_generation(tok, gen, r);
  return r;
}

void apply_generation(const Tokenizer& tok, const GenerationOptions& gen, TurnRequest& r) {
  for (const auto& [id, bias] : gen.sampling.logit_bias)
    if (id >= tok.n_vocab())
      throw bad_request("'logit_bias' names token " + std::to_string(id) + ", but the vocabulary has " +
                            std::to_string(tok.n_vocab()) + " tokens",
                        "logit_bias", "invalid_value");
  r.sampling = gen.sampling;
  r.n_samples = gen.n;
  if (gen.ignore_eos)
    for (Token t = 0; t < tok.n_vocab(); ++t)
      if (tok.is_eog(t)) r.sampling.logit_bias.emplace_back(t, -INFINITY);
}

Completion run_completion(Engine& engine, const Tokenizer& tok, const TurnRequest& request,
                          const std::vector<std::string>& stop, const TextSink& on_text) {
  ChoiceSink sink;
  if (on_text) sink = [&](int32_t, const std::string& text, std::span<const TokenInfo>) { return on_text(text); };
  return std::move(run_completions(engine, tok, request, stop, -1, sink)[0]);
}

namespace {

// top_n < 0: the id alone (every_token without logprobs).
TokenInfo token_info(const Tokenizer& tok, std::span<const float> logits, Token t, int32_t top_n) {
  TokenInfo info;
  info.id = t;
  if (top_n < 0) return info;
  const LogprobReport r = logprobs_of(logits, t, top_n);
  // Special pieces shown as text, so an end-of-generation alternative is not an empty string.
  info.piece = tok.token_to_piece(t, true);
  info.logprob = r.chosen.logprob;
  for (const TokenLogprob& alt : r.top) {
    info.top.emplace_back(tok.token_to_piece(alt.id, true), alt.logprob);
    info.top_ids.push_back(alt.id);
  }
  return info;
}

// The stop string the matcher found at the start of `rest` (the text decoded after what
// was emitted): the matcher ends the text right before the earliest one.
std::string stop_word_at(std::string_view rest, const std::vector<std::string>& stop) {
  for (const std::string& s : stop)
    if (rest.substr(0, s.size()) == s) return s;
  return "";
}

}  // namespace

std::vector<Completion> run_completions(Engine& engine, const Tokenizer& tok, const TurnRequest& request,
                                        const std::vector<std::string>& stop, int32_t top_logprobs,
                                        const ChoiceSink& on_text, bool special_text, bool every_token) {
  const size_t n = size_t(std::max(1, request.n_samples));
  struct Reply {
    StreamDecoder decoder;
    StopMatcher matcher;
    bool stopped = false;
    std::string raw;                 // every character decoded, stop strings included (names the stop word)
    std::vector<TokenInfo> pending;  // tokens whose text is not out yet
  };
  std::vector<Reply> replies;
  replies.reserve(n);
  for (size_t i = 0; i < n; ++i)
    replies.push_back(Reply{StreamDecoder(tok, special_text), StopMatcher(stop), false, {}, {}});
  std::vector<Completion> out(n);
  bool gone = false;
  // Text goes out with the tokens that completed it; tokens of a withheld stop string never do.
  // Empty text goes out only for every_token's trailing tokens (`force`).
  auto emit = [&](size_t i, const std::string& text, bool force = false) {
    if ((text.empty() && !force) || gone) return !gone;
    out[i].text += text;
    std::vector<TokenInfo> done = std::move(replies[i].pending);
    replies[i].pending.clear();
    if (on_text && !on_text(int32_t(i), text, done)) gone = true;
    out[i].logprobs.insert(out[i].logprobs.end(), std::make_move_iterator(done.begin()),
                           std::make_move_iterator(done.end()));
    return !gone;
  };
  auto push_text = [&](size_t i, const std::string& piece) {
    Reply& r = replies[i];
    r.raw += piece;
    const StopMatcher::Result m = r.matcher.push(piece);
    r.stopped = m.stopped;
    const bool ok = emit(i, m.emit);
    if (r.stopped) out[i].stop_word = stop_word_at(std::string_view(r.raw).substr(out[i].text.size()), stop);
    return ok;
  };
  const bool track = top_logprobs >= 0 || every_token;
  const SampleSink sink = [&](int32_t s, Token t, std::span<const float> logits) {
    if (gone) return false;
    Reply& r = replies[size_t(s)];
    if (track) r.pending.push_back(token_info(tok, logits, t, top_logprobs));
    if (!push_text(size_t(s), r.decoder.push(t))) return false;
    return !r.stopped;  // a completed stop string ends this reply at once
  };
  const TurnResult turn = engine.run_samples(request, sink);
  for (size_t i = 0; i < n; ++i) {
    Reply& r = replies[i];
    if (!r.stopped && !gone && push_text(i, r.decoder.flush()) && !r.stopped) emit(i, r.matcher.flush());
    // llama-server reports every token: those that printed nothing at the end (a control token) too.
    if (every_token && !r.stopped && !gone && !r.pending.empty()) emit(i, "", true);
    Completion& c = out[i];
    c.index = int32_t(i);
    const TurnResult::Sample& sample = turn.samples.at(i);
    c.client_gone = gone || sample.stop_reason == "cancelled";
    c.finish_reason = r.stopped || sample.stop_reason == "eog" ? "stop" : "length";
    c.context_full = sample.stop_reason == "context";
    c.tokens = sample.generated;
    c.turn = turn;
  }
  return out;
}

}  // namespace ws::server
