// llama-server's utility routes, with its request and response shapes: POST /tokenize,
// POST /detokenize, POST /apply-template, GET /props. They only translate HTTP into
// tokenizer and template calls; no slot is leased.
#include <httplib.h>

#include <string>

#include "server/api_error.h"
#include "server/http_server.h"

#ifndef WARMSTART_VERSION
#define WARMSTART_VERSION "unknown"
#endif

namespace ws::server {
namespace {

using json = nlohmann::ordered_json;

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += len;
  }
  return true;
}

bool get_flag(const json& body, const char* name, bool def) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return def;
  if (!it->is_boolean()) throw bad_request(std::string("'") + name + "' must be a boolean", name, "invalid_type");
  return it->get<bool>();
}

}  // namespace

void Server::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const auto content = body.find("content");
  if (content == body.end() || !content->is_string())
    throw bad_request("'content' must be a string", "content", content == body.end() ? "missing_required_parameter"
                                                                                    : "invalid_type");
  // llama-server's defaults: no BOS unless asked, special-token text parsed as such.
  const bool add_special = get_flag(body, "add_special", false);
  const bool parse_special = get_flag(body, "parse_special", true);
  const bool with_pieces = get_flag(body, "with_pieces", false);
  const std::vector<Token> ids = tok_.encode(content->get<std::string>(), add_special, parse_special);
  json tokens = json::array();
  for (Token t : ids) {
    if (!with_pieces) {
      tokens.push_back(t);
      continue;
    }
    // A piece that is not whole UTF-8 goes as its bytes, as llama-server sends it.
    const std::string piece = tok_.token_to_piece(t, true);
    json p = piece;
    if (!valid_utf8(piece)) {
      p = json::array();
      for (unsigned char c : piece) p.push_back(int(c));
    }
    tokens.push_back({{"id", t}, {"piece", std::move(p)}});
  }
  res.set_content(dump_json({{"tokens", std::move(tokens)}}), "application/json");
}

void Server::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array())
    throw bad_request("'tokens' must be an array of token ids", "tokens",
                      tokens == body.end() ? "missing_required_parameter" : "invalid_type");
  std::vector<Token> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok_.n_vocab())
      throw bad_request("'tokens' must hold token ids in [0, " + std::to_string(tok_.n_vocab()) + "), got " + t.dump(),
                        "tokens", "invalid_value");
    ids.push_back(Token(t.get<int64_t>()));
  }
  res.set_content(dump_json({{"content", tok_.decode(ids, true)}}), "application/json");
}

void Server::handle_apply_template(const httplib::Request& req, httplib::Response& res) {
  // The body of a chat completion; only messages and tools matter here.
  const json body = parse_body(req.body);
  const ChatRequest cr = parse_chat_request(body, cfg_.allow_local_files);
  const ChatOptions opts = parse_chat_options(body, cr.tools, cfg_.reasoning_format);
  res.set_content(dump_json({{"prompt", chat_.render(cr.messages, cr.tools, opts.template_kwargs).text}}),
                  "application/json");
}

void Server::handle_props(const httplib::Request&, httplib::Response& res) {
  const SamplingParams s;  // what a request that sets nothing gets
  // Floats as their shortest decimal (0.8, not 0.800000011920929).
  auto num = [](float f) { return std::stod(std::to_string(f)); };
  const json params = {{"temperature", num(s.temperature)},
                       {"top_k", s.top_k},
                       {"top_p", num(s.top_p)},
                       {"min_p", num(s.min_p)},
                       {"repeat_penalty", num(s.repeat_penalty)},
                       {"repeat_last_n", s.repeat_last_n},
                       {"presence_penalty", num(s.presence_penalty)},
                       {"frequency_penalty", num(s.frequency_penalty)},
                       {"n_predict", -1}};
  const json props = {
      {"default_generation_settings", {{"n_ctx", cfg_.n_ctx}, {"params", params}}},
      {"total_slots", slots_.size()},
      {"model_alias", cfg_.model_name},
      {"model_path", cfg_.model_path},
      {"chat_template", cfg_.chat_template},
      {"modalities", {{"vision", vision_.context != nullptr}, {"audio", false}}},
      {"build_info", std::string("warmstart ") + WARMSTART_VERSION},
  };
  res.set_content(dump_json(props), "application/json");
}

}  // namespace ws::server
