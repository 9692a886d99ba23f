#include "server/openai_response.h"

#include <cmath>
#include <ctime>
#include <random>

#include "server/chat_reply.h"

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

json stream_choice(const ResponseMeta& m, json delta, const std::string& text, json finish_reason, int32_t index = 0,
                   json logprobs = nullptr) {
  if (m.kind == ApiKind::chat)
    return {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason}};
  return {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason}};
}

// OpenAI reports an impossible token as -9999.0 (JSON has no -inf).
double logprob_value(float lp) { return std::isfinite(lp) ? double(lp) : -9999.0; }

json bytes_json(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
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

// Tokens of every reply (n > 1: they add up, as OpenAI counts them).
int64_t completion_tokens(const TurnResult& t) {
  if (t.samples.empty()) return int64_t(t.generated.size());
  int64_t n = 0;
  for (const auto& s : t.samples) n += int64_t(s.generated.size());
  return n;
}

json usage_json(const TurnResult& t) {
  const int64_t completion = completion_tokens(t);
  return {{"prompt_tokens", t.prompt_tokens},
          {"completion_tokens", completion},
          {"total_tokens", t.prompt_tokens + completion},
          {"prompt_tokens_details", {{"cached_tokens", t.reused}}}};
}

json timings_json(const TurnResult& t) {
  const int32_t predicted = int32_t(completion_tokens(t));
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
          {"frontier_ms", t.frontier_ms},        // part of predicted_ms (taken after the first token)
          {"cache_tier", t.reuse_tier.empty() ? (t.reused > 0 ? "ram" : "none") : t.reuse_tier},
          {"tier_bytes", t.tier_bytes},          // moved from the tier (disk, redis) for this turn
          {"tier_ms", t.tier_ms}};               // its lookup, transfer and checks (part of prompt_ms)
}

json chat_logprobs_json(std::span<const TokenInfo> tokens) {
  json content = json::array();
  for (const TokenInfo& t : tokens) {
    json top = json::array();
    for (const auto& [piece, lp] : t.top)
      top.push_back({{"token", piece}, {"logprob", logprob_value(lp)}, {"bytes", bytes_json(piece)}});
    content.push_back({{"token", t.piece},
                       {"logprob", logprob_value(t.logprob)},
                       {"bytes", bytes_json(t.piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json text_logprobs_json(std::span<const TokenInfo> tokens, size_t offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenInfo& t : tokens) {
    toks.push_back(t.piece);
    lps.push_back(logprob_value(t.logprob));
    json top = json::object();
    for (const auto& [piece, lp] : t.top)
      if (!top.contains(piece)) top[piece] = logprob_value(lp);  // two tokens may share a piece
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += t.piece.size();
  }
  return {{"tokens", std::move(toks)}, {"token_logprobs", std::move(lps)}, {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json completion_json(const ResponseMeta& m, const Completion& c) { return completion_json(m, std::span(&c, 1)); }

json completion_json(const ResponseMeta& m, std::span<const Completion> completions) {
  json choices = json::array();
  for (const Completion& c : completions) {
    json logprobs = nullptr;
    if (m.logprobs) logprobs = m.kind == ApiKind::chat ? chat_logprobs_json(c.logprobs) : text_logprobs_json(c.logprobs, 0);
    json choice = {{"index", c.index}, {"logprobs", std::move(logprobs)}, {"finish_reason", c.finish_reason}};
    if (m.kind == ApiKind::chat && m.reply.active()) {
      const ParsedReply parsed = parse_reply(m.reply, c.text, false);
      if (!parsed.calls.empty()) choice["finish_reason"] = "tool_calls";
      choice["message"] = chat_message_json(parsed);
    } else if (m.kind == ApiKind::chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else
      choice["text"] = c.text;
    choices.push_back(std::move(choice));
  }
  const TurnResult& turn = completions.front().turn;  // shared by the choices
  return {{"id", m.id},
          {"object", m.kind == ApiKind::chat ? "chat.completion" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", std::move(choices)},
          {"usage", usage_json(turn)},
          {"timings", timings_json(turn)}};
}

json role_chunk(const ResponseMeta& m, int32_t index) {
  // content null, as llama-server sends it: the role chunk carries no text.
  return chunk_base(m, json::array({stream_choice(m, {{"role", "assistant"}, {"content", nullptr}}, "", nullptr, index)}));
}

json text_chunk(const ResponseMeta& m, const std::string& text, int32_t index, std::span<const TokenInfo> tokens,
                size_t offset) {
  json logprobs = nullptr;
  if (m.logprobs) logprobs = m.kind == ApiKind::chat ? chat_logprobs_json(tokens) : text_logprobs_json(tokens, offset);
  return chunk_base(m, json::array({stream_choice(m, {{"content", text}}, text, nullptr, index, std::move(logprobs))}));
}

json delta_chunk(const ResponseMeta& m, json delta, int32_t index, std::span<const TokenInfo> tokens) {
  json logprobs = m.logprobs ? chat_logprobs_json(tokens) : json(nullptr);
  return chunk_base(m, json::array({stream_choice(m, std::move(delta), "", nullptr, index, std::move(logprobs))}));
}

json finish_chunk(const ResponseMeta& m, const Completion& c, bool called) {
  const std::string why = called ? "tool_calls" : c.finish_reason;
  json j = chunk_base(m, json::array({stream_choice(m, json::object(), "", why, c.index)}));
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
