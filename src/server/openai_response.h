// OpenAI response bodies: chat.completion, chat.completion.chunk, text_completion, with
// usage (cached_tokens = prompt tokens reused from the prefix cache) and llama.cpp-style
// timings.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/generation.h"

namespace ws::server {

enum class ApiKind { chat, text };

// What every chunk and response of one request shares.
struct ResponseMeta {
  ApiKind kind = ApiKind::chat;
  std::string id;     // chatcmpl-… / cmpl-…
  int64_t created = 0;
  std::string model;
  bool include_usage = false;  // streaming: usage: null on each chunk, then a usage chunk
};
ResponseMeta make_meta(ApiKind kind, const std::string& model);

nlohmann::ordered_json usage_json(const TurnResult& turn);
nlohmann::ordered_json timings_json(const TurnResult& turn);

// The whole non-streaming response.
nlohmann::ordered_json completion_json(const ResponseMeta& meta, const Completion& c);

// Streaming chunks. `role_chunk` (chat only): the first chunk, delta {role, content: ""}.
nlohmann::ordered_json role_chunk(const ResponseMeta& meta);
nlohmann::ordered_json text_chunk(const ResponseMeta& meta, const std::string& text);
nlohmann::ordered_json finish_chunk(const ResponseMeta& meta, const Completion& c);
nlohmann::ordered_json usage_chunk(const ResponseMeta& meta, const Completion& c);

// JSON text that never throws on invalid UTF-8 from a model (bad bytes become U+FFFD).
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace ws::server
