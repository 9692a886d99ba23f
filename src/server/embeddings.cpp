// POST /v1/embeddings (and /embeddings, as llama-server), with llama-server's request and
// response shapes: input a string, an array of strings, an array of token ids or an
// array of such arrays; data[i].embedding floats (or base64); usage counts input tokens.
#include "server/embeddings.h"

#include <httplib.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "server/api_error.h"
#include "server/http_server.h"

namespace ws::server {

Pooling parse_pooling(const std::string& s) {
  if (s == "mean") return Pooling::mean;
  if (s == "last") return Pooling::last;
  throw std::invalid_argument("--pooling must be mean or last, got '" + s + "'");
}

std::vector<float> embed_tokens(const Model& model, const MemoryOptions& memory, std::span<const Token> tokens,
                                Pooling pooling, int32_t n_ubatch, ThreadPool& pool) {
  const int64_t d = model.config().n_embd;
  SeqState state = model.make_state(memory);
  std::vector<double> sum(size_t(d), 0.0);  // [n_embd] running sum (mean pooling), in double
  std::vector<float> hidden;                 // [ubatch][n_embd] normed final hidden states
  std::vector<float> out(size_t(d), 0.f);    // [n_embd] f32 result
  for (size_t pos = 0; pos < tokens.size(); pos += size_t(n_ubatch)) {
    const auto chunk = tokens.subspan(pos, std::min(tokens.size() - pos, size_t(n_ubatch)));
    hidden.resize(chunk.size() * size_t(d));
    model.forward(Batch{chunk}, state, LogitsMode::hidden, hidden.data(), pool);
    for (size_t t = 0; t < chunk.size(); ++t)
      for (int64_t i = 0; i < d; ++i) sum[size_t(i)] += hidden[t * size_t(d) + size_t(i)];
    if (pos + chunk.size() == tokens.size())
      std::copy(hidden.end() - d, hidden.end(), out.begin());  // the last token's row
  }
  if (pooling == Pooling::mean)
    for (int64_t i = 0; i < d; ++i) out[size_t(i)] = float(sum[size_t(i)] / double(tokens.size()));
  double norm = 0.0;
  for (float v : out) norm += double(v) * v;
  norm = std::sqrt(norm);
  // llama.cpp's embd_normalize 2 (Euclidean), with its guard for an all-zero vector.
  const float scale = norm > 0.0 ? float(1.0 / norm) : 0.f;
  for (float& v : out) v *= scale;
  return out;
}

std::string base64_floats(std::span<const float> v) {
  static constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = char((u >> (8 * b)) & 0xFF);  // little-endian
  }
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = 0;
    for (size_t k = 0; k < 3; ++k) w = (w << 8) | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kB64[(w >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

namespace {

using json = nlohmann::ordered_json;

// Each input as tokens: strings are tokenized (BOS as the model adds it), token arrays kept.
std::vector<std::vector<Token>> embedding_inputs(const json& body, const Tokenizer& tok) {
  const auto it = body.find("input");
  const json* in = it == body.end() || it->is_null() ? nullptr : &*it;
  if (!in) {  // llama-server's own name for it
    const auto c = body.find("content");
    in = c == body.end() || c->is_null() ? nullptr : &*c;
  }
  if (!in) throw bad_request("'input' is required", "input", "missing_required_parameter");
  auto one = [&](const json& v, const std::string& where) {
    std::vector<Token> t;
    if (v.is_string()) {
      t = tok.encode(v.get<std::string>(), true, true);
    } else if (v.is_array()) {
      for (const json& id : v) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.n_vocab())
          throw bad_request("'" + where + "' must hold token ids in [0, " + std::to_string(tok.n_vocab()) + ")", "input",
                            "invalid_value");
        t.push_back(Token(id.get<int64_t>()));
      }
    } else {
      throw bad_request("'" + where + "' must be a string or an array of token ids", "input", "invalid_type");
    }
    if (t.empty()) throw bad_request("'" + where + "' is empty after tokenization", "input", "invalid_value");
    return t;
  };
  std::vector<std::vector<Token>> out;
  // An array of integers is one tokenized input; any other array is a batch.
  if (in->is_array() && !in->empty() && !(*in)[0].is_number_integer()) {
    if (in->size() > 2048) throw bad_request("'input' holds at most 2048 items", "input", "invalid_value");
    for (size_t i = 0; i < in->size(); ++i) out.push_back(one((*in)[i], "input[" + std::to_string(i) + "]"));
  } else {
    out.push_back(one(*in, "input"));
  }
  return out;
}

}  // namespace

void Server::handle_embeddings(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::vector<std::vector<Token>> inputs = embedding_inputs(body, tok_);
  bool base64 = false;
  if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      throw bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format", "invalid_value");
    base64 = *f == "base64";
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (int64_t(inputs[i].size()) > cfg_.n_ctx)
      throw bad_request("input " + std::to_string(i) + " has " + std::to_string(inputs[i].size()) +
                            " tokens, more than this model's context of " + std::to_string(cfg_.n_ctx) +
                            "; shorten it or start the server with a larger -c",
                        "input", "context_length_exceeded");
  json data = json::array();
  int64_t n_tokens = 0;
  {
    // A slot's threads compute it (so embeddings queue with chat requests); the slot's
    // own state and cache entries are left alone.
    SlotPool::Lease lease = slots_.acquire();
    const Engine& e = lease.engine();
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<float> v =
          embed_tokens(e.model(), e.options().memory, inputs[i], cfg_.pooling, e.options().n_ubatch, e.pool());
      n_tokens += int64_t(inputs[i].size());
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", base64 ? json(base64_floats(v)) : json(v)}});
    }
  }
  const auto m = body.find("model");
  res.set_content(dump_json({{"object", "list"},
                             {"data", std::move(data)},
                             {"model", m != body.end() && m->is_string() ? m->get<std::string>() : cfg_.model_name},
                             {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}}),
                  "application/json");
}

}  // namespace ws::server
