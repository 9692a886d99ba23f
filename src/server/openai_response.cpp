#include "server/openai_response.h"

#include <ctime>
#include <random>

namespace ws::server {

using json = nlohmann::ordered_json;

namespace {

std::string random_hex(size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::string s;
  for (size_t i = 0; i < n; ++i) s += kHex[rd() % 16];
  return s;
}

json chunk_base(const ResponseMeta& m, json choices) {
  json j = {{"id", m.id},
            {"object", m.kind == ApiKind::chat ? "chat.completion.chunk" : "text_completion"},
            {"created", m.created},
            {"model", m.model},
            {"choices", std::move(choices)}};
  if (m.include_usage) j["usage"] = nullptr;
  return j;
}

json stream_choice(const ResponseMeta& m, json delta, const std::string& text, json finish_reason) {
  if (m.kind == ApiKind::chat)
    return {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  return {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
}

}  // namespace

ResponseMeta make_meta(ApiKind kind, const std::string& model) {
  ResponseMeta m;
  m.kind = kind;
  m.id = (kind == ApiKind::chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
  m.created = int64_t(std::time(nullptr));
  m.model = model;
  return m;
}

json usage_json(const TurnResult& t) {
  const int64_t completion = int64_t(t.generated.size());
  return {{"prompt_tokens", t.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", t.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", t.reused}}}};
}

json timings_json(const TurnResult& t) {
  const int32_t predicted = int32_t(t.generated.size());
  const double predicted_ms = std::max(0.0, t.total_ms - t.ttft_ms);
  const int32_t prompt_n = t.prompt_tokens - t.reused;
  return {{"prompt_n", prompt_n},
          {"prompt_ms", t.ttft_ms},
          {"prompt_per_second", t.ttft_ms > 0 ? prompt_n * 1000.0 / t.ttft_ms : 0.0},
          {"predicted_n", predicted},
          {"predicted_ms", predicted_ms},
          {"predicted_per_second", predicted_ms > 0 ? predicted * 1000.0 / predicted_ms : 0.0},
          {"cache_n", t.reused},
          {"restore_ms", t.restore_ms},          // warmstart's own: parts of prompt_ms
          {"checkpoint_ms", t.checkpoint_ms},
          {"frontier_ms", t.frontier_ms}};       // part of predicted_ms (taken after the first token)
}

json completion_json(const ResponseMeta& m, const Completion& c) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}};
  if (m.kind == ApiKind::chat)
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  else
    choice["text"] = c.text;
  return {{"id", m.id},
          {"object", m.kind == ApiKind::chat ? "chat.completion" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(c.turn)},
          {"timings", timings_json(c.turn)}};
}

json role_chunk(const ResponseMeta& m) {
  return chunk_base(m, json::array({stream_choice(m, {{"role", "assistant"}, {"content", ""}}, "", nullptr)}));
}

json text_chunk(const ResponseMeta& m, const std::string& text) {
  return chunk_base(m, json::array({stream_choice(m, {{"content", text}}, text, nullptr)}));
}

json finish_chunk(const ResponseMeta& m, const Completion& c) {
  json j = chunk_base(m, json::array({stream_choice(m, json::object(), "", c.finish_reason)}));
  j["timings"] = timings_json(c.turn);  // llama.cpp's server reports timings on the last chunk
  return j;
}

json usage_chunk(const ResponseMeta& m, const Completion& c) {
  json j = chunk_base(m, json::array());
  j["usage"] = usage_json(c.turn);
  j["timings"] = timings_json(c.turn);
  return j;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace ws::server
