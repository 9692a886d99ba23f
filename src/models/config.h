// Reading `{arch}.*` hyper-parameters from GGUF metadata with errors that name the key.
#pragma once
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "models/model.h"

namespace ws {

class ArchKeys {
 public:
  ArchKeys(const gguf::File& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  const std::string& arch() const { return arch_; }
  int64_t require_int(const std::string& key) const;               // "{arch}.key", must be > 0
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_float(const std::string& key, double def) const;
  std::vector<int64_t> get_ints(const std::string& key) const;     // scalar or per-layer array

 private:
  const gguf::File& f_;
  std::string arch_;
};

// The attention/FFN shape keys shared by every architecture; n_vocab from the token list.
// head_count_kv and feed_forward_length may be per-layer arrays (hybrids).
ModelConfig read_common_config(const gguf::File& f, const std::string& arch);
// The longest context the model is meant for: n_ctx_train (`{arch}.context_length`, which
// converters already set to the scaled length), or, when the file stores the pre-scaling
// length with a YaRN / linear `rope.scaling.factor` and `original_context_length`, that
// length times the factor if larger. llama.cpp compares -c with n_ctx_train alone.
int32_t usable_context(const gguf::File& f, const ModelConfig& c);
// Fails unless every layer has attention heads and an FFN (the dense families).
void require_attention_and_ffn(const gguf::File& f, const ModelConfig& c);

}  // namespace ws
