#include "server/native_response.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ws::server {

namespace {

// JSON has no -inf; llama-server reports an impossible token with the lowest float.
double logprob_value(float lp) { return std::isfinite(lp) ? double(lp) : double(std::numeric_limits<float>::lowest()); }

// Length of the longest prefix of `s` that does not end inside a UTF-8 character
// (llama-server's validate_utf8: `token` shows whole characters, `bytes` has them all).
size_t whole_chars(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

Json token_json(Token id, const std::string& piece, float logprob) {
  Json bytes = Json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return {{"id", id}, {"token", piece.substr(0, whole_chars(piece))}, {"bytes", std::move(bytes)},
          {"logprob", logprob_value(logprob)}};
}

// llama-server's stop_type ("eos", "limit", "word" or "none": the client left) and
// whether the context, not n_predict, ended the text.
struct NativeStop {
  const char* type;
  bool truncated = false;
};

NativeStop native_stop(const Completion& c, int32_t n_predict) {
  // Empty stop strings are refused by the parser, so a stop word is never "".
  if (!c.stop_word.empty()) return {"word"};
  if (c.client_gone) return {"none"};
  if (c.finish_reason == "stop") return {"eos"};  // the only other way to "stop"
  return {"limit", c.context_full || n_predict < 0 || int32_t(c.tokens.size()) < n_predict};
}

}  // namespace

Json native_probs_json(std::span<const TokenInfo> probs) {
  Json out = Json::array();
  for (const TokenInfo& p : probs) {
    Json entry = token_json(p.id, p.piece, p.logprob);
    Json top = Json::array();
    for (size_t k = 0; k < p.top.size(); ++k) top.push_back(token_json(p.top_ids[k], p.top[k].first, p.top[k].second));
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

Json native_timings_json(const TurnResult& t) {
  const int32_t prompt_n = t.prompt_tokens - t.reused;
  const int32_t predicted_n = int32_t(t.generated.size());
  const double predicted_ms = std::max(0.0, t.total_ms - t.ttft_ms);
  auto per_token = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
  auto per_second = [](double ms, int32_t n) { return ms > 0 ? n * 1000.0 / ms : 0.0; };
  return {{"cache_n", t.reused},
          {"prompt_n", prompt_n},
          {"prompt_ms", t.ttft_ms},
          {"prompt_per_token_ms", per_token(t.ttft_ms, prompt_n)},
          {"prompt_per_second", per_second(t.ttft_ms, prompt_n)},
          {"predicted_n", predicted_n},
          {"predicted_ms", predicted_ms},
          {"predicted_per_token_ms", per_token(predicted_ms, predicted_n)},
          {"predicted_per_second", per_second(predicted_ms, predicted_n)}};
}

Json generation_settings_json(const NativeRequest& nr, const TurnRequest& turn) {
  const SamplingParams& s = nr.gen.sampling;
  Json bias = Json::array();  // llama-server's [[id, bias]], a ban shown as false
  for (const auto& [id, b] : s.logit_bias) bias.push_back(Json::array({id, std::isinf(b) ? Json(false) : Json(b)}));
  return {{"n_predict", nr.gen.max_tokens},
          {"seed", s.seed},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"repeat_last_n", s.repeat_last_n == INT32_MAX ? -1 : s.repeat_last_n},
          {"repeat_penalty", s.repeat_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"stop", nr.gen.stop},
          {"max_tokens", turn.max_tokens},
          {"n_keep", 0},
          {"ignore_eos", nr.gen.ignore_eos},
          {"stream", nr.gen.stream},
          {"logit_bias", std::move(bias)},
          {"n_probs", nr.n_probs},
          {"grammar", nr.grammar},
          {"samplers", Json::array({"penalties", "top_k", "top_p", "min_p", "temperature"})},
          {"cache_prompt", nr.cache_prompt},
          {"timings_per_token", false},
          {"post_sampling_probs", false}};
}

Json native_final_json(const NativeMeta& meta, const Completion& c, int32_t index, const std::string& prompt) {
  Json tokens = Json::array();
  if (meta.return_tokens && !meta.stream) tokens = c.tokens;
  const NativeStop stop = native_stop(c, meta.n_predict);
  Json j = {{"index", index},
            {"content", meta.stream ? std::string() : c.text},
            {"tokens", std::move(tokens)},
            {"id_slot", meta.id_slot},
            {"stop", true},
            {"model", meta.model},
            {"tokens_predicted", int32_t(c.tokens.size())},
            {"tokens_evaluated", c.turn.prompt_tokens},
            {"generation_settings", meta.generation_settings},
            {"prompt", prompt},
            {"has_new_line", c.text.find('\n') != std::string::npos},
            {"truncated", stop.truncated},
            {"stop_type", stop.type},
            {"stopping_word", c.stop_word},
            {"tokens_cached", c.turn.reused},
            {"timings", native_timings_json(c.turn)}};
  if (!meta.stream && meta.n_probs > 0 && !c.logprobs.empty())
    j["completion_probabilities"] = native_probs_json(c.logprobs);
  return j;
}

Json select_response_fields(Json result, const std::vector<std::string>& paths) {
  if (paths.empty()) return result;
  Json out = Json::object();
  for (const std::string& path : paths) {
    const Json* v = &result;
    for (size_t at = 0; v && at <= path.size();) {
      const size_t slash = std::min(path.find('/', at), path.size());
      const auto it = v->is_object() ? v->find(path.substr(at, slash - at)) : v->end();
      v = it == v->end() ? nullptr : &*it;
      at = slash + 1;
    }
    if (v) out[path] = *v;
  }
  return out;
}

Json native_chunk_json(const NativeMeta& meta, int32_t index, const std::string& text,
                       std::span<const TokenInfo> tokens, int32_t tokens_predicted, int32_t tokens_evaluated) {
  std::vector<Token> ids;
  for (const TokenInfo& t : tokens) ids.push_back(t.id);
  Json j = {{"index", index},
            {"content", text},
            {"tokens", std::move(ids)},
            {"stop", false},
            {"id_slot", meta.id_slot},
            {"tokens_predicted", tokens_predicted},
            {"tokens_evaluated", tokens_evaluated}};
  if (meta.n_probs > 0 && !tokens.empty()) j["completion_probabilities"] = native_probs_json(tokens);
  return j;
}

}  // namespace ws::server
