// Dense decoder family: pre-norm GQA attention + an FFN in every layer, full KV cache.
//   llama     RoPE NORM; Llama 3 rope_freqs / YaRN / linear scaling when the file has them
//   qwen2     RoPE NEOX, biases on Q, K, V
//   qwen3     RoPE NEOX, per-head Q/K RMSNorm
//   qwen3moe  qwen3 with a softmax-routed mixture of experts as every FFN
#include <vector>

#include "models/decoder.h"
#include "models/moe.h"
#include "models/registry.h"

namespace ws {
namespace {

struct LlamaLayer {
  const float* attn_norm;  // [n_embd]
  ops::AttnWeights attn;   // Q/K norms in qwen3, biases in qwen2
  const float* ffn_norm;   // [n_embd]
  ops::SwigluFfn ffn;      // dense archs
  MoeWeights moe;          // qwen3moe
};

class LlamaModel final : public Decoder {
 public:
  LlamaModel(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = arch == "llama" ? RopeType::norm : RopeType::neox;
    moe_ = arch == "qwen3moe";
    if (moe_) {
      cfg_.n_ff_per_layer.assign(size_t(cfg_.n_layer), 1);  // feed_forward_length is unused: the FFN is the MoE
      moe_opts_.n_used = int32_t(keys.require_int("expert_used_count"));
      n_expert_ = keys.require_int("expert_count");
      n_ff_exp_ = keys.get_int("expert_feed_forward_length", cfg_.n_ff / moe_opts_.n_used);
      if (moe_opts_.n_used > n_expert_) f.fail(arch + ".expert_used_count exceeds expert_count");
    }
    require_attention_and_ffn(f, cfg_);
    emb_ = ops::load_embeddings(f, cfg_);
    attn_ = ops::attention_options(cfg_);
    ops::read_rope_scaling(f, arch, attn_.rope);
    const bool qk_norm = arch == "qwen3" || arch == "qwen3moe";
    const int64_t d = cfg_.n_embd;
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = layer_prefix(i);
      LlamaLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.attn = ops::load_attention(f, p, d, cfg_.n_head, cfg_.n_head_kv, cfg_.head_dim, qk_norm);
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      if (moe_) l.moe = load_moe(f, p, d, n_expert_, n_ff_exp_, 0, ExpertAct::swiglu);
      else l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff);
      layers_.push_back(std::move(l));
    }
    non_causal_ok_ = true;
  }

 private:
  std::unique_ptr<LayerState> layer_memory(size_t, const MemoryOptions& opts) const override {
    return full_kv_memory(cfg_.n_head_kv, cfg_.head_dim, opts);
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const LlamaLayer& l = layers_[il];
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      ops::attention_block(l.attn, attn_, il, p.seqs, xn, p.n, out, p.pool);
    });
    pre_norm(x, l.ffn_norm, p, [&](const float* xn, float* out) {
      if (moe_) moe_ffn(l.moe, moe_opts_, xn, p.n, out, p.pool);
      else ops::swiglu_ffn(l.ffn, xn, p.n, out, p.pool);
    });
  }

  ops::AttnOptions attn_;
  bool moe_ = false;
  MoeOptions moe_opts_;  // qwen3moe: softmax gating, weights normalised, no scale
  int64_t n_expert_ = 0, n_ff_exp_ = 0;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama_family(const gguf::File& f, const std::string& arch) {
  return std::make_unique<LlamaModel>(f, arch);
}

}  // namespace ws
