// Gemma 3: interleaved sliding-window / global attention, Q/K RMSNorm, NEOX RoPE with a
// different base per layer kind, sandwich norms (post_attention_norm, post_ffw_norm) and
// a GELU-gated FFN. Sliding layers keep only their window (SlidingKvState); global
// layers keep everything (FullKvState).
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/decoder.h"
#include "models/registry.h"

namespace ws {
namespace {

struct Gemma3Layer {
  bool sliding;                 // window-limited attention with the SWA rope base
  const float* attn_norm;       // [n_embd]
  ops::AttnWeights attn;        // with Q/K norms
  const float* post_attn_norm;  // [n_embd]
  const float* ffn_norm;        // [n_embd]
  ops::SwigluFfn ffn;           // gated by GELU, not SiLU (ops::gelu_ffn)
  const float* post_ffw_norm;   // [n_embd]
};

class Gemma3Model final : public Decoder {
 public:
  Gemma3Model(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = RopeType::neox;
    require_attention_and_ffn(f, cfg_);
    window_ = int32_t(keys.require_int("attention.sliding_window"));
    // Real Gemma 3 files may omit the pattern; llama.cpp then uses 6 (5 sliding, 1 global).
    const int64_t pattern = keys.get_int("attention.sliding_window_pattern", 6);
    if (pattern <= 0) f.fail(arch + ".attention.sliding_window_pattern must be positive");
    // llama.cpp scales Q by 1/sqrt(head_dim) after RoPE and calls attention with scale 1.
    attn_global_ = ops::attention_options(cfg_);
    attn_global_.q_scale = attn_global_.scale;
    attn_global_.scale = 1.0f;
    attn_sliding_ = attn_global_;
    attn_sliding_.rope.base = float(keys.get_float("rope.freq_base_swa", 10000.0));
    attn_sliding_.window = window_;
    emb_ = ops::load_embeddings(f, cfg_);
    // Only token embeddings are scaled; input embeddings (an image's) come ready to use.
    embed_scale_ = std::sqrt(float(cfg_.n_embd));
    non_causal_ok_ = true;
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i, i % pattern < pattern - 1));
  }

 private:
  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    if (layers_[il].sliding) return sliding_kv_memory(cfg_.n_head_kv, cfg_.head_dim, window_, opts);
    return full_kv_memory(cfg_.n_head_kv, cfg_.head_dim, opts);
  }

  // Sandwich norms: x += post_norm(branch(pre_norm(x))) for attention, then the FFN.
  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const Gemma3Layer& l = layers_[il];
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      ops::attention_block(l.attn, l.sliding ? attn_sliding_ : attn_global_, il, p.seqs, xn, p.n, out, p.pool);
      ops::rms_norm(out, l.post_attn_norm, out, p.n, cfg_.n_embd, cfg_.rms_eps);
    });
    pre_norm(x, l.ffn_norm, p, [&](const float* xn, float* out) {
      ops::gelu_ffn(l.ffn, xn, p.n, out, p.pool);
      ops::rms_norm(out, l.post_ffw_norm, out, p.n, cfg_.n_embd, cfg_.rms_eps);
    });
  }

  Gemma3Layer load_layer(const gguf::File& f, int32_t i, bool sliding) const {
    const std::string p = layer_prefix(i);
    const int64_t d = cfg_.n_embd;
    Gemma3Layer l{};
    l.sliding = sliding;
    l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
    l.attn = ops::load_attention(f, p, d, cfg_.n_head, cfg_.n_head_kv, cfg_.head_dim, /*qk_norm=*/true);
    l.post_attn_norm = ops::vector_f32(f, p + "post_attention_norm.weight", d);
    l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
    l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff);
    l.post_ffw_norm = ops::vector_f32(f, p + "post_ffw_norm.weight", d);
    return l;
  }

  int32_t window_ = 0;             // sliding window (positions a query sees, itself included)
  ops::AttnOptions attn_global_;   // global layers: rope.freq_base, no window
  ops::AttnOptions attn_sliding_;  // sliding layers: rope.freq_base_swa, window_
  std::vector<Gemma3Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gemma3(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Gemma3Model>(f, arch);
}

}  // namespace ws
