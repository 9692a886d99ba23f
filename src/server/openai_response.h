// OpenAI response bodies: chat.completion, chat.completion.chunk, text_completion, with
// usage (cached_tokens = prompt tokens reused from the prefix cache) and llama.cpp-style
// timings.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "server/generation.h"
#include "server/tool_calls.h"

namespace ws::server {

enum class ApiKind { chat, text };

// What every chunk and response of one request shares.
struct ResponseMeta {
  ApiKind kind = ApiKind::chat;
  std::string id;     // chatcmpl-… / cmpl-…
  int64_t created = 0;
  std::string model;
  bool include_usage = false;  // streaming: usage: null on each chunk, then a usage chunk
  bool logprobs = false;       // choices carry logprobs objects (else "logprobs": null)
  // Chat: how replies are split into reasoning_content, content and tool_calls (inactive:
  // the text is the content as generated).
  ReplySyntax reply;
};
ResponseMeta make_meta(ApiKind kind, const std::string& model);

nlohmann::ordered_json usage_json(const TurnResult& turn);
nlohmann::ordered_json timings_json(const TurnResult& turn);

// The whole non-streaming response: one choice per completion (n > 1: index 0..n-1).
nlohmann::ordered_json completion_json(const ResponseMeta& meta, const Completion& c);
nlohmann::ordered_json completion_json(const ResponseMeta& meta, std::span<const Completion> choices);

// logprobs objects. Chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal"};
// completions: {tokens, token_logprobs, top_logprobs, text_offset}, offsets counted from
// `offset` (bytes of the reply's text before these tokens).
nlohmann::ordered_json chat_logprobs_json(std::span<const TokenInfo> tokens);
nlohmann::ordered_json text_logprobs_json(std::span<const TokenInfo> tokens, size_t offset);

// Streaming chunks. `role_chunk` (chat only): the first chunk of a choice, delta {role, content: null}.
// `index`: the choice; `tokens`/`offset`: logprobs of this text when meta.logprobs.
nlohmann::ordered_json role_chunk(const ResponseMeta& meta, int32_t index = 0);
nlohmann::ordered_json text_chunk(const ResponseMeta& meta, const std::string& text, int32_t index = 0,
                                  std::span<const TokenInfo> tokens = {}, size_t offset = 0);
// A chat chunk whose delta is `delta` (reasoning_content, content or tool_calls).
nlohmann::ordered_json delta_chunk(const ResponseMeta& meta, nlohmann::ordered_json delta, int32_t index,
                                   std::span<const TokenInfo> tokens = {});
// `called`: the choice made tool calls (finish_reason "tool_calls", as OpenAI and llama-server).
nlohmann::ordered_json finish_chunk(const ResponseMeta& meta, const Completion& c, bool called = false);
nlohmann::ordered_json usage_chunk(const ResponseMeta& meta, const Completion& c);

// JSON text that never throws on invalid UTF-8 from a model (bad bytes become U+FFFD).
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace ws::server
