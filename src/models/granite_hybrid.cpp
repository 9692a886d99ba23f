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
  ssm_family::AttnWeights attn;    // attention layers only
  Mamba2Weights mixer;             // Mamba-2 layers only
  const float* ffn_norm;           // [n_embd]
  Matrix gate, up, down;           // gate/up: [n_ff, n_embd], down: [n_embd, n_ff]
};

class GraniteHybridModel final : public Model {
 public:
  GraniteHybridModel(const gguf::File& f, const std::string& arch) {
    HybridConfig h = read_hybrid_config(f, arch);
    cfg_ = h.cfg;
    n_head_kv_ = h.n_head_kv;
    const ArchKeys k(f, arch);
    const int64_t d = cfg_.n_embd;
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    embedding_scale_ = float(k.get_float("embedding_scale", 1.0));
    residual_scale_ = float(k.get_float("residual_scale", 1.0));
    logit_scale_ = float(k.get_float("logit_scale", 1.0));
    cfg_.rope_type = f.get_bool(arch + ".rope.scaling.finetuned", true) ? RopeType::norm : RopeType::none;
    attn_scale_ = cfg_.head_dim > 0 ? float(k.get_float("attention.scale", 1.0 / std::sqrt(double(cfg_.head_dim)))) : 0.f;
    if (logit_scale_ == 0.f) f.fail(arch + ".logit_scale must not be 0");
    tok_embd_ = ops::matrix(f, "token_embd.weight", d, cfg_.n_vocab);
    output_ = ops::optional_tensor(f, "output.weight") ? ops::matrix(f, "output.weight", d, cfg_.n_vocab) : tok_embd_;
    output_norm_ = ops::vector_f32(f, "output_norm.weight", d);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      const int32_t n_ff = h.n_ff[size_t(i)], n_kv = n_head_kv_[size_t(i)];
      if (n_ff <= 0) f.fail("layer " + std::to_string(i) + ": " + arch + ".feed_forward_length must be positive");
      GraniteLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.is_attention = n_kv > 0;
      if (l.is_attention) l.attn = ssm_family::load_attention(f, p, cfg_.n_embd, cfg_.n_head, n_kv, cfg_.head_dim);
      else l.mixer = load_mamba2_weights(f, p, dims_);
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      l.gate = ops::matrix(f, p + "ffn_gate.weight", d, n_ff);
      l.up = ops::matrix(f, p + "ffn_up.weight", d, n_ff);
      l.down = ops::matrix(f, p + "ffn_down.weight", n_ff, d);
      layers_.push_back(l);
    }
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      if (layers_[size_t(i)].is_attention)
        layers.push_back(
            std::make_unique<FullKvState>(n_head_kv_[size_t(i)], cfg_.head_dim, opts.kv_type, opts.kv_page_size));
      else
        layers.push_back(std::make_unique<RecurrentState>(mamba2_state_sizes(dims_)));
    }
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(std::span<const Token> tokens, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = int64_t(tokens.size()), d = cfg_.n_embd;
    if (n == 0) return;
    state.check_room(n);
    std::vector<float> x(size_t(n * d));  // [n][n_embd] residual stream
    ssm_family::embed(tok_embd_, tokens, x.data());
    for (float& v : x) v *= embedding_scale_;
    for (size_t il = 0; il < layers_.size(); ++il) layer_forward(layers_[il], state.layer(il), x.data(), n, state.position(), pool);
    state.advance(int32_t(n));
    ssm_family::output_logits(x.data(), n, mode, output_norm_, output_, cfg_.rms_eps, logits, pool);
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
      ssm_family::attention(l.attn, static_cast<FullKvState&>(st), xn.data(), n, pos0, cfg_.n_head, attn_scale_,
                            cfg_.rope_type, cfg_.rope_base, o.data(), pool);
    else
      mamba2_mixer(l.mixer, dims_, static_cast<RecurrentState&>(st), xn.data(), n, o.data(), cfg_.rms_eps, pool);
    ops::add_scaled(x, o.data(), n * d, residual_scale_);

    const int64_t ff = l.gate.rows;
    std::vector<float> g(size_t(n * ff)), u(size_t(n * ff));  // [n][n_ff]
    ops::rms_norm(x, l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
    matmul(l.gate, xn.data(), n, g.data(), pool);
    matmul(l.up, xn.data(), n, u.data(), pool);
    ops::swiglu(g.data(), u.data(), n * ff);
    matmul(l.down, u.data(), n, o.data(), pool);
    ops::add_scaled(x, o.data(), n * d, residual_scale_);
  }

  ModelConfig cfg_;
  Mamba2Dims dims_;
  std::vector<int32_t> n_head_kv_;      // [n_layer], 0 = Mamba-2 layer
  float embedding_scale_ = 1, residual_scale_ = 1, logit_scale_ = 1, attn_scale_ = 1;
  Matrix tok_embd_, output_;            // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;  // [n_embd]
  std::vector<GraniteLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_granite_hybrid(const gguf::File& f, const std::string& arch) {
  return std::make_unique<GraniteHybridModel>(f, arch);
}

}  // namespace ws
