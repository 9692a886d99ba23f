#include "models/config.h"

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

ModelConfig read_common_config(const gguf::File& f, const std::string& arch) {
  const ArchKeys k(f, arch);
  ModelConfig c;
  c.arch = arch;
  c.model_id = model_identity(f);
  c.n_embd = int32_t(k.require_int("embedding_length"));
  c.n_layer = int32_t(k.require_int("block_count"));
  c.n_head = int32_t(k.get_int("attention.head_count", 0));
  const auto kv = k.get_ints("attention.head_count_kv");
  c.n_head_kv = kv.empty() ? c.n_head : int32_t(kv[0]);
  c.n_ff = int32_t(k.get_int("feed_forward_length", 0));
  c.n_ctx_train = int32_t(k.get_int("context_length", 4096));
  c.rms_eps = float(k.get_float("attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = float(k.get_float("rope.freq_base", 10000.0));
  c.head_dim = c.n_head > 0 ? int32_t(k.get_int("attention.key_length", c.n_embd / c.n_head)) : 0;
  c.n_rot = int32_t(k.get_int("rope.dimension_count", c.head_dim));
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  const auto* emb = f.find_tensor("token_embd.weight");
  if (tokens && tokens->type == gguf::ValueType::array) {
    c.n_vocab = int32_t(tokens->as_array().items.size());
  } else if (emb && emb->ne.size() == 2) {
    c.n_vocab = int32_t(emb->ne[1]);
  } else {
    f.fail("cannot determine the vocabulary size (no tokenizer.ggml.tokens, no token_embd.weight)");
  }
  if (c.n_head > 0 && (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0))
    f.fail("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
           std::to_string(c.n_head_kv));
  if (c.n_rot > c.head_dim || c.n_rot % 2) f.fail("rope.dimension_count " + std::to_string(c.n_rot) + " is invalid");
  return c;
}

}  // namespace ws
