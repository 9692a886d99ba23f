// Granite-4.0-H (granitehybrid): Mamba-2 layers (head_count_kv[i] == 0) and attention
// layers, each followed by an FFN. embedding_scale multiplies the input embedding,
// residual_scale both branch outputs, attention.scale replaces 1/sqrt(hd), and the logits
// are divided by logit_scale. rope.scaling.finetuned == false means no RoPE at all.
// With expert_count > 0 (Granite-4.0-H-Tiny/Small) every FFN is a softmax-routed mixture
// of experts of width feed_forward_length plus an ungated SwiGLU shared expert of width
// expert_shared_feed_forward_length (when > 0), as llama.cpp picks from the tensors.
#include <cmath>
#include <vector>

#include "models/decoder.h"
#include "models/mamba2_mixer.h"
#include "models/moe.h"

namespace ws {
namespace {

struct GraniteLayer {
  const float* attn_norm;  // [n_embd]
  bool is_attention;
  ops::AttnWeights attn;   // attention layers only
  Mamba2Weights mixer;     // Mamba-2 layers only
  const float* ffn_norm;   // [n_embd]
  ops::SwigluFfn ffn;      // dense FFN
  MoeWeights moe;          // MoE FFN (expert_count > 0)
};

class GraniteHybridModel final : public Decoder {
 public:
  GraniteHybridModel(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys k(f, arch);
    const int64_t d = cfg_.n_embd;
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    embed_scale_ = float(k.get_float("embedding_scale", 1.0));
    residual_scale_ = float(k.get_float("residual_scale", 1.0));
    logit_scale_ = float(k.get_float("logit_scale", 1.0));
    cfg_.rope_type = f.get_bool(arch + ".rope.scaling.finetuned", true) ? RopeType::norm : RopeType::none;
    attn_ = ops::attention_options(cfg_);
    attn_.scale = cfg_.head_dim > 0 ? float(k.get_float("attention.scale", 1.0 / std::sqrt(double(cfg_.head_dim)))) : 0.f;
    if (logit_scale_ == 0.f) f.fail(arch + ".logit_scale must not be 0");
    const int64_t n_expert = k.get_int("expert_count", 0);
    if (n_expert > 0) {
      moe_opts_.n_used = int32_t(k.require_int("expert_used_count"));
      if (moe_opts_.n_used > n_expert) f.fail(arch + ".expert_used_count exceeds expert_count");
    }
    const int64_t n_ff_shared = k.get_int("expert_shared_feed_forward_length", 0);
    emb_ = ops::load_embeddings(f, cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = layer_prefix(i);
      const int32_t n_ff = cfg_.n_ff_per_layer[size_t(i)], n_kv = cfg_.n_head_kv_per_layer[size_t(i)];
      if (n_ff <= 0) f.fail("layer " + std::to_string(i) + ": " + arch + ".feed_forward_length must be positive");
      GraniteLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.is_attention = n_kv > 0;
      if (l.is_attention) l.attn = ops::load_attention(f, p, d, cfg_.n_head, n_kv, cfg_.head_dim, /*qk_norm=*/false);
      else l.mixer = load_mamba2_weights(f, p, dims_);
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      if (n_expert > 0) l.moe = load_moe(f, p, d, n_expert, n_ff, n_ff_shared, ExpertAct::swiglu);
      else l.ffn = ops::load_swiglu(f, p, d, n_ff);
      layers_.push_back(std::move(l));
    }
  }

 private:
  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    if (layers_[il].is_attention) return full_kv_memory(cfg_.n_head_kv_per_layer[il], cfg_.head_dim, opts);
    return recurrent_memory(mamba2_state_sizes(dims_));
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const GraniteLayer& l = layers_[il];
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      if (l.is_attention)
        ops::attention_block(l.attn, attn_, il, p.seqs, xn, p.n, out, p.pool);
      else
        mamba2_mixer(l.mixer, dims_, il, p.seqs, xn, p.n, out, cfg_.rms_eps, p.pool);
    }, residual_scale_);
    pre_norm(x, l.ffn_norm, p, [&](const float* xn, float* out) {
      if (l.moe.n_expert() > 0) moe_ffn(l.moe, moe_opts_, xn, p.n, out, p.pool);
      else ops::swiglu_ffn(l.ffn, xn, p.n, out, p.pool);
    }, residual_scale_);
  }

  void finish_logits(float* logits, int64_t rows) const override {
    for (int64_t i = 0; i < rows * int64_t(cfg_.n_vocab); ++i) logits[i] /= logit_scale_;
  }

  Mamba2Dims dims_;
  float residual_scale_ = 1, logit_scale_ = 1;
  ops::AttnOptions attn_;  // attention.scale replaces 1/sqrt(hd)
  MoeOptions moe_opts_;    // softmax gating, weights normalised, no scale
  std::vector<GraniteLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_granite_hybrid(const gguf::File& f, const std::string& arch) {
  return std::make_unique<GraniteHybridModel>(f, arch);
}

}  // namespace ws
