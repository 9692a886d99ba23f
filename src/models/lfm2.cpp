// LFM2 (Liquid): a hybrid of gated short-convolution layers and GQA attention layers.
// Layer i is attention iff attention.head_count_kv[i] > 0 (a per-layer array), else a
// short conv. Both kinds: x += op(RMSNorm(x, attn_norm)); x += SwiGLU(RMSNorm(x, ffn_norm)).
// Short conv: [b, c, h] = split(in_proj u, 3); bx = b*h; y_t = sum_k w[k] bx_{t-L+1+k};
// out_proj(c*y). The conv carries the last L-1 bx columns (a RecurrentState). Attention:
// per-head Q/K RMSNorm, NEOX RoPE, full KV. The final norm is token_embd_norm.weight.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

struct Lfm2Layer {
  int32_t n_kv = 0;            // kv heads; 0 => short-conv layer
  const float* attn_norm;      // [n_embd]
  // attention layers
  Matrix wq, wk, wv, wo;       // q: [n_head*hd, n_embd], k/v: [n_kv*hd, n_embd], o: [n_embd, n_head*hd]
  const float* q_norm = nullptr;  // [hd]
  const float* k_norm = nullptr;  // [hd]
  // short-conv layers
  Matrix in_proj;              // [3*n_embd, n_embd] -> [b, c, h]
  Matrix out_proj;             // [n_embd, n_embd]
  const float* conv = nullptr;  // [n_embd][L] f32 (ggml {L, n_embd}): taps oldest .. current
  const float* ffn_norm;       // [n_embd]
  Matrix gate, up, down;       // gate/up: [n_ff, n_embd], down: [n_embd, n_ff]
};

// The shape keys of LFM2. read_common_config() cannot be used as is: head_count_kv is a
// per-layer array whose first entry is 0 on conv layers.
ModelConfig read_lfm2_config(const gguf::File& f, const std::string& arch, std::vector<int64_t>& kv_per_layer) {
  const ArchKeys k(f, arch);
  ModelConfig c;
  c.arch = arch;
  c.model_id = model_identity(f);
  c.n_embd = int32_t(k.require_int("embedding_length"));
  c.n_layer = int32_t(k.require_int("block_count"));
  c.n_head = int32_t(k.require_int("attention.head_count"));
  c.n_ff = int32_t(k.require_int("feed_forward_length"));
  c.n_ctx_train = int32_t(k.get_int("context_length", 4096));
  c.rms_eps = float(k.get_float("attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = float(k.get_float("rope.freq_base", 1e6));
  c.rope_type = RopeType::neox;
  c.head_dim = int32_t(k.get_int("attention.key_length", c.n_embd / c.n_head));
  c.n_rot = int32_t(k.get_int("rope.dimension_count", c.head_dim));
  kv_per_layer = k.get_ints("attention.head_count_kv");
  if (kv_per_layer.size() == 1) kv_per_layer.assign(size_t(c.n_layer), kv_per_layer[0]);
  if (kv_per_layer.size() != size_t(c.n_layer))
    f.fail("key '" + arch + ".attention.head_count_kv' must hold one entry per layer (" +
           std::to_string(c.n_layer) + "), found " + std::to_string(kv_per_layer.size()));
  for (const int64_t kv : kv_per_layer) {
    if (kv < 0 || (kv > 0 && c.n_head % kv != 0))
      f.fail("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " + std::to_string(kv));
    c.n_head_kv = std::max<int32_t>(c.n_head_kv, int32_t(kv));
  }
  if (c.n_rot > c.head_dim || c.n_rot % 2) f.fail("rope.dimension_count " + std::to_string(c.n_rot) + " is invalid");
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens && tokens->type == gguf::ValueType::array) c.n_vocab = int32_t(tokens->as_array().items.size());
  else c.n_vocab = int32_t(k.get_int("vocab_size", 0));
  if (c.n_vocab <= 0) f.fail("cannot determine the vocabulary size (no tokenizer.ggml.tokens, no lfm2.vocab_size)");
  return c;
}

class Lfm2Model final : public Model {
 public:
  Lfm2Model(const gguf::File& f, const std::string& arch) {
    std::vector<int64_t> kv_per_layer;
    cfg_ = read_lfm2_config(f, arch, kv_per_layer);
    l_cache_ = int32_t(ArchKeys(f, arch).require_int("shortconv.l_cache"));
    const int64_t d = cfg_.n_embd, hd = cfg_.head_dim, nq = cfg_.n_head * hd;
    tok_embd_ = ops::matrix(f, "token_embd.weight", d, cfg_.n_vocab);
    output_ = ops::optional_tensor(f, "output.weight") ? ops::matrix(f, "output.weight", d, cfg_.n_vocab) : tok_embd_;
    output_norm_ = ops::vector_f32(f, "token_embd_norm.weight", d);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      Lfm2Layer l{};
      l.n_kv = int32_t(kv_per_layer[size_t(i)]);
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      if (l.n_kv > 0) {
        const int64_t nkv = l.n_kv * hd;
        l.wq = ops::matrix(f, p + "attn_q.weight", d, nq);
        l.wk = ops::matrix(f, p + "attn_k.weight", d, nkv);
        l.wv = ops::matrix(f, p + "attn_v.weight", d, nkv);
        l.wo = ops::matrix(f, p + "attn_output.weight", nq, d);
        l.q_norm = ops::vector_f32(f, p + "attn_q_norm.weight", hd);
        l.k_norm = ops::vector_f32(f, p + "attn_k_norm.weight", hd);
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
      l.gate = ops::matrix(f, p + "ffn_gate.weight", d, cfg_.n_ff);
      l.up = ops::matrix(f, p + "ffn_up.weight", d, cfg_.n_ff);
      l.down = ops::matrix(f, p + "ffn_down.weight", cfg_.n_ff, d);
      layers_.push_back(l);
    }
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

  void forward(std::span<const Token> tokens, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = int64_t(tokens.size());
    if (n == 0) return;
    state.check_room(n);
    const int64_t d = cfg_.n_embd;
    std::vector<float> x(size_t(n * d));  // [n][n_embd] residual stream
    for (int64_t t = 0; t < n; ++t) {
      if (tokens[t] < 0 || tokens[t] >= cfg_.n_vocab)
        throw std::runtime_error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                                 std::to_string(cfg_.n_vocab - 1) + ")");
      get_row(tok_embd_, tokens[t], x.data() + t * d);
    }
    const int32_t pos0 = state.position();
    std::vector<float> xn(size_t(n * d));  // [n][n_embd] normed input of a branch
    std::vector<float> o(size_t(n * d));   // [n][n_embd] branch output
    for (size_t il = 0; il < layers_.size(); ++il) {
      const Lfm2Layer& l = layers_[il];
      ops::rms_norm(x.data(), l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
      if (l.n_kv > 0)
        attention(l, static_cast<FullKvState&>(state.layer(il)), xn.data(), n, pos0, o.data(), pool);
      else
        short_conv(l, static_cast<RecurrentState&>(state.layer(il)), xn.data(), n, o.data(), pool);
      ops::add_scaled(x.data(), o.data(), n * d);
      ffn(l, x.data(), n, xn.data(), o.data(), pool);
    }
    state.advance(int32_t(n));
    if (mode == LogitsMode::none) return;
    const int64_t first = mode == LogitsMode::all ? 0 : n - 1;
    const int64_t rows = n - first;
    ops::rms_norm(x.data() + first * d, output_norm_, xn.data(), rows, d, cfg_.rms_eps);
    matmul(output_, xn.data(), rows, logits, pool);
  }

 private:
  // out = wo(attention(rope(norm(wq u)), rope(norm(wk u)), wv u)); appends k, v to kv.
  void attention(const Lfm2Layer& l, FullKvState& kv, const float* u, int64_t n, int32_t pos0, float* out,
                 ThreadPool& pool) const {
    const int64_t hd = cfg_.head_dim, nq = cfg_.n_head * hd, nkv = l.n_kv * hd;
    std::vector<float> q(size_t(n * nq)), attn(size_t(n * nq));  // [n][n_head][hd]
    std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd]
    matmul(l.wq, u, n, q.data(), pool);
    matmul(l.wk, u, n, k.data(), pool);
    matmul(l.wv, u, n, v.data(), pool);
    ops::rms_norm(q.data(), l.q_norm, q.data(), n * cfg_.n_head, hd, cfg_.rms_eps);
    ops::rms_norm(k.data(), l.k_norm, k.data(), n * l.n_kv, hd, cfg_.rms_eps);
    ops::rope(q.data(), n, cfg_.n_head, int32_t(hd), cfg_.n_rot, pos0, cfg_.rope_base, cfg_.rope_type);
    ops::rope(k.data(), n, l.n_kv, int32_t(hd), cfg_.n_rot, pos0, cfg_.rope_base, cfg_.rope_type);
    kv.append(k.data(), v.data(), int32_t(n));
    ops::attention(q.data(), kv, n, pos0, {cfg_.n_head, 1.0f / std::sqrt(float(hd)), 0}, attn.data(), pool);
    matmul(l.wo, attn.data(), n, out, pool);
  }

  // out = out_proj(c * conv(b * h)). The conv runs over [state tail ; this batch's bx]
  // with every output computed by the same k-ordered sum, so any batch split gives the
  // same bits; afterwards the state holds the last L-1 bx columns.
  void short_conv(const Lfm2Layer& l, RecurrentState& rs, const float* u, int64_t n, float* out,
                  ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd, L = l_cache_, keep = L - 1;
    std::vector<float> bch(size_t(n * 3 * d));   // [n][3][n_embd]: b, c, h
    std::vector<float> win(size_t((keep + n) * d));  // [L-1+n][n_embd]: carried bx, then this batch's bx
    std::vector<float> y(size_t(n * d));         // [n][n_embd] c * conv output
    matmul(l.in_proj, u, n, bch.data(), pool);
    std::span<float> tail = rs.buffer(0);        // [L-1][n_embd], oldest first
    std::memcpy(win.data(), tail.data(), size_t(keep * d) * sizeof(float));
    for (int64_t t = 0; t < n; ++t) {
      const float* b = bch.data() + t * 3 * d;
      const float* h = b + 2 * d;
      float* bx = win.data() + (keep + t) * d;
      for (int64_t c = 0; c < d; ++c) bx[c] = b[c] * h[c];
    }
    for (int64_t t = 0; t < n; ++t) {
      const float* cg = bch.data() + t * 3 * d + d;
      for (int64_t c = 0; c < d; ++c) {
        const float* w = l.conv + c * L;  // taps for channel c, oldest first
        float sum = 0.f;
        for (int64_t k = 0; k < L; ++k) sum += win[size_t((t + k) * d + c)] * w[k];
        y[size_t(t * d + c)] = cg[c] * sum;
      }
    }
    std::memcpy(tail.data(), win.data() + n * d, size_t(keep * d) * sizeof(float));
    rs.advance(int32_t(n));
    matmul(l.out_proj, y.data(), n, out, pool);
  }

  // x += down(silu(gate xn) * up xn), xn = RMSNorm(x, ffn_norm). xn, o: [n][n_embd] scratch.
  void ffn(const Lfm2Layer& l, float* x, int64_t n, float* xn, float* o, ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd;
    std::vector<float> g(size_t(n * cfg_.n_ff)), u(size_t(n * cfg_.n_ff));  // [n][n_ff]
    ops::rms_norm(x, l.ffn_norm, xn, n, d, cfg_.rms_eps);
    matmul(l.gate, xn, n, g.data(), pool);
    matmul(l.up, xn, n, u.data(), pool);
    ops::swiglu(g.data(), u.data(), n * cfg_.n_ff);
    matmul(l.down, u.data(), n, o, pool);
    ops::add_scaled(x, o, n * d);
  }

  ModelConfig cfg_;
  int32_t l_cache_ = 0;                 // conv kernel length L
  Matrix tok_embd_, output_;            // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;  // [n_embd] (token_embd_norm.weight)
  std::vector<Lfm2Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_lfm2(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Lfm2Model>(f, arch);
}

}  // namespace ws
