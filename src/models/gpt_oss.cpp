// gpt-oss (llama.cpp "gpt-oss", LLM_ARCH_OPENAI_MOE). Per layer:
//   x += attn_output(attention(RMSNorm(x, attn_norm))) + attn_output.bias
//   x += MoE(RMSNorm(x, post_attention_norm))
// Attention: Q/K/V with biases, YaRN NEOX RoPE in every layer, a learned sink logit per
// head (attn_sinks: one more softmax entry that attends to nothing), even layers limited
// to a sliding window (llama.cpp fixes the period at 2 and reads no pattern key).
// MoE: router with bias, the top-k experts by raw router logit weighted by a softmax over
// those k logits, per-expert biases, clamped SwiGLU (ExpertAct::swiglu_oai). Untied output.
#include <vector>

#include "models/config.h"
#include "models/decoder.h"
#include "models/moe.h"
#include "models/registry.h"

namespace ws {
namespace {

struct GptOssLayer {
  const float* attn_norm;       // [n_embd]
  ops::AttnWeights attn;        // biases on q, k, v and output
  const float* sinks;           // [n_head] attn_sinks.weight
  const float* post_attn_norm;  // [n_embd] the FFN's pre-norm
  MoeWeights moe;               // router + bias, experts + biases
};

class GptOssModel final : public Decoder {
 public:
  GptOssModel(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = RopeType::neox;
    if (cfg_.n_head <= 0) f.fail(arch + ".attention.head_count is required");
    n_expert_ = keys.require_int("expert_count");
    n_ff_exp_ = keys.require_int("expert_feed_forward_length");
    moe_opts_.n_used = int32_t(keys.require_int("expert_used_count"));
    if (moe_opts_.n_used > n_expert_) f.fail(arch + ".expert_used_count exceeds expert_count");
    // The selected logits are softmaxed directly: no renormalisation, no scale.
    moe_opts_.gating = MoeGating::softmax_selected;
    moe_opts_.act = ExpertAct::swiglu_oai;
    moe_opts_.normalize = false;
    cfg_.n_ff_per_layer.assign(size_t(cfg_.n_layer), int32_t(n_ff_exp_));  // every FFN is the MoE
    cfg_.n_ff = int32_t(n_ff_exp_);
    window_ = int32_t(keys.require_int("attention.sliding_window"));
    if (!f.find_tensor("output.weight")) f.fail("tensor 'output.weight' is required (gpt-oss is untied)");
    emb_ = ops::load_embeddings(f, cfg_);
    attn_full_ = ops::attention_options(cfg_);
    // llama.cpp's gpt-oss loader ignores rope.scaling.yarn_beta_*: always 32 / 1 (the defaults).
    ops::read_rope_scaling(f, arch, attn_full_.rope);
    attn_sliding_ = attn_full_;
    attn_sliding_.window = window_;
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
  }

 private:
  GptOssLayer load_layer(const gguf::File& f, int32_t il) const {
    const std::string p = layer_prefix(il);
    const int64_t d = cfg_.n_embd;
    GptOssLayer l{};
    l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
    l.attn = ops::load_attention(f, p, d, cfg_.n_head, cfg_.n_head_kv, cfg_.head_dim, /*qk_norm=*/false);
    if (!l.attn.bq || !l.attn.bk || !l.attn.bv || !l.attn.bo)
      f.fail("layer " + std::to_string(il) + ": gpt-oss needs " + p + "attn_{q,k,v,output}.bias");
    l.sinks = ops::vector_f32(f, p + "attn_sinks.weight", cfg_.n_head);
    l.post_attn_norm = ops::vector_f32(f, p + "post_attention_norm.weight", d);
    l.moe = load_moe(f, p, d, n_expert_, n_ff_exp_, 0, ExpertAct::swiglu_oai);
    if (!l.moe.router_bias || !l.moe.gate.bias || !l.moe.up.bias || !l.moe.down.bias)
      f.fail("layer " + std::to_string(il) + ": gpt-oss needs " + p +
             "ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias");
    return l;
  }

  // llama.cpp's period-2 pattern: layer il slides iff il is even.
  static bool sliding(size_t il) { return il % 2 == 0; }

  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    if (sliding(il)) return sliding_kv_memory(cfg_.n_head_kv, cfg_.head_dim, window_, opts);
    return full_kv_memory(cfg_.n_head_kv, cfg_.head_dim, opts);
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const GptOssLayer& l = layers_[il];
    ops::AttnOptions ao = sliding(il) ? attn_sliding_ : attn_full_;
    ao.sinks = l.sinks;
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      ops::attention_block(l.attn, ao, il, p.seqs, xn, p.n, out, p.pool);
    });
    pre_norm(x, l.post_attn_norm, p, [&](const float* xn, float* out) {
      moe_ffn(l.moe, moe_opts_, xn, p.n, out, p.pool);
    });
  }

  int64_t n_expert_ = 0, n_ff_exp_ = 0;
  int32_t window_ = 0;             // sliding window (positions a query sees, itself included)
  MoeOptions moe_opts_;            // softmax over the selected logits, clamped SwiGLU experts
  ops::AttnOptions attn_full_;     // odd layers: every earlier position
  ops::AttnOptions attn_sliding_;  // even layers: the last window_ positions
  std::vector<GptOssLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gpt_oss(const gguf::File& f, const std::string& arch) {
  return std::make_unique<GptOssModel>(f, arch);
}

}  // namespace ws
