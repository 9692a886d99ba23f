#include "models/mamba2_mixer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
// Same threshold as GGUF runtimes: above 20 softplus(x) == x in f32 anyway.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Causal depthwise conv + bias + SiLU over n tokens, channel by channel.
//   xbc_in: [n][in_stride] (the xBC slice starts at column 0), tail: [d_conv-1][C] (updated),
//   xbc: [n][C] output.
void causal_conv_silu(const Mamba2Weights& w, const Mamba2Dims& d, const float* xbc_in, int64_t in_stride,
                      int64_t n, float* tail, float* xbc, ThreadPool& pool) {
  const int64_t C = d.conv_channels(), K = d.d_conv;
  pool.parallel_for(C, 16, [&](int64_t c0, int64_t c1) {
    std::vector<float> win(size_t(K + n));  // [K-1 + n] this channel's history then new inputs
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t k = 0; k < K - 1; ++k) win[k] = tail[k * C + c];
      for (int64_t t = 0; t < n; ++t) win[K - 1 + t] = xbc_in[t * in_stride + c];
      const float* wc = w.conv_w + c * K;
      for (int64_t t = 0; t < n; ++t) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += win[t + k] * wc[k];  // oldest tap first
        if (w.conv_b) s += w.conv_b[c];
        xbc[t * C + c] = silu(s);
      }
      // The new tail is the last K-1 inputs (older tail values when n < K-1).
      for (int64_t k = 0; k < K - 1; ++k) tail[k * C + c] = win[n + k];
    }
  });
}

// Selective scan, head by head, token by token in order; y = C.s + D x.
//   xbc: [n][C] conv output (x | B | C), dt: [n][dt_stride] raw dt (first H columns),
//   s: [H][P][N] state (updated), y: [n][d_inner].
void selective_scan(const Mamba2Weights& w, const Mamba2Dims& d, const float* xbc, const float* dt, int64_t dt_stride,
                    int64_t n, float* s, float* y, ThreadPool& pool) {
  const int64_t C = d.conv_channels(), P = d.head_dim(), N = d.d_state, di = d.d_inner;
  const int64_t heads_per_group = d.n_heads / d.n_groups;
  pool.parallel_for(d.n_heads, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / heads_per_group;
      float* sh = s + h * P * N;  // [P][N]
      for (int64_t t = 0; t < n; ++t) {
        const float* x = xbc + t * C + h * P;       // [P]
        const float* B = xbc + t * C + di + g * N;  // [N]
        const float* Cv = xbc + t * C + di + d.n_groups * N + g * N;  // [N]
        const float dts = softplus(dt[t * dt_stride + h] + w.dt_bias[h]);
        const float dA = std::exp(dts * w.a[h]);
        float* yt = y + t * di + h * P;
        for (int64_t p = 0; p < P; ++p) {
          const float x_dt = x[p] * dts;
          float* sp = sh + p * N;
          float acc = 0.f;
          for (int64_t i = 0; i < N; ++i) {
            sp[i] = sp[i] * dA + B[i] * x_dt;
            acc += sp[i] * Cv[i];
          }
          yt[p] = acc + x[p] * w.d[h];
        }
      }
    }
  });
}

}  // namespace

Mamba2Dims read_mamba2_dims(const gguf::File& f, const std::string& arch, int32_t n_embd) {
  const ArchKeys k(f, arch);
  Mamba2Dims d;
  d.n_embd = n_embd;
  d.d_inner = int32_t(k.require_int("ssm.inner_size"));
  d.d_state = int32_t(k.require_int("ssm.state_size"));
  d.n_heads = int32_t(k.require_int("ssm.time_step_rank"));
  d.n_groups = int32_t(k.get_int("ssm.group_count", 1));
  d.d_conv = int32_t(k.require_int("ssm.conv_kernel"));
  const std::string a = arch + ".ssm.";
  if (d.d_inner % d.n_heads)
    f.fail(a + "inner_size " + std::to_string(d.d_inner) + " is not a multiple of " + a +
                          "time_step_rank " + std::to_string(d.n_heads));
  if (d.n_groups <= 0 || d.n_heads % d.n_groups || d.d_inner % d.n_groups)
    f.fail(a + "group_count " + std::to_string(d.n_groups) + " must divide time_step_rank " +
                          std::to_string(d.n_heads) + " and inner_size " + std::to_string(d.d_inner));
  return d;
}

Mamba2Weights load_mamba2_weights(const gguf::File& f, const std::string& p, const Mamba2Dims& d) {
  Mamba2Weights w{};
  w.in_proj = ops::matrix(f, p + "ssm_in.weight", d.n_embd, d.in_rows());
  w.out_proj = ops::matrix(f, p + "ssm_out.weight", d.d_inner, d.n_embd);
  w.conv_w = ops::vector_f32(f, p + "ssm_conv1d.weight", int64_t(d.conv_channels()) * d.d_conv);
  w.conv_b = ops::optional_tensor(f, p + "ssm_conv1d.bias") ? ops::vector_f32(f, p + "ssm_conv1d.bias", d.conv_channels())
                                                          : nullptr;
  w.dt_bias = ops::vector_f32(f, p + "ssm_dt.bias", d.n_heads);
  w.a = ops::vector_f32(f, p + "ssm_a", d.n_heads);
  w.d = ops::vector_f32(f, p + "ssm_d", d.n_heads);
  w.norm = ops::vector_f32(f, p + "ssm_norm.weight", d.d_inner);
  return w;
}

std::vector<size_t> mamba2_state_sizes(const Mamba2Dims& d) {
  return {size_t(d.d_conv - 1) * size_t(d.conv_channels()),
          size_t(d.n_heads) * size_t(d.head_dim()) * size_t(d.d_state)};
}

void mamba2_mixer(const Mamba2Weights& w, const Mamba2Dims& d, RecurrentState& state, const float* xn, int64_t n,
                  float* out, float eps, ThreadPool& pool) {
  const int64_t di = d.d_inner, C = d.conv_channels(), rows = d.in_rows();
  std::vector<float> zxbcdt(size_t(n * rows));  // [n][z (d_inner) | xBC (C) | dt (H)]
  std::vector<float> xbc(size_t(n * C));        // [n][C] after conv + SiLU
  std::vector<float> y(size_t(n * di));         // [n][d_inner] scan output
  matmul(w.in_proj, xn, n, zxbcdt.data(), pool);
  causal_conv_silu(w, d, zxbcdt.data() + di, rows, n, state.buffer(0).data(), xbc.data(), pool);
  selective_scan(w, d, xbc.data(), zxbcdt.data() + di + C, rows, n, state.buffer(1).data(), y.data(), pool);
  state.advance(int32_t(n));
  // Gate with SiLU(z), then RMSNorm each group of d_inner/G channels with its own weights.
  const int64_t gs = di / d.n_groups;
  for (int64_t t = 0; t < n; ++t) {
    float* yt = y.data() + t * di;
    ops::swiglu(zxbcdt.data() + t * rows, yt, di);
    for (int64_t g = 0; g < d.n_groups; ++g) ops::rms_norm(yt + g * gs, w.norm + g * gs, yt + g * gs, 1, gs, eps);
  }
  matmul(w.out_proj, y.data(), n, out, pool);
}

std::unique_ptr<Model> make_mamba2_family(const gguf::File& f, const std::string& arch) {
  if (arch == "granitehybrid") return make_granite_hybrid(f, arch);
  if (arch == "nemotron_h") return make_nemotron_h(f, arch);
  return make_mamba2(f, arch);
}

HybridConfig read_hybrid_config(const gguf::File& f, const std::string& arch) {
  const ArchKeys k(f, arch);
  HybridConfig h;
  ModelConfig& c = h.cfg;
  c.arch = arch;
  c.model_id = model_identity(f);
  c.n_embd = int32_t(k.require_int("embedding_length"));
  c.n_layer = int32_t(k.require_int("block_count"));
  c.n_head = int32_t(k.get_int("attention.head_count", 0));
  c.n_ctx_train = int32_t(k.get_int("context_length", 4096));
  c.rms_eps = float(k.get_float("attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = float(k.get_float("rope.freq_base", 10000.0));
  c.head_dim = c.n_head > 0 ? int32_t(k.get_int("attention.key_length", c.n_embd / c.n_head)) : 0;
  c.n_rot = c.head_dim;
  // A scalar key applies to every layer; an array must have one entry per layer.
  auto per_layer = [&](const std::string& key) {
    const auto v = k.get_ints(key);
    if (v.size() != 1 && v.size() != size_t(c.n_layer))
      f.fail("key '" + arch + "." + key + "' has " + std::to_string(v.size()) + " entries, expected 1 or " +
             std::to_string(c.n_layer));
    std::vector<int32_t> out(size_t(c.n_layer));
    for (size_t i = 0; i < out.size(); ++i) out[i] = int32_t(v.size() == 1 ? v[0] : v[i]);
    return out;
  };
  h.n_head_kv = per_layer("attention.head_count_kv");
  h.n_ff = per_layer("feed_forward_length");
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const int32_t kv = h.n_head_kv[size_t(i)];
    if (kv < 0 || (kv > 0 && (c.n_head <= 0 || c.n_head % kv)))
      f.fail("layer " + std::to_string(i) + ": head_count " + std::to_string(c.n_head) +
             " is not a multiple of head_count_kv " + std::to_string(kv));
    c.n_head_kv = std::max(c.n_head_kv, kv);
    c.n_ff = std::max(c.n_ff, h.n_ff[size_t(i)]);
  }
  const auto* tokens = f.find("tokenizer.ggml.tokens");
  const auto* emb = f.find_tensor("token_embd.weight");
  if (tokens && tokens->type == gguf::ValueType::array) c.n_vocab = int32_t(tokens->as_array().items.size());
  else if (emb && emb->ne.size() == 2) c.n_vocab = int32_t(emb->ne[1]);
  else f.fail("cannot determine the vocabulary size (no tokenizer.ggml.tokens, no token_embd.weight)");
  return h;
}

}  // namespace ws

namespace ws::ssm_family {

void embed(const Matrix& tok_embd, std::span<const Token> tokens, float* x) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= tok_embd.rows)
      throw std::runtime_error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                               std::to_string(tok_embd.rows - 1) + ")");
    get_row(tok_embd, tokens[t], x + int64_t(t) * tok_embd.cols);
  }
}

void output_logits(const float* x, int64_t n, LogitsMode mode, const float* norm, const Matrix& output, float eps,
                   float* logits, ThreadPool& pool) {
  if (mode == LogitsMode::none || n == 0) return;
  const int64_t d = output.cols, first = mode == LogitsMode::all ? 0 : n - 1, rows = n - first;
  std::vector<float> xn(size_t(rows * d));  // [rows][n_embd]
  ops::rms_norm(x + first * d, norm, xn.data(), rows, d, eps);
  matmul(output, xn.data(), rows, logits, pool);
}

AttnWeights load_attention(const gguf::File& f, const std::string& p, int32_t n_embd, int32_t n_head, int32_t n_kv,
                           int32_t hd) {
  AttnWeights w;
  w.wq = ops::matrix(f, p + "attn_q.weight", n_embd, int64_t(n_head) * hd);
  w.wk = ops::matrix(f, p + "attn_k.weight", n_embd, int64_t(n_kv) * hd);
  w.wv = ops::matrix(f, p + "attn_v.weight", n_embd, int64_t(n_kv) * hd);
  w.wo = ops::matrix(f, p + "attn_output.weight", int64_t(n_head) * hd, n_embd);
  return w;
}

void attention(const AttnWeights& w, FullKvState& kv, const float* xn, int64_t n, int32_t pos0, int32_t n_head,
               float scale, RopeType rope_type, float rope_base, float* out, ThreadPool& pool) {
  const int32_t hd = kv.head_dim();
  const int64_t nq = int64_t(n_head) * hd, nkv = kv.row_size();
  std::vector<float> q(size_t(n * nq)), attn(size_t(n * nq));  // [n][n_head][hd]
  std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd]
  matmul(w.wq, xn, n, q.data(), pool);
  matmul(w.wk, xn, n, k.data(), pool);
  matmul(w.wv, xn, n, v.data(), pool);
  ops::rope(q.data(), n, n_head, hd, hd, pos0, rope_base, rope_type);
  ops::rope(k.data(), n, kv.n_kv_heads(), hd, hd, pos0, rope_base, rope_type);
  kv.append(k.data(), v.data(), int32_t(n));
  ops::attention(q.data(), kv, n, pos0, {n_head, scale, 0}, attn.data(), pool);
  matmul(w.wo, attn.data(), n, out, pool);
}

}  // namespace ws::ssm_family
