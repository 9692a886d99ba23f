// Dense decoder family: llama (RoPE NORM) and qwen3 (per-head Q/K RMSNorm, RoPE NEOX).
// Pre-norm GQA attention + SwiGLU FFN, full KV cache per layer.
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

struct LlamaLayer {
  const float* attn_norm;  // [n_embd]
  ops::AttnWeights attn;   // Q/K norms only in qwen3
  const float* ffn_norm;   // [n_embd]
  ops::SwigluFfn ffn;
};

class LlamaModel final : public Model {
 public:
  LlamaModel(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    cfg_.rope_type = arch == "llama" ? RopeType::norm : RopeType::neox;
    require_attention_and_ffn(f, cfg_);
    const int64_t d = cfg_.n_embd;
    emb_ = ops::load_embeddings(f, cfg_);
    attn_ = ops::attention_options(cfg_);
    const bool qk_norm = arch == "qwen3";
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LlamaLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.attn = ops::load_attention(f, p, d, cfg_.n_head, cfg_.n_head_kv, cfg_.head_dim, qk_norm);
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff);
      layers_.push_back(l);
    }
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (int32_t i = 0; i < cfg_.n_layer; ++i)
      layers.push_back(std::make_unique<FullKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, opts.kv_page_size));
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = batch.size(), d = cfg_.n_embd;
    if (n == 0) return;
    state.check_room(n);
    std::vector<float> x(size_t(n * d));   // [n][n_embd] residual stream
    std::vector<float> xn(size_t(n * d));  // [n][n_embd] normed input of a branch
    std::vector<float> o(size_t(n * d));   // [n][n_embd] branch output
    ops::embed_batch(emb_.tok_embd, batch, true, x.data());
    ops::AttnOptions ao = attn_;
    ao.non_causal = batch.non_causal;
    for (size_t il = 0; il < layers_.size(); ++il) {
      const LlamaLayer& l = layers_[il];
      ops::rms_norm(x.data(), l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
      ops::attention_block(l.attn, ao, static_cast<FullKvState&>(state.layer(il)), xn.data(), n, state.position(),
                           o.data(), pool);
      ops::add_scaled(x.data(), o.data(), n * d);
      ops::rms_norm(x.data(), l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
      ops::swiglu_ffn(l.ffn, xn.data(), n, o.data(), pool);
      ops::add_scaled(x.data(), o.data(), n * d);
    }
    state.advance(int32_t(n));
    ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
  }

 private:
  ModelConfig cfg_;
  ops::Embeddings emb_;
  ops::AttnOptions attn_;
  std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama_family(const gguf::File& f, const std::string& arch) {
  return std::make_unique<LlamaModel>(f, arch);
}

}  // namespace ws
