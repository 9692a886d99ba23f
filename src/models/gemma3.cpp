// Gemma 3: interleaved sliding-window / global attention, Q/K RMSNorm, NEOX RoPE with a
// different base per layer kind, sandwich norms (post_attention_norm, post_ffw_norm) and
// a GELU-gated FFN. Sliding layers keep only their window (SlidingKvState); global
// layers keep everything (FullKvState).
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

struct Gemma3Layer {
  bool sliding;                 // window-limited attention with the SWA rope base
  const float* attn_norm;       // [n_embd]
  ops::AttnWeights attn;        // with Q/K norms
  const float* post_attn_norm;  // [n_embd]
  const float* ffn_norm;        // [n_embd]
  ops::SwigluFfn ffn;           // gated by GELU, not SiLU
  const float* post_ffw_norm;   // [n_embd]
};

class Gemma3Model final : public Model {
 public:
  Gemma3Model(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
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
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i, i % pattern < pattern - 1));
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (const auto& l : layers_) {
      if (l.sliding)
        layers.push_back(
            std::make_unique<SlidingKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, window_, opts.swa_slack));
      else
        layers.push_back(std::make_unique<FullKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, opts.kv_page_size));
    }
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = batch.size(), d = cfg_.n_embd;
    if (n == 0) return;
    state.check_room(n);
    std::vector<float> x(size_t(n * d));  // [n][n_embd] residual stream
    ops::embed_batch(emb_.tok_embd, batch, true, x.data());
    // Only token embeddings are scaled; input embeddings (an image's) come ready to use.
    if (!batch.embeddings) {
      const float emb_scale = std::sqrt(float(d));
      for (float& v : x) v *= emb_scale;
    }
    for (size_t il = 0; il < layers_.size(); ++il)
      layer_forward(layers_[il], static_cast<KvStore&>(state.layer(il)), x.data(), n, state.position(),
                    batch.non_causal, pool);
    state.advance(int32_t(n));
    ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
  }

 private:
  Gemma3Layer load_layer(const gguf::File& f, int32_t i, bool sliding) const {
    const std::string p = "blk." + std::to_string(i) + ".";
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

  // Sandwich norms: x += post_norm(branch(pre_norm(x))) for attention, then the FFN.
  void layer_forward(const Gemma3Layer& l, KvStore& kv, float* x, int64_t n, int32_t pos0, bool non_causal,
                     ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd, ff = cfg_.n_ff;
    std::vector<float> xn(size_t(n * d));                     // [n][n_embd] normed input
    std::vector<float> o(size_t(n * d));                      // [n][n_embd] branch output
    std::vector<float> g(size_t(n * ff)), u(size_t(n * ff));  // [n][n_ff] FFN gate, up
    ops::rms_norm(x, l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
    ops::AttnOptions ao = l.sliding ? attn_sliding_ : attn_global_;
    ao.non_causal = non_causal;
    ops::attention_block(l.attn, ao, kv, xn.data(), n, pos0, o.data(), pool);
    ops::rms_norm(o.data(), l.post_attn_norm, o.data(), n, d, cfg_.rms_eps);
    ops::add_scaled(x, o.data(), n * d);

    ops::rms_norm(x, l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
    matmul(l.ffn.gate, xn.data(), n, g.data(), pool);
    matmul(l.ffn.up, xn.data(), n, u.data(), pool);
    // u = gelu(g) * u, GELU through ggml-cpu's fp16 table (see ops::gelu_ggml).
    pool.parallel_for(n, ThreadPool::rows_grain(ff),
                      [&](int64_t t0, int64_t t1) { ops::gelu_gate(g.data() + t0 * ff, u.data() + t0 * ff, (t1 - t0) * ff); });
    matmul(l.ffn.down, u.data(), n, o.data(), pool);
    ops::rms_norm(o.data(), l.post_ffw_norm, o.data(), n, d, cfg_.rms_eps);
    ops::add_scaled(x, o.data(), n * d);
  }

  ModelConfig cfg_;
  int32_t window_ = 0;             // sliding window (positions a query sees, itself included)
  ops::AttnOptions attn_global_;   // global layers: rope.freq_base, no window
  ops::AttnOptions attn_sliding_;  // sliding layers: rope.freq_base_swa, window_
  ops::Embeddings emb_;
  std::vector<Gemma3Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gemma3(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Gemma3Model>(f, arch);
}

}  // namespace ws
