// Qwen3.5 dense (qwen35): a hybrid of gated delta net (GDN) layers and gated full
// attention every `full_attention_interval` layers. Every layer is
//   h = x + mixer(RMSNorm(x, attn_norm)),  x = h + SwiGLU(RMSNorm(h, post_attention_norm)).
// Full attention layers keep paged KV; GDN layers keep one RecurrentState holding the
// causal-conv tail and the delta-net state matrix of every v-head. The recurrence runs
// token by token in a fixed order, so a token's result never depends on the micro-batch.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x[i] /= max(||x||, eps) for each of n rows of d (the L2 normalisation of q and k).
void l2_norm(float* x, int64_t n, int64_t d, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    float* v = x + r * d;
    double sum = 0;  // double like ggml's row reductions
    for (int64_t i = 0; i < d; ++i) sum += double(v[i]) * v[i];
    const float scale = 1.0f / std::max(float(std::sqrt(sum)), eps);
    for (int64_t i = 0; i < d; ++i) v[i] *= scale;
  }
}

struct GdnShape {
  int32_t n_k_heads = 0;  // Gk: q/k heads (ssm.group_count)
  int32_t n_v_heads = 0;  // Hv: v heads (ssm.time_step_rank)
  int32_t dk = 0;         // key/query length per head (ssm.state_size)
  int32_t dv = 0;         // value length per head (ssm.inner_size / Hv)
  int32_t conv_k = 0;     // causal conv kernel length (ssm.conv_kernel)
  int64_t qk_dim() const { return int64_t(n_k_heads) * dk; }
  int64_t v_dim() const { return int64_t(n_v_heads) * dv; }
  int64_t conv_ch() const { return 2 * qk_dim() + v_dim(); }  // [q, k, v] channels of attn_qkv
};

struct Qwen35Layer {
  bool full_attn = false;
  const float* attn_norm;        // [n_embd]
  const float* post_norm;        // [n_embd] post_attention_norm, before the FFN
  // Gated full attention.
  Matrix wq;                     // [n_head * 2 * hd, n_embd]: per head [query (hd), gate (hd)]
  Matrix wk, wv;                 // [n_kv * hd, n_embd]
  Matrix wo;                     // [n_embd, n_head * hd]
  const float* q_norm;           // [hd]
  const float* k_norm;           // [hd]
  // Gated delta net.
  Matrix wqkv;                   // [conv_ch, n_embd]
  Matrix wz;                     // [Hv * dv, n_embd] attn_gate: the output gate z
  Matrix wbeta, walpha;          // [Hv, n_embd]
  const float* conv_w;           // [conv_ch][conv_k] f32 (ggml {conv_k, conv_ch})
  const float* dt_bias;          // [Hv]
  const float* ssm_a;            // [Hv] = -exp(A_log)
  const float* ssm_norm;         // [dv]
  Matrix wssm_out;               // [n_embd, Hv * dv]
  Matrix gate, up, down;         // gate/up: [n_ff, n_embd], down: [n_embd, n_ff]
};

class Qwen35Model final : public Model {
 public:
  Qwen35Model(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    cfg_.rope_type = RopeType::neox;  // IMROPE with equal position components == NEOX over n_rot dims
    const ArchKeys keys(f, arch);
    if (cfg_.n_head <= 0 || cfg_.n_ff <= 0) f.fail(arch + ": attention.head_count and feed_forward_length are required");
    interval_ = int32_t(keys.require_int("full_attention_interval"));
    gdn_.n_k_heads = int32_t(keys.require_int("ssm.group_count"));
    gdn_.n_v_heads = int32_t(keys.require_int("ssm.time_step_rank"));
    gdn_.dk = int32_t(keys.require_int("ssm.state_size"));
    gdn_.conv_k = int32_t(keys.require_int("ssm.conv_kernel"));
    const int64_t inner = keys.require_int("ssm.inner_size");
    if (inner % gdn_.n_v_heads != 0 || gdn_.n_v_heads % gdn_.n_k_heads != 0)
      f.fail(arch + ": ssm.inner_size " + std::to_string(inner) + " / time_step_rank " +
             std::to_string(gdn_.n_v_heads) + " / group_count " + std::to_string(gdn_.n_k_heads) + " are inconsistent");
    gdn_.dv = int32_t(inner / gdn_.n_v_heads);
    const int64_t d = cfg_.n_embd;
    tok_embd_ = ops::matrix(f, "token_embd.weight", d, cfg_.n_vocab);
    output_ = ops::optional_tensor(f, "output.weight") ? ops::matrix(f, "output.weight", d, cfg_.n_vocab) : tok_embd_;
    output_norm_ = ops::vector_f32(f, "output_norm.weight", d);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;  // [n_layer]
    for (const auto& l : layers_) {
      if (l.full_attn) {
        layers.push_back(std::make_unique<FullKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, opts.kv_page_size));
      } else {
        // buffer 0: conv tail [conv_k-1][conv_ch]; buffer 1: S [Hv][dk][dv]
        layers.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{
            size_t(gdn_.conv_k - 1) * size_t(gdn_.conv_ch()),
            size_t(gdn_.n_v_heads) * size_t(gdn_.dk) * size_t(gdn_.dv)}));
      }
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
    std::vector<float> xn(size_t(n * d));  // [n][n_embd] normed input of a sub-block
    std::vector<float> o(size_t(n * d));   // [n][n_embd] sub-block output
    for (size_t il = 0; il < layers_.size(); ++il) {
      const Qwen35Layer& l = layers_[il];
      ops::rms_norm(x.data(), l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
      if (l.full_attn)
        attention(l, static_cast<FullKvState&>(state.layer(il)), xn.data(), n, state.position(), o.data(), pool);
      else
        delta_net(l, static_cast<RecurrentState&>(state.layer(il)), xn.data(), n, o.data(), pool);
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
  Qwen35Layer load_layer(const gguf::File& f, int32_t i) const {
    const std::string p = "blk." + std::to_string(i) + ".";
    const int64_t d = cfg_.n_embd, hd = cfg_.head_dim, nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd;
    Qwen35Layer l{};
    l.full_attn = (i + 1) % interval_ == 0;
    l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
    l.post_norm = ops::vector_f32(f, p + "post_attention_norm.weight", d);
    if (l.full_attn) {
      l.wq = ops::matrix(f, p + "attn_q.weight", d, 2 * nq);
      l.wk = ops::matrix(f, p + "attn_k.weight", d, nkv);
      l.wv = ops::matrix(f, p + "attn_v.weight", d, nkv);
      l.wo = ops::matrix(f, p + "attn_output.weight", nq, d);
      l.q_norm = ops::vector_f32(f, p + "attn_q_norm.weight", hd);
      l.k_norm = ops::vector_f32(f, p + "attn_k_norm.weight", hd);
    } else {
      const int64_t hv = gdn_.n_v_heads;
      l.wqkv = ops::matrix(f, p + "attn_qkv.weight", d, gdn_.conv_ch());
      l.wz = ops::matrix(f, p + "attn_gate.weight", d, gdn_.v_dim());
      l.wbeta = ops::matrix(f, p + "ssm_beta.weight", d, hv);
      l.walpha = ops::matrix(f, p + "ssm_alpha.weight", d, hv);
      l.conv_w = ops::vector_f32(f, p + "ssm_conv1d.weight", gdn_.conv_ch() * gdn_.conv_k);
      l.dt_bias = ops::vector_f32(f, p + "ssm_dt.bias", hv);
      l.ssm_a = ops::vector_f32(f, p + "ssm_a", hv);
      l.ssm_norm = ops::vector_f32(f, p + "ssm_norm.weight", gdn_.dv);
      l.wssm_out = ops::matrix(f, p + "ssm_out.weight", gdn_.v_dim(), d);
    }
    l.gate = ops::matrix(f, p + "ffn_gate.weight", d, cfg_.n_ff);
    l.up = ops::matrix(f, p + "ffn_up.weight", d, cfg_.n_ff);
    l.down = ops::matrix(f, p + "ffn_down.weight", cfg_.n_ff, d);
    return l;
  }

  // x += SwiGLU(RMSNorm(x, post_attention_norm)); xn, o: [n][n_embd] scratch.
  void ffn(const Qwen35Layer& l, float* x, int64_t n, float* xn, float* o, ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd;
    std::vector<float> g(size_t(n * cfg_.n_ff)), u(size_t(n * cfg_.n_ff));  // [n][n_ff]
    ops::rms_norm(x, l.post_norm, xn, n, d, cfg_.rms_eps);
    matmul(l.gate, xn, n, g.data(), pool);
    matmul(l.up, xn, n, u.data(), pool);
    ops::swiglu(g.data(), u.data(), n * cfg_.n_ff);
    matmul(l.down, u.data(), n, o, pool);
    ops::add_scaled(x, o, n * d);
  }

  // Gated full attention: out = attn_output(attention(q, k, v) * sigmoid(gate)). out: [n][n_embd].
  void attention(const Qwen35Layer& l, FullKvState& kv, const float* xn, int64_t n, int32_t pos0, float* out,
                 ThreadPool& pool) const {
    const int64_t hd = cfg_.head_dim, nh = cfg_.n_head, nq = nh * hd, nkv = cfg_.n_head_kv * hd;
    std::vector<float> qg(size_t(n * 2 * nq));                   // [n][n_head][query hd | gate hd]
    std::vector<float> q(size_t(n * nq)), gate(size_t(n * nq));  // [n][n_head][hd]
    std::vector<float> attn(size_t(n * nq));                     // [n][n_head][hd]
    std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd]
    matmul(l.wq, xn, n, qg.data(), pool);
    matmul(l.wk, xn, n, k.data(), pool);
    matmul(l.wv, xn, n, v.data(), pool);
    for (int64_t r = 0; r < n * nh; ++r) {  // de-interleave the per-head [query, gate] pairs
      std::copy_n(qg.data() + r * 2 * hd, hd, q.data() + r * hd);
      std::copy_n(qg.data() + r * 2 * hd + hd, hd, gate.data() + r * hd);
    }
    ops::rms_norm(q.data(), l.q_norm, q.data(), n * nh, hd, cfg_.rms_eps);
    ops::rms_norm(k.data(), l.k_norm, k.data(), n * cfg_.n_head_kv, hd, cfg_.rms_eps);
    ops::rope(q.data(), n, cfg_.n_head, int32_t(hd), cfg_.n_rot, pos0, cfg_.rope_base, cfg_.rope_type);
    ops::rope(k.data(), n, cfg_.n_head_kv, int32_t(hd), cfg_.n_rot, pos0, cfg_.rope_base, cfg_.rope_type);
    kv.append(k.data(), v.data(), int32_t(n));
    ops::attention(q.data(), kv, n, pos0, {cfg_.n_head, 1.0f / std::sqrt(float(hd)), 0}, attn.data(), pool);
    for (int64_t i = 0; i < n * nq; ++i) attn[i] *= sigmoid(gate[i]);
    matmul(l.wo, attn.data(), n, out, pool);
  }

  // Causal depthwise conv over [tail ++ qkv] followed by SiLU, in place on qkv
  // ([n][conv_ch]); the tail ([conv_k-1][conv_ch], oldest first) becomes the last inputs.
  void conv_silu(const Qwen35Layer& l, std::span<float> tail, float* qkv, int64_t n) const {
    const int64_t ch = gdn_.conv_ch(), kk = gdn_.conv_k, keep = kk - 1;
    std::vector<float> win(size_t((keep + n) * ch));  // [conv_k-1 + n][conv_ch] raw inputs, oldest first
    std::copy(tail.begin(), tail.end(), win.begin());
    std::copy_n(qkv, n * ch, win.data() + keep * ch);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t c = 0; c < ch; ++c) {
        float y = 0.f;
        for (int64_t j = 0; j < kk; ++j) y += l.conv_w[c * kk + j] * win[size_t((t + j) * ch + c)];
        qkv[t * ch + c] = silu(y);
      }
    }
    std::copy_n(win.data() + n * ch, keep * ch, tail.data());
  }

  // The delta-rule recurrence of v-head h over n tokens, in token order:
  //   S <- S*exp(g); delta = beta*(v - S^T k); S <- S + k delta^T; o = S^T q / sqrt(dk).
  // S: [dk][dv]; qkv: [n][conv_ch] after conv (q, k L2-normalised); o: [n][Hv][dv].
  void recur_head(int32_t h, float* S, const float* qkv, const float* beta, const float* g, int64_t n,
                  float* o) const {
    const int64_t dk = gdn_.dk, dv = gdn_.dv, ch = gdn_.conv_ch(), hv = gdn_.n_v_heads;
    const int64_t hk = h % gdn_.n_k_heads;  // v-heads tile the q/k heads
    const float scale = 1.0f / std::sqrt(float(dk));
    std::vector<float> delta(static_cast<size_t>(dv));  // [dv] f32
    for (int64_t t = 0; t < n; ++t) {
      const float* q = qkv + t * ch + hk * dk;
      const float* k = qkv + t * ch + gdn_.qk_dim() + hk * dk;
      const float* v = qkv + t * ch + 2 * gdn_.qk_dim() + h * dv;
      const float decay = std::exp(g[t * hv + h]), b = beta[t * hv + h];
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
      for (int64_t j = 0; j < dv; ++j) delta[size_t(j)] = 0.f;
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) delta[size_t(j)] += S[i * dv + j] * k[i];
      for (int64_t j = 0; j < dv; ++j) delta[size_t(j)] = (v[j] - delta[size_t(j)]) * b;
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * delta[size_t(j)];
      float* out = o + (t * hv + h) * dv;
      for (int64_t j = 0; j < dv; ++j) out[j] = 0.f;
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) out[j] += S[i * dv + j] * q[i];
      for (int64_t j = 0; j < dv; ++j) out[j] *= scale;
    }
  }

  // Gated delta net mixer; updates rs (conv tail, S) and advances it by n. out: [n][n_embd].
  void delta_net(const Qwen35Layer& l, RecurrentState& rs, const float* xn, int64_t n, float* out,
                 ThreadPool& pool) const {
    const int64_t ch = gdn_.conv_ch(), hv = gdn_.n_v_heads, dv = gdn_.dv, vd = gdn_.v_dim();
    std::vector<float> qkv(size_t(n * ch));                      // [n][conv_ch]: q [Gk][dk], k [Gk][dk], v [Hv][dv]
    std::vector<float> z(size_t(n * vd));                        // [n][Hv][dv] output gate
    std::vector<float> beta(size_t(n * hv)), g(size_t(n * hv));  // [n][Hv]
    std::vector<float> o(size_t(n * vd));                        // [n][Hv][dv] recurrence output
    matmul(l.wqkv, xn, n, qkv.data(), pool);
    matmul(l.wz, xn, n, z.data(), pool);
    matmul(l.wbeta, xn, n, beta.data(), pool);
    matmul(l.walpha, xn, n, g.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < hv; ++h) {
        float& b = beta[size_t(t * hv + h)];
        float& a = g[size_t(t * hv + h)];
        b = sigmoid(b);
        a = softplus(a + l.dt_bias[h]) * l.ssm_a[h];
      }
    }
    conv_silu(l, rs.buffer(0), qkv.data(), n);
    for (int64_t t = 0; t < n; ++t) {  // q and k are the first 2*Gk rows of dk in each token's row
      l2_norm(qkv.data() + t * ch, 2 * gdn_.n_k_heads, gdn_.dk, cfg_.rms_eps);
    }
    float* S = rs.buffer(1).data();  // [Hv][dk][dv]
    // v-heads are independent; each one runs its tokens in order on one thread.
    pool.parallel_for(hv, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h)
        recur_head(int32_t(h), S + h * gdn_.dk * dv, qkv.data(), beta.data(), g.data(), n, o.data());
    });
    rs.advance(int32_t(n));
    ops::rms_norm(o.data(), l.ssm_norm, o.data(), n * hv, dv, cfg_.rms_eps);
    for (int64_t i = 0; i < n * vd; ++i) o[size_t(i)] *= silu(z[size_t(i)]);
    matmul(l.wssm_out, o.data(), n, out, pool);
  }

  ModelConfig cfg_;
  GdnShape gdn_;
  int32_t interval_ = 0;                // every interval-th layer is full attention
  Matrix tok_embd_, output_;            // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;  // [n_embd]
  std::vector<Qwen35Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen35(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Qwen35Model>(f, arch);
}

}  // namespace ws
