// Scalar reference attention kernels (the float sequence of attn_kernels.h, written out
// one operation at a time) and the ISA dispatch.
#include "tensor/attn_kernels.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "tensor/dtype.h"
#include "tensor/quant.h"
#include "tensor/kernels_impl.h"

namespace ws {
namespace {

inline float load(const KvRows& r, size_t i) {
  return r.f16 ? f16_to_f32(static_cast<const f16_bits*>(r.data)[i]) : static_cast<const float*>(r.data)[i];
}

// t[i] = a[i] + a[i + 8], then t[i] + t[i + 4], t[i] + t[i + 2], t[0] + t[1]: how GCC's
// _mm512_reduce_add_ps folds a vector (halves, quarters, pairs).
inline float tree16(const float* a) {
  float t[8];
  for (int i = 0; i < 8; ++i) t[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) t[i] = t[i] + t[i + 4];
  for (int i = 0; i < 2; ++i) t[i] = t[i] + t[i + 2];
  return t[0] + t[1];
}

float dot_ggml(const float* q, const KvRows& k, size_t base, int32_t hd) {
  float part[64] = {};  // [64] f32: ggml's four 16-lane accumulators
  const int32_t np = hd & ~63;
  for (int32_t d0 = 0; d0 < np; d0 += 64)
    for (int c = 0; c < 64; ++c) part[c] = std::fma(q[d0 + c], load(k, base + size_t(d0 + c)), part[c]);
  for (int c = 0; c < 16; ++c) part[c] = (part[c] + part[c + 32]) + (part[c + 16] + part[c + 48]);
  float s = tree16(part);
  for (int32_t d = np; d < hd; ++d) s = std::fma(q[d], load(k, base + size_t(d)), s);
  return s;
}

float dot_online(const float* q, const KvRows& k, size_t base, int32_t hd) {
  float part[16] = {};  // [16] f32: one chain per lane
  const int32_t np = hd & ~15;
  for (int32_t d0 = 0; d0 < np; d0 += 16)
    for (int c = 0; c < 16; ++c) part[c] = std::fma(q[d0 + c], load(k, base + size_t(d0 + c)), part[c]);
  float s = tree16(part);
  for (int32_t d = np; d < hd; ++d) s = std::fma(q[d], load(k, base + size_t(d)), s);
  return s;
}

}  // namespace

void attn_scores(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores, size_t stride,
                 bool online, Isa isa) {
  if (isa == Isa::avx2) return detail::attn_scores_avx2(q, nq, k, hd, scale, scores, stride, online);
  for (int i = 0; i < nq; ++i)
    for (int32_t j = 0; j < k.n; ++j) {
      const size_t base = size_t(j) * k.stride;
      const float dot = online ? dot_online(q + i * hd, k, base, hd) : dot_ggml(q + i * hd, k, base, hd);
      scores[i * stride + size_t(j)] = dot * scale;
    }
}

void attn_softmax(float* x, int32_t n, Isa isa, const float* sink) {
  const bool simd = isa == Isa::avx2;
  float max = simd ? detail::max_avx2(x, n) : -INFINITY;
  if (!simd)
    for (int32_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (sink) max = std::max(max, *sink);
  double sum = 0;
  if (simd) {
    sum = detail::softmax_exp_avx2(x, n, max);
  } else {
    for (int32_t b = 0; b < n; b += 16) {
      for (int i = 0; i < 16; ++i) x[b + i] = expf_ggml(x[b + i] - max);
      sum += double(tree16(x + b));
    }
  }
  if (sink) sum += double(std::exp(*sink - max));
  const float inv = float(1.0 / sum);
  if (simd) return detail::scale_avx2(x, n, inv);
  for (int32_t i = 0; i < n; ++i) x[i] *= inv;
}

bool attn_online(DType k, DType v) { return k != DType::f32 || v != DType::f32; }

float attn_online_block(float* x, float& m, float& l, Isa isa) {
  if (isa == Isa::avx2) return detail::attn_online_block_avx2(x, m, l);
  float m_new = std::max(m, -FLT_MAX);
  for (int i = 0; i < 16; ++i) m_new = std::max(m_new, x[i]);
  const float alpha = expf_ggml(m - m_new);
  for (int i = 0; i < 16; ++i) x[i] = expf_ggml(x[i] - m_new);
  const float scaled = l * alpha;  // two roundings, as everywhere (no fma)
  l = scaled + tree16(x);
  m = m_new;
  return alpha;
}

void attn_accumulate(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0, int lanes,
                     float* acc, Isa isa) {
  if (isa == Isa::avx2) return detail::attn_accumulate_avx2(p, p_stride, nq, v, hd, lane0, lanes, acc);
  for (int i = 0; i < nq; ++i)
    for (int32_t j = 0; j < v.n; ++j) {
      float* a = acc + (size_t(i) * size_t(lanes) + size_t((lane0 + j) % lanes)) * size_t(hd);
      const size_t base = size_t(j) * v.stride;
      for (int32_t d = 0; d < hd; ++d) a[d] = std::fma(p[i * p_stride + size_t(j)], load(v, base + size_t(d)), a[d]);
    }
}

void attn_lanes_sum(const float* acc, int32_t hd, float* out, Isa isa) {
  if (isa == Isa::avx2) return detail::attn_lanes_sum_avx2(acc, hd, out);
  for (int32_t d = 0; d < hd; ++d) {
    float lanes[16];  // [16] f32: acc[.][d]
    for (int l = 0; l < 16; ++l) lanes[l] = acc[size_t(l) * size_t(hd) + size_t(d)];
    out[d] = tree16(lanes);
  }
}

void widen_rows(DType t, const uint8_t* rows, size_t stride, int32_t n, int32_t hd, float* out, Isa isa) {
  if (isa == Isa::avx2) return detail::widen_rows_avx2(t, rows, stride, n, hd, out);
  for (int32_t i = 0; i < n; ++i) dequantize_row(t, rows + size_t(i) * stride, out + size_t(i) * size_t(hd), hd);
}

// Same CPU choice as the matmuls (WARMSTART_ISA=scalar keeps the per-query kernels); both
// widths compute the per-query kernels' bits, so which one runs changes nothing.
bool attn_group_supported() { return detected_isa() == Isa::avx2; }

void attn_group(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                DType vt, int32_t hd, float scale) {
  if (detail::cpu_has_vnni()) detail::attn_group_avx512(g, k_rows, v_rows, n, kt, vt, hd, scale);
  else detail::attn_group_avx2(g, k_rows, v_rows, n, kt, vt, hd, scale);
}

float ssm_row_update(float* s, const float* b, const float* c, float decay, float x, int64_t n, Isa isa) {
  if (isa == Isa::avx2) return detail::ssm_row_update_avx2(s, b, c, decay, x, n);
  float acc = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    s[i] = s[i] * decay + b[i] * x;
    acc += s[i] * c[i];
  }
  return acc;
}

}  // namespace ws
