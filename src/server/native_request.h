// llama-server's native request bodies (POST /completion, POST /infill) -> validated
// parameters and prompt tokens. The sampling fields are parsed by the same code as the
// OpenAI routes (parse_generation); what is llama-server's own is here: its prompt shapes,
// n_predict, n_probs, the per-request switches and the fill-in-the-middle prompt.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/turn.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace ws::server {

struct NativeRequest {
  // One entry per prompt: a list of prompts gets one result each (an array in the reply).
  std::vector<std::vector<Token>> prompts;
  bool multiple = false;  // the prompt was a list of prompts: the reply is an array
  GenerationOptions gen;  // gen.max_tokens: n_predict (-1: no limit; 0: evaluate the prompt only)
  int32_t n_probs = 0;    // > 0: completion_probabilities with this many alternatives
  bool cache_prompt = true;
  bool return_tokens = false;
  bool return_progress = false;
  int32_t id_slot = -1;
  std::string grammar;  // the `grammar` text as sent (echoed in generation_settings)
  // llama-server's response_fields: only these fields of each result ("a/b" lifts a nested
  // field to the top level under that name); empty: all of them.
  std::vector<std::string> response_fields;
};

// The body's fields except `prompt`. `n_predict_default`: the server's --n-predict, used
// when the request sets neither n_predict nor max_tokens.
NativeRequest parse_native_options(const Json& body, int32_t n_predict_default);

// llama-server's prompt shapes: a string, a list of token ids, a list mixing strings and
// ids (one prompt), or a list of those (several prompts). Strings are tokenized with
// special tokens parsed and, when the prompt starts with a string, BOS/EOS as the model
// says. Ids are checked against the vocabulary. `param` names the field in errors.
std::vector<std::vector<Token>> parse_prompts(const Tokenizer& tok, const Json& prompt, const char* param,
                                              bool* multiple);

// One prompt element of the mixed kind (a string or a list of strings and ids), tokenized.
std::vector<Token> tokenize_mixed(const Tokenizer& tok, const Json& v, bool add_special, bool parse_special,
                                  const std::string& param);

// The turn for one prompt: its room is what the context leaves (n_predict < 0) or
// n_predict, whichever is smaller; ignore_eos bans every end-of-generation token.
// `param` names the prompt field in errors (empty or too long a prompt is a 400).
TurnRequest make_native_turn(const Tokenizer& tok, std::vector<Token> prompt, const NativeRequest& nr, int32_t n_ctx,
                             const std::string& param);

// llama-server's message when the model lacks one of the FIM pre/suf/mid tokens (its
// /infill answers 501 with it); empty when infill works.
std::string infill_unsupported(const FimTokens& fim);

struct InfillInput {
  Json input_prefix, input_suffix;  // strings or mixed lists
  Json input_extra;                 // [{filename, text}]
  std::string prompt;               // goes after the FIM middle token
};
// The /infill fields, with llama-server's checks and messages.
InfillInput parse_infill_input(const Json& body);

// llama-server's format_infill: the extra chunks (repo-level pattern when the model has
// FIM_REP / FIM_SEP tokens), [BOS], FIM_PRE prefix prompt, FIM_SUF suffix, FIM_MID (its
// code puts `prompt` after the prefix, though its README says after FIM_MID). The prefix
// keeps its last 3/4 of a batch, the suffix its first 1/4 of a batch less the prompt, the
// extra context the end of what the context has left beyond a batch and 2 x n_predict.
std::vector<Token> format_infill(const Tokenizer& tok, const FimTokens& fim, const InfillInput& in, int32_t n_batch,
                                 int32_t n_predict, int32_t n_ctx);

}  // namespace ws::server
