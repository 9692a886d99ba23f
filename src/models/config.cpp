#include "models/config.h"

#include <algorithm>
#include <climits>

namespace ws {

int64_t ArchKeys::require_int(const std::string& key) const {
  const int64_t v = f_.require(arch_ + "." + key).as_int();
  if (v <= 0) f_.fail("key '" + arch_ + "." + key + "' must be positive, found " + std::to_string(v));
  return v;
}
int64_t ArchKeys::get_int(const std::string& key, int64_t def) const { return f_.get_int(arch_ + "." + key, def); }
double ArchKeys::get_float(const std::string& key, double def) const {
  return f_.get_float(arch_ + "." + key, def);
}
std::vector<int64_t> ArchKeys::get_ints(const std::string& key) const { return f_.get_ints(arch_ + "." + key); }

namespace {

// A scalar key applies to every layer; an array must hold one entry per layer. An absent
// key gives `def` everywhere.
std::vector<int32_t> per_layer(const gguf::File& f, const ArchKeys& k, const std::string& key, int32_t n_layer,
                               int32_t def) {
  const auto v = k.get_ints(key);
  if (v.size() > 1 && v.size() != size_t(n_layer))
    f.fail("key '" + k.arch() + "." + key + "' has " + std::to_string(v.size()) + " entries, expected 1 or " +
           std::to_string(n_layer));
  std::vector<int32_t> out(size_t(n_layer), def);
  for (size_t i = 0; i < out.size() && !v.empty(); ++i) out[i] = int32_t(v.size() == 1 ? v[0] : v[i]);
  return out;
}

int32_t read_vocab_size(const gguf::File& f, const ArchKeys& k) {
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens && tokens->type == gguf::ValueType::array) return int32_t(tokens->as_array().items.size());
  if (const int64_t v = k.get_int("vocab_size", 0); v > 0) return int32_t(v);
  const auto* emb = f.find_tensor("token_embd.weight");
  if (emb && emb->ne.size() == 2) return int32_t(emb->ne[1]);
  f.fail("cannot determine the vocabulary size (no tokenizer.ggml.tokens, no " + k.arch() +
         ".vocab_size, no token_embd.weight)");
}

// head_count_kv per layer: 0 means no attention there, only allowed when it is per layer
// (a scalar 0 with attention heads is a broken file).
void check_heads(const gguf::File& f, const ArchKeys& k, ModelConfig& c) {
  const bool scalar = k.get_ints("attention.head_count_kv").size() <= 1;
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const int32_t kv = c.n_head_kv_per_layer[size_t(i)];
    const bool bad = kv < 0 || (kv == 0 && scalar && c.n_head > 0) || (kv > 0 && (c.n_head <= 0 || c.n_head % kv));
    if (bad)
      f.fail("layer " + std::to_string(i) + ": head_count " + std::to_string(c.n_head) +
             " is not a multiple of head_count_kv " + std::to_string(kv));
    c.n_head_kv = std::max(c.n_head_kv, kv);
    c.n_ff = std::max(c.n_ff, c.n_ff_per_layer[size_t(i)]);
  }
}

}  // namespace

ModelConfig read_common_config(const gguf::File& f, const std::string& arch) {
  const ArchKeys k(f, arch);
  ModelConfig c;
  c.arch = arch;
  c.model_id = model_identity(f);
  c.n_embd = int32_t(k.require_int("embedding_length"));
  c.n_layer = int32_t(k.require_int("block_count"));
  c.n_head = int32_t(k.get_int("attention.head_count", 0));
  c.n_head_kv_per_layer = per_layer(f, k, "attention.head_count_kv", c.n_layer, c.n_head);
  c.n_ff_per_layer = per_layer(f, k, "feed_forward_length", c.n_layer, 0);
  c.n_ctx_train = int32_t(k.get_int("context_length", 4096));
  c.rms_eps = float(k.get_float("attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = float(k.get_float("rope.freq_base", 10000.0));
  c.head_dim = c.n_head > 0 ? int32_t(k.get_int("attention.key_length", c.n_embd / c.n_head)) : 0;
  c.n_rot = int32_t(k.get_int("rope.dimension_count", c.head_dim));
  c.n_vocab = read_vocab_size(f, k);
  check_heads(f, k, c);
  if (c.n_rot > c.head_dim || c.n_rot % 2) f.fail("rope.dimension_count " + std::to_string(c.n_rot) + " is invalid");
  return c;
}

int32_t usable_context(const gguf::File& f, const ModelConfig& c) {
  const std::string type = f.get_string(c.arch + ".rope.scaling.type");
  const double factor = f.get_float(c.arch + ".rope.scaling.factor", 0.0);
  const int64_t original = f.get_int(c.arch + ".rope.scaling.original_context_length", 0);
  if ((type != "yarn" && type != "linear") || factor <= 1.0 || original <= 0) return c.n_ctx_train;
  const double scaled = std::min(double(INT32_MAX), double(original) * factor);
  return std::max(c.n_ctx_train, int32_t(scaled));
}

void require_attention_and_ffn(const gguf::File& f, const ModelConfig& c) {
  const auto zero = [](const std::vector<int32_t>& v) { return std::find(v.begin(), v.end(), 0) != v.end(); };
  if (c.n_head <= 0 || zero(c.n_head_kv_per_layer) || zero(c.n_ff_per_layer))
    f.fail(c.arch + ": attention.head_count, head_count_kv and feed_forward_length are required in every layer");
}

}  // namespace ws
