// Gemma 4 vision (projector gemma4v; shared/fixtures/README.md 8.11): pixels mapped to
// [-1, 1], an fp16 patch convolution without bias, separate x / y position tables, RMS-normed
// blocks with per-head Q/K/V norms, 2-D NEOX rotations (columns in the first half of a head,
// rows in the second), clamped linears, post-norms and a layer scale; then k x k average
// pooling, standardization, an RMSNorm and the projection to the language model.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "models/ops.h"
#include "vision/tower_impl.h"

namespace ws::vision {
namespace {

// Gemma4ClippableLinear: y = clamp(W clamp(x, in), out). Absent bounds are +-FLT_MAX.
struct ClampedLinear {
  Matrix w;
  float in_min = -FLT_MAX, in_max = FLT_MAX, out_min = -FLT_MAX, out_max = FLT_MAX;
};

ClampedLinear clamped(const gguf::File& f, const std::string& base, int64_t cols, int64_t rows) {
  ClampedLinear l;
  l.w = ops::matrix(f, base + ".weight", cols, rows);
  auto bound = [&](const char* what, float& v) {
    if (const float* p = ops::optional_vector_f32(f, base + "." + what, 1)) v = *p;
  };
  bound("input_min", l.in_min);
  bound("input_max", l.in_max);
  bound("output_min", l.out_min);
  bound("output_max", l.out_max);
  return l;
}

// ggml_clamp: min(max(v, lo), hi) element-wise, in place.
void clamp(float* x, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(std::min(x[i], hi), lo);
}

// y = L(x) for n rows. llama.cpp clamps the input in place (ggml_clamp returns a view of it),
// so a sibling linear that reads the same input afterwards sees both clamps: callers pass
// the shared input in llama.cpp's graph order (q, k, v; gate, up). x: [n][cols] (modified),
// y: [n][rows].
void apply(const ClampedLinear& l, float* x, int64_t n, float* y, ThreadPool& pool) {
  clamp(x, n * l.w.cols, l.in_min, l.in_max);
  matmul(l.w, x, n, y, pool);
  clamp(y, n * l.w.rows, l.out_min, l.out_max);
}

struct Gemma4vLayer {
  const float *ln1, *ln2;                        // [E] RMSNorm
  ClampedLinear q, k, v, o;                      // [E][E]
  const float *q_norm, *k_norm;                  // [d] per-head RMSNorm
  const float *attn_post_norm, *ffn_post_norm;   // [E]
  ClampedLinear gate, up, down;                  // [F][E], [F][E], [E][F]
  float out_scale = 1.f;                         // layer scale, after the residual add
};

// NEOX rotation of dims [off, off + m) of each head (pairs (off + j, off + j + m/2)) by
// pos[t] * base^(-2j/m), the angle built by repeated multiplication as ggml does.
// x: [n][H][d]; pos: [n].
void rope_half(float* x, int64_t n, int32_t n_head, int32_t d, int32_t off, int32_t m, const int32_t* pos, float base) {
  const float theta_scale = std::pow(base, -2.0f / float(m));
  std::vector<float> cs(static_cast<size_t>(m));  // [m/2][2] f32 cos, sin of each pair
  for (int64_t t = 0; t < n; ++t) {
    float theta = float(pos[t]);
    for (int32_t j = 0; j < m / 2; ++j) {
      cs[size_t(2 * j)] = std::cos(theta);
      cs[size_t(2 * j + 1)] = std::sin(theta);
      theta *= theta_scale;
    }
    for (int32_t h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * d + off;
      for (int32_t j = 0; j < m / 2; ++j) {
        const float c = cs[size_t(2 * j)], s = cs[size_t(2 * j + 1)], x0 = v[j], x1 = v[j + m / 2];
        v[j] = x0 * c - x1 * s;
        v[j + m / 2] = x0 * s + x1 * c;
      }
    }
  }
}

class Gemma4vEncoder final : public VisionEncoder {
 public:
  Gemma4vEncoder(const gguf::File& f, const VisionHParams& hp) : hp_(hp) {
    const int64_t E = hp.n_embd, F = hp.n_ff, P = hp.patch_size, d = E / hp.n_head;
    patch_ = load_patch_kernel(f, "v.patch_embd.weight", E, 3 * P * P, patch_f16_);
    const auto& pe = f.require_tensor("v.position_embd.weight");
    if (pe.ne.size() != 3 || pe.ne[0] != E || pe.ne[2] != 2)
      f.fail("tensor 'v.position_embd.weight' must be {E, n_positions, 2} (an x and a y table)");
    n_table_ = int32_t(pe.ne[1]);
    pos_ = ops::vector_f32(f, "v.position_embd.weight", E * n_table_ * 2);
    for (int32_t i = 0; i < hp.n_layer; ++i) {
      const std::string p = "v.blk." + std::to_string(i) + ".";
      Gemma4vLayer l;
      l.ln1 = ops::vector_f32(f, p + "ln1.weight", E);
      l.ln2 = ops::vector_f32(f, p + "ln2.weight", E);
      l.q = clamped(f, p + "attn_q", E, E);
      l.k = clamped(f, p + "attn_k", E, E);
      l.v = clamped(f, p + "attn_v", E, E);
      l.o = clamped(f, p + "attn_out", E, E);
      l.q_norm = ops::vector_f32(f, p + "attn_q_norm.weight", d);
      l.k_norm = ops::vector_f32(f, p + "attn_k_norm.weight", d);
      l.attn_post_norm = ops::vector_f32(f, p + "attn_post_norm.weight", E);
      l.ffn_post_norm = ops::vector_f32(f, p + "ffn_post_norm.weight", E);
      l.gate = clamped(f, p + "ffn_gate", E, F);
      l.up = clamped(f, p + "ffn_up", E, F);
      l.down = clamped(f, p + "ffn_down", F, E);
      if (const float* s = ops::optional_vector_f32(f, p + "out_scale.weight", 1)) l.out_scale = *s;
      layers_.push_back(l);
    }
    std_bias_ = ops::optional_vector_f32(f, "v.std_bias", E);
    std_scale_ = ops::optional_vector_f32(f, "v.std_scale", E);
    proj_ = clamped(f, "mm.input_projection", E, hp.projection_dim);
  }

  std::vector<float> encode(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace) const override {
    const int32_t P = hp_.patch_size, E = hp_.n_embd, k = hp_.scale_factor, nx = e.width / P, ny = e.height / P;
    if (nx % k != 0 || ny % k != 0 || nx > n_table_ || ny > n_table_)
      throw std::invalid_argument("gemma4v: an image entry of " + std::to_string(e.width) + " x " +
                                  std::to_string(e.height) + " pixels needs a patch grid that is a multiple of " +
                                  std::to_string(k) + " and at most " + std::to_string(n_table_) + " per side");
    const int64_t n = int64_t(nx) * ny;
    PixelEntry scaled = e;  // 2x - 1 on the normalized pixels (the graph's ggml_scale_bias)
    for (float& v : scaled.pixels) v = v * 2.0f + -1.0f;
    const std::vector<float> patches = im2col(scaled, P);  // [n][3*P*P] raster
    std::vector<float> x(size_t(n * E));                   // [n][E] residual stream
    patch_conv(patch_, patches.data(), n, x.data(), pool);
    std::vector<int32_t> px(static_cast<size_t>(n)), py(static_cast<size_t>(n));  // [n] patch column / row
    for (int64_t p = 0; p < n; ++p) {
      px[size_t(p)] = int32_t(p % nx), py[size_t(p)] = int32_t(p / nx);
      const float* tx = pos_ + int64_t(px[size_t(p)]) * E;                        // x table
      const float* ty = pos_ + (int64_t(n_table_) + py[size_t(p)]) * E;           // y table
      for (int32_t i = 0; i < E; ++i) x[size_t(p * E + i)] = (x[size_t(p * E + i)] + tx[i]) + ty[i];
    }
    if (trace) trace->patch_embd_plus_pos = x;
    for (const auto& l : layers_) block(l, x.data(), n, px.data(), py.data(), pool);
    if (trace) trace->vit_out = x;
    return project(x, nx, ny, pool);
  }

 private:
  void block(const Gemma4vLayer& l, float* x, int64_t n, const int32_t* px, const int32_t* py, ThreadPool& pool) const {
    const int32_t E = hp_.n_embd, H = hp_.n_head, d = E / H;
    const float eps = hp_.eps;
    std::vector<float> a(size_t(n * E)), q(a.size()), k(a.size()), v(a.size()), o(a.size());  // [n][E]
    std::vector<float> g(size_t(n * hp_.n_ff)), u(g.size());                                // [n][F]
    ops::rms_norm(x, l.ln1, a.data(), n, E, eps);
    apply(l.q, a.data(), n, q.data(), pool);
    apply(l.k, a.data(), n, k.data(), pool);
    apply(l.v, a.data(), n, v.data(), pool);
    ops::rms_norm(q.data(), l.q_norm, q.data(), n * H, d, eps);
    ops::rms_norm(k.data(), l.k_norm, k.data(), n * H, d, eps);
    for (float* t : {q.data(), k.data()}) {
      rope_half(t, n, H, d, 0, d / 2, px, 100.0f);      // columns: first half of each head
      rope_half(t, n, H, d, d / 2, d / 2, py, 100.0f);  // rows: second half
    }
    ops::rms_norm(v.data(), nullptr, v.data(), n * H, d, eps);
    vit_attention(q.data(), k.data(), v.data(), n, H, d, 1.0f, a.data(), pool);  // the Q/K norms carry the scale
    apply(l.o, a.data(), n, o.data(), pool);
    ops::rms_norm(o.data(), l.attn_post_norm, o.data(), n, E, eps);
    ops::add_scaled(x, o.data(), n * E);
    ops::rms_norm(x, l.ln2, a.data(), n, E, eps);
    apply(l.gate, a.data(), n, g.data(), pool);
    apply(l.up, a.data(), n, u.data(), pool);
    vit_activation(g.data(), int64_t(g.size()), hp_.gelu_quick);
    for (size_t i = 0; i < u.size(); ++i) u[i] = g[i] * u[i];
    apply(l.down, u.data(), n, o.data(), pool);
    ops::rms_norm(o.data(), l.ffn_post_norm, o.data(), n, E, eps);
    ops::add_scaled(x, o.data(), n * E);
    if (l.out_scale != 1.f)
      for (int64_t i = 0; i < n * E; ++i) x[i] *= l.out_scale;
  }

  // k x k average pool (raster on the pooled grid) * sqrt(E), (m - std_bias) * std_scale,
  // RMSNorm without weight, input projection. vit: [ny*nx][E] -> [n/k^2][T].
  std::vector<float> project(const std::vector<float>& vit, int32_t nx, int32_t ny, ThreadPool& pool) const {
    const int32_t E = hp_.n_embd, k = hp_.scale_factor, mx = nx / k, my = ny / k;
    const int64_t m = int64_t(mx) * my;
    std::vector<float> pooled(size_t(m * E), 0.f);  // [m][E]
    const float root_e = std::sqrt(float(E));
    for (int32_t Y = 0; Y < my; ++Y)
      for (int32_t X = 0; X < mx; ++X) {
        float* out = pooled.data() + (int64_t(Y) * mx + X) * E;
        for (int32_t dy = 0; dy < k; ++dy)
          for (int32_t dx = 0; dx < k; ++dx) {
            const float* in = vit.data() + (int64_t(k * Y + dy) * nx + k * X + dx) * E;
            for (int32_t i = 0; i < E; ++i) out[i] += in[i];
          }
        for (int32_t i = 0; i < E; ++i) {
          float v = out[i] / float(k * k) * root_e;
          if (std_bias_ && std_scale_) v = (v - std_bias_[i]) * std_scale_[i];
          out[i] = v;
        }
      }
    ops::rms_norm(pooled.data(), nullptr, pooled.data(), m, E, hp_.eps);
    std::vector<float> out(size_t(m * hp_.projection_dim));  // [m][T]
    apply(proj_, pooled.data(), m, out.data(), pool);
    return out;
  }

  VisionHParams hp_;
  std::vector<uint16_t> patch_f16_;       // [E][3*P*P] f16 bits
  Matrix patch_;                          // F16 view of patch_f16_, no bias
  const float* pos_ = nullptr;            // [2][n_table][E]: the x (column) table, then the y (row) table
  int32_t n_table_ = 0;                   // entries per table
  std::vector<Gemma4vLayer> layers_;
  const float* std_bias_ = nullptr;       // [E] optional
  const float* std_scale_ = nullptr;      // [E] optional
  ClampedLinear proj_;                    // mm.input_projection: [T][E]
};

}  // namespace

std::unique_ptr<VisionEncoder> make_gemma4v_encoder(const gguf::File& f, const VisionHParams& hp) {
  return std::make_unique<Gemma4vEncoder>(f, hp);
}

}  // namespace ws::vision
