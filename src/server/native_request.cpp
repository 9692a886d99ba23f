#include "server/native_request.h"

#include <algorithm>
#include <cmath>

#include "server/api_error.h"
#include "server/generation.h"

namespace ws::server {

using namespace fields;

namespace {

// n_probs above this would make every token's report a sort of much of the vocabulary.
constexpr int64_t kMaxProbs = 100;

bool is_token_id(const Json& v) { return v.is_number_integer(); }

// llama-server's json_is_array_of_numbers: a non-empty list of token ids.
bool all_ids(const Json& v) {
  return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), is_token_id);
}

// llama-server's json_is_array_of_mixed_numbers_strings: ids and strings, at least one of each.
bool mixed_ids_and_strings(const Json& v) {
  if (!v.is_array()) return false;
  bool id = false, str = false;
  for (const Json& e : v) {
    if (is_token_id(e)) id = true;
    else if (e.is_string()) str = true;
    else return false;
  }
  return id && str;
}

Token checked_id(const Tokenizer& tok, const Json& v, const std::string& where) {
  const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  if (id < 0 || id >= tok.n_vocab())
    throw bad_request("'" + where + "' holds token " + v.dump() + ", but the vocabulary has ids 0 to " +
                          std::to_string(tok.n_vocab() - 1),
                      where, "invalid_value");
  return Token(id);
}

}  // namespace

std::vector<Token> tokenize_mixed(const Tokenizer& tok, const Json& v, bool add_special, bool parse_special,
                                  const std::string& param) {
  if (v.is_string()) return tok.encode(v.get<std::string>(), add_special, parse_special);
  if (!v.is_array()) throw wrong_type(param, "a string or a list of strings and token ids", v);
  std::vector<Token> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    if (is_token_id(e)) {
      out.push_back(checked_id(tok, e, param));
    } else if (e.is_string()) {
      // As llama-server: only a leading string gets BOS/EOS.
      const std::vector<Token> t = tok.encode(e.get<std::string>(), add_special && i == 0, parse_special);
      out.insert(out.end(), t.begin(), t.end());
    } else {
      throw wrong_type(param + "[" + std::to_string(i) + "]", "a string or a token id", e);
    }
  }
  return out;
}

std::vector<std::vector<Token>> parse_prompts(const Tokenizer& tok, const Json& prompt, const char* param,
                                              bool* multiple) {
  *multiple = false;
  if (prompt.is_string() || mixed_ids_and_strings(prompt) || all_ids(prompt))
    return {tokenize_mixed(tok, prompt, true, true, param)};
  if (!prompt.is_array() || prompt.empty())
    throw bad_request(std::string("'") + param +
                          "' must be a string, a list of token ids, a list of strings and token ids, or a list of "
                          "prompts",
                      param, "invalid_type");
  *multiple = true;
  std::vector<std::vector<Token>> out;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const Json& p = prompt[i];
    const std::string where = std::string(param) + "[" + std::to_string(i) + "]";
    if (!p.is_string() && !mixed_ids_and_strings(p) && !all_ids(p))
      throw wrong_type(where, "a string, a list of token ids or a list of strings and token ids", p);
    out.push_back(tokenize_mixed(tok, p, true, true, where));
  }
  return out;
}

NativeRequest parse_native_options(const Json& body, int32_t n_predict_default) {
  NativeRequest r;
  // Sampling, stop, grammar / json_schema, stream and model: the OpenAI routes' parser.
  r.gen = parse_generation(body, nullptr, /*openai_lengths=*/false);
  // n_predict wins over max_tokens, as in llama-server; -1 is no limit, 0 only evaluates the prompt.
  const int64_t max_tokens = get_int(body, "max_tokens", n_predict_default, -1, INT32_MAX);
  r.gen.max_tokens = int32_t(get_int(body, "n_predict", max_tokens, -1, INT32_MAX));
  r.n_probs = int32_t(get_int(body, "n_probs", 0, 0, kMaxProbs));
  r.cache_prompt = get_bool(body, "cache_prompt", true);
  r.return_tokens = get_bool(body, "return_tokens", false);
  r.return_progress = get_bool(body, "return_progress", false);
  r.id_slot = int32_t(get_int(body, "id_slot", -1, -1, INT32_MAX));
  if (const Json* g = field(body, "grammar"); g && g->is_string()) r.grammar = g->get<std::string>();
  if (const Json* f = field(body, "response_fields")) {
    if (!f->is_array()) throw wrong_type("response_fields", "an array of strings", *f);
    for (const Json& name : *f) {
      if (!name.is_string()) throw wrong_type("response_fields", "an array of strings", name);
      r.response_fields.push_back(name.get<std::string>());
    }
  }
  // Several completions of one prompt are not implemented: refused rather than answered once.
  if (get_int(body, "n_cmpl", 1, 1, INT32_MAX) != 1)
    throw bad_request("'n_cmpl' is not supported (one completion per prompt)", "n_cmpl", "unsupported_parameter");
  return r;
}

TurnRequest make_native_turn(const Tokenizer& tok, std::vector<Token> prompt, const NativeRequest& nr, int32_t n_ctx,
                             const std::string& param) {
  const int32_t n = int32_t(prompt.size());
  if (n == 0) throw bad_request("'" + param + "' is empty after tokenization", param, "invalid_value");
  // The engine needs room for the prompt and at least one generated token.
  if (n >= n_ctx)
    throw bad_request("this model's context holds " + std::to_string(n_ctx) + " tokens, but '" + param + "' has " +
                          std::to_string(n) + " tokens; shorten it or start the server with a larger -c",
                      param, "context_length_exceeded");
  TurnRequest r;
  r.prompt = std::move(prompt);
  const int32_t room = n_ctx - n;
  r.max_tokens = nr.gen.max_tokens < 0 ? room : std::min(nr.gen.max_tokens, room);
  apply_generation(tok, nr.gen, r);
  r.n_samples = 1;
  return r;
}

std::string infill_unsupported(const FimTokens& fim) {
  std::string err;
  if (fim.pre < 0) err += "prefix token is missing. ";
  if (fim.suf < 0) err += "suffix token is missing. ";
  if (fim.mid < 0) err += "middle token is missing. ";
  return err.empty() ? err : "Infill is not supported by this model: " + err;
}

InfillInput parse_infill_input(const Json& body) {
  InfillInput in;
  if (const Json* p = field(body, "prompt")) {
    if (!p->is_string()) throw wrong_type("prompt", "a string", *p);
    in.prompt = p->get<std::string>();
  }
  for (const char* name : {"input_prefix", "input_suffix"}) {
    const Json* v = field(body, name);
    if (!v) throw bad_request("'" + std::string(name) + "' is required", name, "missing_required_parameter");
    (std::string(name) == "input_prefix" ? in.input_prefix : in.input_suffix) = *v;
  }
  in.input_extra = Json::array();
  if (const Json* extra = field(body, "input_extra")) {
    if (!extra->is_array()) throw wrong_type("input_extra", "an array of {\"filename\": string, \"text\": string}", *extra);
    for (size_t i = 0; i < extra->size(); ++i) {
      const Json& chunk = (*extra)[i];
      const std::string at = "input_extra[" + std::to_string(i) + "]";
      if (!chunk.is_object()) throw wrong_type(at, "an object {\"filename\": string, \"text\": string}", chunk);
      const Json* text = field(chunk, "text");
      if (!text || !text->is_string())
        throw bad_request("'" + at + ".text' is required and must be a string", at + ".text", "invalid_type");
      if (const Json* name = field(chunk, "filename"); name && !name->is_string())
        throw wrong_type(at + ".filename", "a string", *name);
    }
    in.input_extra = *extra;
  }
  return in;
}

std::vector<Token> format_infill(const Tokenizer& tok, const FimTokens& fim, const InfillInput& in, int32_t n_batch,
                                 int32_t n_predict, int32_t n_ctx) {
  auto plain = [&](const std::string& s) { return tok.encode(s, false, false); };
  auto append = [](std::vector<Token>& to, const std::vector<Token>& from) { to.insert(to.end(), from.begin(), from.end()); };
  std::vector<Token> prefix = tokenize_mixed(tok, in.input_prefix, false, false, "input_prefix");
  std::vector<Token> suffix = tokenize_mixed(tok, in.input_suffix, false, false, "input_suffix");
  const std::vector<Token> prompt = tok.encode(in.prompt, false, true);

  // Repo-level pattern (arXiv 2409.12186) when the model has the tokens, else plain snippets.
  std::vector<Token> extra;
  if (fim.rep >= 0) {
    extra.push_back(fim.rep);
    append(extra, plain("myproject\n"));
  }
  for (const Json& chunk : in.input_extra) {
    const std::string filename = chunk.contains("filename") && chunk["filename"].is_string()
                                     ? chunk["filename"].get<std::string>() : "tmp";
    if (fim.sep >= 0) {
      extra.push_back(fim.sep);
      append(extra, plain(filename + "\n"));
    } else {
      append(extra, plain("\n\n--- snippet ---\n\n"));
    }
    append(extra, plain(chunk["text"].get<std::string>()));
  }
  if (fim.sep >= 0) {
    extra.push_back(fim.sep);
    append(extra, plain("filename\n"));
  }

  // llama-server's split of one batch: 3/4 for the prefix's end, 1/4 for the suffix's start.
  const int64_t n_prefix_take = std::min<int64_t>(int64_t(prefix.size()), 3 * (n_batch / 4));
  const int64_t n_suffix_take =
      std::min<int64_t>(int64_t(suffix.size()), std::max<int64_t>(0, n_batch / 4 - (2 + int64_t(prompt.size()))));
  const int64_t n_extra_take =
      std::min<int64_t>(std::max<int64_t>(0, int64_t(n_ctx) - n_batch - 2 * int64_t(n_predict)), int64_t(extra.size()));
  prefix.erase(prefix.begin(), prefix.end() - n_prefix_take);
  suffix.resize(size_t(n_suffix_take));

  std::vector<Token> out(extra.end() - n_extra_take, extra.end());
  if (tok.add_bos()) out.push_back(tok.bos());
  out.push_back(fim.pre);
  append(out, prefix);
  append(out, prompt);  // where llama-server's format_infill puts it: after the prefix
  out.push_back(fim.suf);
  append(out, suffix);
  out.push_back(fim.mid);
  return out;
}

}  // namespace ws::server
