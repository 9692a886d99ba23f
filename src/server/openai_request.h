// OpenAI request bodies -> validated parameters. Every type or range error becomes an
// ApiError (400) that names the offending field, so clients see what to fix.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/sampling.h"
#include "grammar/grammar.h"
#include "server/api_error.h"

namespace ws::server {

struct GenerationOptions {
  int32_t max_tokens = -1;  // -1: until the context is full or the model stops
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop sequences on the generated text
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string model;           // the request's `model`, echoed back (any value is accepted)
  // response_format / grammar / json_schema, compiled; null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  int32_t n = 1;               // replies to one prompt computation
  // < 0: no logprobs; otherwise each token's logprob with this many alternatives (chat:
  // logprobs + top_logprobs; completions: logprobs).
  int32_t logprobs = -1;
  bool ignore_eos = false;  // llama-server's: every end-of-generation token is banned
};

// Bodies are kept as ordered_json: templates tojson messages and tools, and clients
// expect their keys in the order they sent them (as Python's json keeps them).
using Json = nlohmann::ordered_json;

struct ChatRequest {
  Json messages;  // validated; array content parts flattened to strings
  // Encoded bytes of the image_url parts, in order; each left kMediaMarker in its
  // message's text.
  std::vector<std::vector<uint8_t>> images;
  Json tools;     // null when absent
  GenerationOptions gen;
};

struct CompletionRequest {
  std::string prompt;
  GenerationOptions gen;
};

// Typed readers of request fields, shared by the OpenAI and llama-server parsers. A null
// field counts as absent (as in OpenAI's API); a wrong type or a value out of [lo, hi] is
// a 400 naming the field.
namespace fields {
const char* type_name(const Json& v);
ApiError wrong_type(const std::string& field, const char* expected, const Json& got);
const Json* field(const Json& body, const char* name);  // nullptr when absent or null
double get_number(const Json& body, const char* name, double def, double lo, double hi);
int64_t get_int(const Json& body, const char* name, int64_t def, int64_t lo, int64_t hi);
bool get_bool(const Json& body, const char* name, bool def);
}  // namespace fields

// The sampling, stop, grammar, stream and model fields every text-generating route shares.
// `max_tokens_field`: a second name for max_tokens (chat: max_completion_tokens).
// `openai_lengths`: read OpenAI's `n` and `max_tokens` (llama-server's /completion reads
// its own n_predict / max_tokens, with other ranges).
GenerationOptions parse_generation(const Json& body, const char* max_tokens_field, bool openai_lengths = true);

// Parses a request body; malformed JSON or a non-object is a 400.
Json parse_body(const std::string& body);

// `allow_local_files`: file:// image URLs are read (serve --allow-local-files).
ChatRequest parse_chat_request(const Json& body, bool allow_local_files = false);
CompletionRequest parse_completion_request(const Json& body);

}  // namespace ws::server
