// Granite-4.0-H (granitehybrid): Mamba-2 layers (head_count_kv[i] == 0) and attention
// layers, each followed by a SwiGLU FFN. embedding_scale multiplies the input embedding,
// residual_scale both branch outputs, attention.scale replaces 1/sqrt(hd), and the logits
// are divided by logit_scale. rope.scaling.finetuned == false means no RoPE at all.
#include <cmath>
#include <vector>

#include "models/mamba2_mixer.h"
#include "models/ops.h"

namespace ws {
namespace {

struct GraniteLayer {
  const float* attn_norm;          // [n_embd]
  bool is_attention;
  ops::AttnWeights attn;    // attention layers only
  Mamba2Weights mixer;             // Mamba-2 layers only
  const float* ffn_norm;           // [n_embd]
  ops::SwigluFfn ffn;
};

class GraniteHybridModel final : public Model {
 public:
  GraniteHybridModel(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    const ArchKeys k(f, arch);
    const int64_t d = cfg_.n_embd;
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    embedding_scale_ = float(k.get_float("embedding_scale", 1.0));
    residual_scale_ = float(k.get_float("residual_scale", 1.0));
    logit_scale_ = float(k.get_float("logit_scale", 1.0));
    cfg_.rope_type = f.get_bool(arch + ".rope.scaling.finetuned", true) ? RopeType::norm : RopeType::none;
    attn_ = ops::attention_options(cfg_);
    attn_.scale = cfg_.head_dim > 0 ? float(k.get_float("attention.scale", 1.0 / std::sqrt(double(cfg_.head_dim)))) : 0.f;
    if (logit_scale_ == 0.f) f.fail(arch + ".logit_scale must not be 0");
    emb_ = ops::load_embeddings(f, cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      const int32_t n_ff = cfg_.n_ff_per_layer[size_t(i)], n_kv = cfg_.n_head_kv_per_layer[size_t(i)];
      if (n_ff <= 0) f.fail("layer " + std::to_string(i) + ": " + arch + ".feed_forward_length must be positive");
      GraniteLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.is_attention = n_kv > 0;
      if (l.is_attention) l.attn = ops::load_attention(f, p, d, cfg_.n_head, n_kv, cfg_.head_dim, /*qk_norm=*/false);
      else l.mixer = load_mamba2_weights(f, p, dims_);
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      l.ffn = ops::load_swiglu(f, p, d, n_ff);
      layers_.push_back(l);
    }
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      if (layers_[size_t(i)].is_attention)
        layers.push_back(std::make_unique<FullKvState>(cfg_.n_head_kv_per_layer[size_t(i)], cfg_.head_dim, opts.kv_type,
                                                       opts.kv_page_size));
      else
        layers.push_back(std::make_unique<RecurrentState>(mamba2_state_sizes(dims_)));
    }
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = batch.size(), d = cfg_.n_embd;
    if (n == 0) return;
    state.check_room(n);
    std::vector<float> x(size_t(n * d));  // [n][n_embd] residual stream
    ops::embed_batch(emb_.tok_embd, batch, false, x.data());
    for (float& v : x) v *= embedding_scale_;
    for (size_t il = 0; il < layers_.size(); ++il) layer_forward(layers_[il], state.layer(il), x.data(), n, state.position(), pool);
    state.advance(int32_t(n));
    ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
    if (mode == LogitsMode::none) return;
    const int64_t count = (mode == LogitsMode::all ? n : 1) * int64_t(cfg_.n_vocab);
    for (int64_t i = 0; i < count; ++i) logits[i] /= logit_scale_;
  }

 private:
  void layer_forward(const GraniteLayer& l, LayerState& st, float* x, int64_t n, int32_t pos0, ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd;
    std::vector<float> xn(size_t(n * d));  // [n][n_embd] normed input
    std::vector<float> o(size_t(n * d));   // [n][n_embd] branch output
    ops::rms_norm(x, l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
    if (l.is_attention)
      ops::attention_block(l.attn, attn_, static_cast<FullKvState&>(st), xn.data(), n, pos0, o.data(), pool);
    else
      mamba2_mixer(l.mixer, dims_, static_cast<RecurrentState&>(st), xn.data(), n, o.data(), cfg_.rms_eps, pool);
    ops::add_scaled(x, o.data(), n * d, residual_scale_);

    ops::rms_norm(x, l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
    ops::swiglu_ffn(l.ffn, xn.data(), n, o.data(), pool);
    ops::add_scaled(x, o.data(), n * d, residual_scale_);
  }

  ModelConfig cfg_;
  Mamba2Dims dims_;
  float embedding_scale_ = 1, residual_scale_ = 1, logit_scale_ = 1;
  ops::AttnOptions attn_;  // attention.scale replaces 1/sqrt(hd)
  ops::Embeddings emb_;
  std::vector<GraniteLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_granite_hybrid(const gguf::File& f, const std::string& arch) {
  return std::make_unique<GraniteHybridModel>(f, arch);
}

}  // namespace ws
