// LFM2 (Liquid): a hybrid of gated short-convolution layers and GQA attention layers.
// Layer i is attention iff attention.head_count_kv[i] > 0 (a per-layer array), else a
// short conv. Both kinds: x += op(RMSNorm(x, attn_norm)); x += SwiGLU(RMSNorm(x, ffn_norm)).
// Short conv: [b, c, h] = split(in_proj u, 3); bx = b*h; y_t = sum_k w[k] bx_{t-L+1+k};
// out_proj(c*y). The conv carries the last L-1 bx columns (a RecurrentState). Attention:
// per-head Q/K RMSNorm, NEOX RoPE, full KV. The final norm is token_embd_norm.weight.
// lfm2moe (LFM2-8B-A1B): the same layers with a sigmoid-routed mixture of experts as the
// FFN after the leading dense ones.
#include <vector>

#include "models/decoder.h"
#include "models/moe.h"
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
  ops::SwigluFfn ffn;             // dense FFN
  MoeWeights moe;                 // lfm2moe layers past the leading dense ones
};

class Lfm2Model final : public Decoder {
 public:
  Lfm2Model(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    if (cfg_.n_head <= 0 || cfg_.n_ff <= 0) f.fail(arch + ": attention.head_count and feed_forward_length are required");
    cfg_.rope_base = float(keys.get_float("rope.freq_base", 1e6));
    cfg_.rope_type = RopeType::neox;
    l_cache_ = int32_t(keys.require_int("shortconv.l_cache"));
    if (arch == "lfm2moe") read_moe(f, keys);
    emb_ = ops::load_embeddings(f, cfg_, "token_embd_norm.weight");
    attn_ = ops::attention_options(cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
  }

 private:
  // lfm2moe: the first leading_dense_block_count layers keep the dense FFN, the others
  // route over experts by sigmoid score + selection bias, weights normalised, no scale.
  void read_moe(const gguf::File& f, const ArchKeys& keys) {
    n_dense_ = int32_t(keys.get_int("leading_dense_block_count", 0));
    n_expert_ = keys.require_int("expert_count");
    n_ff_exp_ = keys.require_int("expert_feed_forward_length");
    moe_opts_.n_used = int32_t(keys.require_int("expert_used_count"));
    const int64_t gating = keys.require_int("expert_gating_func");  // llama.cpp: 1 softmax, 2 sigmoid
    if (gating != 1 && gating != 2) f.fail(keys.arch() + ".expert_gating_func " + std::to_string(gating) + " is not supported");
    moe_opts_.gating = gating == 2 ? MoeGating::sigmoid : MoeGating::softmax;
    if (moe_opts_.n_used > n_expert_) f.fail(keys.arch() + ".expert_used_count exceeds expert_count");
  }

  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    const Lfm2Layer& l = layers_[il];
    if (l.n_kv > 0) return full_kv_memory(l.n_kv, cfg_.head_dim, opts);
    return recurrent_memory({size_t(l_cache_ - 1) * size_t(cfg_.n_embd)});  // the last L-1 bx columns: [L-1][n_embd] f32
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const Lfm2Layer& l = layers_[il];
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      if (l.n_kv > 0) ops::attention_block(l.attn, attn_, il, p.seqs, xn, p.n, out, p.pool);
      else short_conv(l, il, p, xn, out);
    });
    pre_norm(x, l.ffn_norm, p, [&](const float* xn, float* out) {
      if (l.moe.n_expert() > 0) moe_ffn(l.moe, moe_opts_, xn, p.n, out, p.pool);
      else ops::swiglu_ffn(l.ffn, xn, p.n, out, p.pool);
    });
  }

  Lfm2Layer load_layer(const gguf::File& f, int32_t i) const {
    const std::string p = layer_prefix(i);
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
        f.fail("tensor '" + conv + "' has " + std::to_string(t.ne.size()) + " dimensions, expected [" +
               std::to_string(l_cache_) + ", " + std::to_string(d) + "]");
      l.conv = ops::vector_f32(f, conv, l_cache_ * d);
    }
    l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
    if (n_expert_ > 0 && i >= n_dense_) {
      l.moe = load_moe(f, p, d, n_expert_, n_ff_exp_, 0, ExpertAct::swiglu);
      if (!l.moe.selection_bias) f.fail("tensor '" + p + "exp_probs_b.bias' is required by lfm2moe");
    } else {
      l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff);
    }
    return l;
  }

  // out = out_proj(c * conv(b * h)); the conv state holds the last L-1 bx columns.
  // Each sequence convolves its own rows with its own tail (layer il's memory).
  void short_conv(const Lfm2Layer& l, size_t il, const LayerPass& p, const float* u, float* out) const {
    const int64_t d = cfg_.n_embd, n = p.n;
    ThreadPool& pool = p.pool;
    std::vector<float> bch(size_t(n * 3 * d));  // [n][3][n_embd]: b, c, h
    std::vector<float> bx(size_t(n * d));       // [n][n_embd] b * h, then the conv output
    matmul(l.in_proj, u, n, bch.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      const float* b = bch.data() + t * 3 * d;
      const float* h = b + 2 * d;
      for (int64_t c = 0; c < d; ++c) bx[size_t(t * d + c)] = b[c] * h[c];
    }
    for (const SeqRows& s : p.seqs) {
      float* rows = bx.data() + s.row0 * d;
      ops::causal_conv(l.conv, nullptr, l_cache_, s.memory<RecurrentState>(il).buffer(0).data(), rows, d, s.n, d, rows,
                       pool);
    }
    for (int64_t t = 0; t < n; ++t) {
      const float* cg = bch.data() + t * 3 * d + d;
      for (int64_t c = 0; c < d; ++c) bx[size_t(t * d + c)] = cg[c] * bx[size_t(t * d + c)];
    }
    for (const SeqRows& s : p.seqs) s.memory<RecurrentState>(il).advance(int32_t(s.n));
    matmul(l.out_proj, bx.data(), n, out, pool);
  }

  int32_t l_cache_ = 0;  // conv kernel length L
  ops::AttnOptions attn_;
  int32_t n_dense_ = 0;                  // lfm2moe: leading layers with a dense FFN
  int64_t n_expert_ = 0, n_ff_exp_ = 0;  // lfm2moe: experts and their width (0: dense lfm2)
  MoeOptions moe_opts_;
  std::vector<Lfm2Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_lfm2(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Lfm2Model>(f, arch);
}

}  // namespace ws
