// LFM2 (Liquid): a hybrid of gated short-convolution layers and GQA attention layers.
// Layer i is attention iff attention.head_count_kv[i] > 0 (a per-layer array), else a
// short conv. Both kinds: x += op(RMSNorm(x, attn_norm)); x += SwiGLU(RMSNorm(x, ffn_norm)).
// Short conv: [b, c, h] = split(in_proj u, 3); bx = b*h; y_t = sum_k w[k] bx_{t-L+1+k};
// out_proj(c*y). The conv carries the last L-1 bx columns (a RecurrentState). Attention:
// per-head Q/K RMSNorm, NEOX RoPE, full KV. The final norm is token_embd_norm.weight.
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

struct Lfm2Layer {
  int32_t n_kv = 0;               // kv heads; 0 => short-conv layer
  const float* attn_norm;         // [n_embd]
  ops::AttnWeights attn;          // attention layers (with Q/K norms)
  Matrix in_proj;                 // conv layers: [3*n_embd, n_embd] -> [b, c, h]
  Matrix out_proj;                // conv layers: [n_embd, n_embd]
  const float* conv = nullptr;    // conv layers: [n_embd][L] f32 (ggml {L, n_embd}), taps oldest .. current
  const float* ffn_norm;          // [n_embd]
  ops::SwigluFfn ffn;
};

class Lfm2Model final : public Model {
 public:
  Lfm2Model(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    if (cfg_.n_head <= 0 || cfg_.n_ff <= 0) f.fail(arch + ": attention.head_count and feed_forward_length are required");
    cfg_.rope_base = float(keys.get_float("rope.freq_base", 1e6));
    cfg_.rope_type = RopeType::neox;
    l_cache_ = int32_t(keys.require_int("shortconv.l_cache"));
    emb_ = ops::load_embeddings(f, cfg_, "token_embd_norm.weight");
    attn_ = ops::attention_options(cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (const auto& l : layers_) {
      if (l.n_kv > 0)
        layers.push_back(std::make_unique<FullKvState>(l.n_kv, cfg_.head_dim, opts.kv_type, opts.kv_page_size));
      else  // the last L-1 bx columns: [L-1][n_embd] f32
        layers.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{size_t(l_cache_ - 1) * cfg_.n_embd}));
    }
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
    ops::embed_batch(emb_.tok_embd, batch, false, x.data());
    const int32_t pos0 = state.position();
    for (size_t il = 0; il < layers_.size(); ++il) {
      const Lfm2Layer& l = layers_[il];
      ops::rms_norm(x.data(), l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
      if (l.n_kv > 0)
        ops::attention_block(l.attn, attn_, static_cast<FullKvState&>(state.layer(il)), xn.data(), n, pos0, o.data(),
                             pool);
      else
        short_conv(l, static_cast<RecurrentState&>(state.layer(il)), xn.data(), n, o.data(), pool);
      ops::add_scaled(x.data(), o.data(), n * d);
      ops::rms_norm(x.data(), l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
      ops::swiglu_ffn(l.ffn, xn.data(), n, o.data(), pool);
      ops::add_scaled(x.data(), o.data(), n * d);
    }
    state.advance(int32_t(n));
    ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
  }

 private:
  Lfm2Layer load_layer(const gguf::File& f, int32_t i) const {
    const std::string p = "blk." + std::to_string(i) + ".";
    const int64_t d = cfg_.n_embd;
    Lfm2Layer l{};
    l.n_kv = cfg_.n_head_kv_per_layer[size_t(i)];
    l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
    if (l.n_kv > 0) {
      l.attn = ops::load_attention(f, p, d, cfg_.n_head, l.n_kv, cfg_.head_dim, /*qk_norm=*/true);
    } else {
      l.in_proj = ops::matrix(f, p + "shortconv.in_proj.weight", d, 3 * d);
      l.out_proj = ops::matrix(f, p + "shortconv.out_proj.weight", d, d);
      const std::string conv = p + "shortconv.conv.weight";
      const auto& t = f.require_tensor(conv);
      if (t.ne.size() != 2 || t.ne[0] != l_cache_ || t.ne[1] != d)
        f.fail("tensor '" + conv + "' must have shape [" + std::to_string(l_cache_) + ", " + std::to_string(d) + "]");
      l.conv = ops::vector_f32(f, conv, l_cache_ * d);
    }
    l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
    l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff);
    return l;
  }

  // out = out_proj(c * conv(b * h)); the conv state holds the last L-1 bx columns.
  void short_conv(const Lfm2Layer& l, RecurrentState& rs, const float* u, int64_t n, float* out,
                  ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd;
    std::vector<float> bch(size_t(n * 3 * d));  // [n][3][n_embd]: b, c, h
    std::vector<float> bx(size_t(n * d));       // [n][n_embd] b * h, then the conv output
    matmul(l.in_proj, u, n, bch.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      const float* b = bch.data() + t * 3 * d;
      const float* h = b + 2 * d;
      for (int64_t c = 0; c < d; ++c) bx[size_t(t * d + c)] = b[c] * h[c];
    }
    ops::causal_conv(l.conv, nullptr, l_cache_, rs.buffer(0).data(), bx.data(), d, n, d, bx.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      const float* cg = bch.data() + t * 3 * d + d;
      for (int64_t c = 0; c < d; ++c) bx[size_t(t * d + c)] = cg[c] * bx[size_t(t * d + c)];
    }
    rs.advance(int32_t(n));
    matmul(l.out_proj, bx.data(), n, out, pool);
  }

  ModelConfig cfg_;
  int32_t l_cache_ = 0;  // conv kernel length L
  ops::Embeddings emb_;  // final norm: token_embd_norm.weight
  ops::AttnOptions attn_;
  std::vector<Lfm2Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_lfm2(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Lfm2Model>(f, arch);
}

}  // namespace ws
