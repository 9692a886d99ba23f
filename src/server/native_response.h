// llama-server's native response bodies for /completion and /infill: the final result
// (content, stop_type, timings, generation_settings, ...) and the streaming chunks.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "server/generation.h"
#include "server/native_request.h"

namespace ws::server {

// What the results of one request share.
struct NativeMeta {
  std::string model;
  int32_t id_slot = 0;  // the slot that ran it
  Json generation_settings;
  bool return_tokens = false;
  bool stream = false;
  int32_t n_predict = -1;  // the request's n_predict: tells a full context from a reached limit
  int32_t n_probs = 0;     // > 0: completion_probabilities
};

// llama-server's generation_settings: the settings this request ran with.
Json generation_settings_json(const NativeRequest& nr, const TurnRequest& turn);

// The whole result of prompt `index` (run_completions with every_token). `prompt`: the
// prompt's text (special tokens shown). Streamed, its content and tokens went out in the
// chunks: they are empty here.
Json native_final_json(const NativeMeta& meta, const Completion& c, int32_t index, const std::string& prompt);

// A streaming chunk: a piece of text with the tokens that completed it.
Json native_chunk_json(const NativeMeta& meta, int32_t index, const std::string& text,
                       std::span<const TokenInfo> tokens, int32_t tokens_predicted, int32_t tokens_evaluated);

// llama-server's timings object (prompt_n counts the computed prompt tokens, cache_n the reused ones).
Json native_timings_json(const TurnResult& t);

// llama-server's response_fields filter: each listed path ("a/b" for a nested field) that
// exists, under its path as the key; a missing one is left out. Empty `paths`: `result`.
Json select_response_fields(Json result, const std::vector<std::string>& paths);

// completion_probabilities: [{id, token, bytes, logprob, top_logprobs: [{id, token, bytes, logprob}]}].
Json native_probs_json(std::span<const TokenInfo> probs);

}  // namespace ws::server
