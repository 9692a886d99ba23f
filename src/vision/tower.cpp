// The SigLIP-style vision tower of an mmproj file: fp16 patch convolution (as ggml's
// im2col path rounds it), position embeddings, pre-LN transformer blocks with biases,
// GELU through ggml's fp16 table, final LayerNorm.
#include <algorithm>
#include <cmath>
#include <limits>

#include "models/ops.h"
#include "vision/clip.h"
#include "vision/tower_impl.h"

namespace ws::vision {
namespace {

// y = x W^T + b for n rows. x: [n][w.cols], y: [n][w.rows].
void linear(const Matrix& w, const float* b, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul(w, x, n, y, pool);
  if (b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < w.rows; ++i) y[t * w.rows + i] += b[i];
}

}  // namespace

void vit_attention(const float* q, const float* k, const float* v, int64_t n, int32_t n_head, int32_t d, float scale,
                   float* out, ThreadPool& pool) {
  const int64_t E = int64_t(n_head) * d;
  pool.parallel_for(n * n_head, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(n));  // [n] scores of one query
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / n_head, h = job % n_head;
      const float* qr = q + t * E + h * d;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        const float* kr = k + j * E + h * d;
        float dot = 0.f;
        for (int32_t i = 0; i < d; ++i) dot += qr[i] * kr[i];
        s[size_t(j)] = dot * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0;  // double like ggml's softmax
      for (int64_t j = 0; j < n; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
      const float inv = float(1.0 / sum);
      float* o = out + t * E + h * d;
      std::fill(o, o + d, 0.f);
      for (int64_t j = 0; j < n; ++j) {
        const float p = s[size_t(j)] * inv;
        const float* vr = v + j * E + h * d;
        for (int32_t i = 0; i < d; ++i) o[i] += p * vr[i];
      }
    }
  });
}

namespace {

// One axis of a bilinear resize with antialias (triangle filter widened when shrinking):
// weights[o][i] for output o over input i.
std::vector<float> axis_weights(int32_t n_in, int32_t n_out) {
  std::vector<float> w(size_t(n_out) * size_t(n_in), 0.f);
  const float scale = float(n_out) / float(n_in);
  const float support = std::max(1.0f, 1.0f / scale);
  for (int32_t o = 0; o < n_out; ++o) {
    const float center = (float(o) + 0.5f) / scale;
    float total = 0.f;
    for (int32_t i = 0; i < n_in; ++i) {
      const float x = (float(i) + 0.5f - center) / support;
      const float f = std::max(0.0f, 1.0f - std::fabs(x));
      w[size_t(o) * size_t(n_in) + size_t(i)] = f;
      total += f;
    }
    if (total > 0)
      for (int32_t i = 0; i < n_in; ++i) w[size_t(o) * size_t(n_in) + size_t(i)] /= total;
  }
  return w;
}

}  // namespace

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t d, float eps) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    double sum = 0;  // ggml accumulates the mean and the variance in double
    for (int64_t i = 0; i < d; ++i) sum += xr[i];
    const float mean = float(sum / double(d));
    double sum2 = 0;
    for (int64_t i = 0; i < d; ++i) {
      const float v = xr[i] - mean;
      yr[i] = v;
      sum2 += double(v) * double(v);
    }
    const float scale = 1.0f / std::sqrt(float(sum2 / double(d)) + eps);
    for (int64_t i = 0; i < d; ++i) {
      float v = yr[i] * scale;
      if (w) v = v * w[i];
      if (b) v = v + b[i];
      yr[i] = v;
    }
  }
}

std::vector<float> resize_position_grid(const float* pos, int32_t side, int32_t E, int32_t nx, int32_t ny) {
  const std::vector<float> wx = axis_weights(side, nx), wy = axis_weights(side, ny);
  std::vector<float> tmp(size_t(side) * size_t(nx) * size_t(E), 0.f);  // [side][nx][E]: rows resized along x
  for (int32_t r = 0; r < side; ++r)
    for (int32_t o = 0; o < nx; ++o)
      for (int32_t i = 0; i < side; ++i) {
        const float f = wx[size_t(o) * size_t(side) + size_t(i)];
        if (f == 0.f) continue;
        for (int32_t e = 0; e < E; ++e)
          tmp[(size_t(r) * size_t(nx) + size_t(o)) * size_t(E) + size_t(e)] +=
              f * pos[(size_t(r) * size_t(side) + size_t(i)) * size_t(E) + size_t(e)];
      }
  std::vector<float> out(size_t(ny) * size_t(nx) * size_t(E), 0.f);  // [ny][nx][E]
  for (int32_t o = 0; o < ny; ++o)
    for (int32_t r = 0; r < side; ++r) {
      const float f = wy[size_t(o) * size_t(side) + size_t(r)];
      if (f == 0.f) continue;
      for (size_t i = 0; i < size_t(nx) * size_t(E); ++i)
        out[size_t(o) * size_t(nx) * size_t(E) + i] += f * tmp[size_t(r) * size_t(nx) * size_t(E) + i];
    }
  return out;
}

std::vector<float> im2col(const PixelEntry& e, int32_t P) {
  if (e.width <= 0 || e.height <= 0 || e.width % P != 0 || e.height % P != 0 ||
      e.pixels.size() != size_t(3) * size_t(e.width) * size_t(e.height))
    throw std::invalid_argument("image entry of " + std::to_string(e.width) + " x " + std::to_string(e.height) +
                                " is not a whole number of " + std::to_string(P) + "-pixel patches");
  const int32_t nx = e.width / P, ny = e.height / P;
  const int64_t K = int64_t(3) * P * P;
  std::vector<float> patches(size_t(int64_t(nx) * ny * K));  // [ny*nx][3*P*P] f32
  const size_t plane = size_t(e.width) * size_t(e.height);
  for (int32_t py = 0; py < ny; ++py)
    for (int32_t px = 0; px < nx; ++px)
      for (int32_t c = 0; c < 3; ++c)
        for (int32_t ky = 0; ky < P; ++ky) {
          const float* src = e.pixels.data() + size_t(c) * plane + size_t(py * P + ky) * size_t(e.width) + size_t(px * P);
          std::copy_n(src, P, patches.data() + ((int64_t(py) * nx + px) * K + (int64_t(c) * P + ky) * P));
        }
  return patches;
}

void patch_conv(const Matrix& kernel, const float* patches, int64_t n, float* y, ThreadPool& pool) {
  const int64_t E = kernel.rows, K = kernel.cols;
  if (kernel.type != DType::f16 || K % 16 != 0) return matmul(kernel, patches, n, y, pool);
  const auto* kb = reinterpret_cast<const f16_bits*>(kernel.data);
  std::vector<float> w(static_cast<size_t>(E * K));  // [E][K] f32 values of the f16 kernel
  for (size_t i = 0; i < w.size(); ++i) w[i] = f16_to_f32(kb[i]);
  pool.parallel_for(n, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> x(static_cast<size_t>(K));  // [K] one patch rounded to f16
    for (int64_t p = p0; p < p1; ++p) {
      for (int64_t k = 0; k < K; ++k) x[size_t(k)] = f16_to_f32(f32_to_f16(patches[p * K + k]));
      for (int64_t e = 0; e < E; ++e) {
        // 16 lanes, lane q summing k = q, q + 16, ... in order (products of f16 values are exact
        // in f32, so fused or not), then the 16 -> 8 -> 4 -> (0+2) + (1+3) reduction.
        float lane[16] = {};
        const float* wr = w.data() + e * K;
        for (int64_t l = 0; l < K; l += 16)
          for (int q = 0; q < 16; ++q) lane[q] += x[size_t(l + q)] * wr[l + q];
        float t8[8], t4[4];
        for (int i = 0; i < 8; ++i) t8[i] = lane[8 + i] + lane[i];
        for (int i = 0; i < 4; ++i) t4[i] = t8[4 + i] + t8[i];
        y[p * E + e] = (t4[0] + t4[2]) + (t4[1] + t4[3]);
      }
    }
  });
}

float gelu_quick_ggml(float x) {
  // [65536] f32: fp16(x * sigmoid(1.702 x)) for every fp16 bit pattern x, built once.
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      const float v = f16_to_f32(f16_bits(i));
      t[i] = f16_to_f32(f32_to_f16(v * (1.0f / (1.0f + std::exp(-1.702f * v)))));
    }
    return t;
  }();
  return table[f32_to_f16(x)];
}

void vit_activation(float* x, int64_t n, bool gelu_quick) {
  if (gelu_quick)
    for (int64_t i = 0; i < n; ++i) x[i] = gelu_quick_ggml(x[i]);
  else
    for (int64_t i = 0; i < n; ++i) x[i] = ops::gelu_ggml(x[i]);
}

std::vector<float> VisionModel::run_tower(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace) const {
  const Tower& tw = *tower_;
  const int32_t P = hp_.patch_size, E = hp_.n_embd, F = hp_.n_ff;
  const int32_t nx = e.width / P, ny = e.height / P;
  const int64_t n = int64_t(nx) * ny;
  const std::vector<float> patches = im2col(e, P);  // [n][3*P*P] f32 (rounded to f16 by the F16 matmul)
  std::vector<float> x(size_t(n * E));  // [n][E] residual stream
  patch_conv(tw.patch, patches.data(), n, x.data(), pool);
  ops::add_bias(x.data(), tw.patch_bias, n, E);
  std::vector<float> resized;  // [ny][nx][E] when the grid differs from the stored one
  const float* pos = tw.pos;
  if (nx != tw.pos_side || ny != tw.pos_side) {
    resized = resize_position_grid(tw.pos, tw.pos_side, E, nx, ny);
    pos = resized.data();
  }
  for (int64_t i = 0; i < n * E; ++i) x[size_t(i)] += pos[i];
  if (trace) trace->patch_embd_plus_pos = x;

  std::vector<float> a(size_t(n * E)), q(a.size()), k(a.size()), v(a.size()), o(a.size());  // [n][E]
  std::vector<float> ff(size_t(n * F));  // [n][F]
  for (const auto& l : tw.layers) {
    layer_norm(x.data(), l.ln1_w, l.ln1_b, a.data(), n, E, hp_.eps);
    linear(l.q, l.bq, a.data(), n, q.data(), pool);
    linear(l.k, l.bk, a.data(), n, k.data(), pool);
    linear(l.v, l.bv, a.data(), n, v.data(), pool);
    const int32_t d = E / hp_.n_head;
    vit_attention(q.data(), k.data(), v.data(), n, hp_.n_head, d, 1.0f / std::sqrt(float(d)), a.data(), pool);
    linear(l.o, l.bo, a.data(), n, o.data(), pool);
    ops::add_scaled(x.data(), o.data(), n * E);
    layer_norm(x.data(), l.ln2_w, l.ln2_b, a.data(), n, E, hp_.eps);
    linear(l.up, l.bup, a.data(), n, ff.data(), pool);
    vit_activation(ff.data(), int64_t(ff.size()), hp_.gelu_quick);
    linear(l.down, l.bdown, ff.data(), n, o.data(), pool);
    ops::add_scaled(x.data(), o.data(), n * E);
  }
  if (tw.post_w) layer_norm(x.data(), tw.post_w, tw.post_b, x.data(), n, E, hp_.eps);
  if (trace) trace->vit_out = x;
  return x;
}

std::vector<float> VisionModel::encode(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace) const {
  if (encoder_) return encoder_->encode(e, pool, trace);
  const std::vector<float> vit = run_tower(e, pool, trace);
  return project(vit, e.width / hp_.patch_size, e.height / hp_.patch_size, pool);
}

}  // namespace ws::vision
