// AVX2/FMA/F16C attention kernels (compiled with -mavx2 -mfma -mf16c; called only after
// the run-time CPU check): the float sequence of attn_kernels.h, whose 16-lane vectors are
// two ymm halves here. Float arithmetic is written as intrinsics so the compiler cannot
// contract it differently in different call sites.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "tensor/attn_group_impl.h"
#include "tensor/attn_kernels.h"
#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"
#include "tensor/simd_avx2.h"

namespace ws::detail {
namespace {

template <bool F16>
inline __m256 load8(const void* base, size_t i) {
  if constexpr (F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i)));
  else
    return _mm256_loadu_ps(static_cast<const float*>(base) + i);
}

template <bool F16>
inline float load1(const void* base, size_t i) {
  if constexpr (F16) return _cvtsh_ss(static_cast<const uint16_t*>(base)[i]);
  else return static_cast<const float*>(base)[i];
}

// tree16 of the 16 lanes lo (0..7) and hi (8..15): lo + hi, then quarters, pairs, [0] + [1].
inline float tree16(__m256 lo, __m256 hi) {
  const __m256 t8 = _mm256_add_ps(lo, hi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

// dot(q, k_j) for one key: a0..a3 / b0..b3 are ggml's four accumulators, lanes 0..7 / 8..15
// (named, not an array, so that they stay in registers).
template <bool F16>
float dot_ggml(const float* q, const void* k, size_t base, int32_t hd) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const int32_t np = hd & ~63;
  for (int32_t d = 0; d < np; d += 64) {
    const size_t i = base + size_t(d);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<F16>(k, i), a0);
    b0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), load8<F16>(k, i + 8), b0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 16), load8<F16>(k, i + 16), a1);
    b1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 24), load8<F16>(k, i + 24), b1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 32), load8<F16>(k, i + 32), a2);
    b2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 40), load8<F16>(k, i + 40), b2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 48), load8<F16>(k, i + 48), a3);
    b3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 56), load8<F16>(k, i + 56), b3);
  }
  const __m256 lo = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
  const __m256 hi = _mm256_add_ps(_mm256_add_ps(b0, b2), _mm256_add_ps(b1, b3));
  float s = tree16(lo, hi);
  for (int32_t d = np; d < hd; ++d) s = std::fmaf(q[d], load1<F16>(k, base + size_t(d)), s);
  return s;
}

// dot(q, k_j) in the online order: lo / hi the chains of lanes 0..7 / 8..15.
template <bool F16>
float dot_online(const float* q, const void* k, size_t base, int32_t hd) {
  __m256 lo = _mm256_setzero_ps(), hi = lo;
  const int32_t np = hd & ~15;
  for (int32_t d = 0; d < np; d += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<F16>(k, base + size_t(d)), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), load8<F16>(k, base + size_t(d + 8)), hi);
  }
  float s = tree16(lo, hi);
  for (int32_t d = np; d < hd; ++d) s = std::fmaf(q[d], load1<F16>(k, base + size_t(d)), s);
  return s;
}

template <bool F16>
void scores_impl(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores, size_t stride,
                 bool online) {
  const int32_t j0 = cpu_has_vnni() ? attn_scores16_avx512(q, nq, k, hd, scale, scores, stride, online) : 0;
  for (int i = 0; i < nq; ++i)
    for (int32_t j = j0; j < k.n; ++j) {
      const size_t base = size_t(j) * k.stride;
      const float dot = online ? dot_online<F16>(q + i * hd, k.data, base, hd) : dot_ggml<F16>(q + i * hd, k.data, base, hd);
      scores[i * stride + size_t(j)] = dot * scale;
    }
}

// The keys of one lane l (j = l - lane0 mod lanes, then every lanes-th) into acc[l], R
// vectors of dims [d0, d0 + 8R) held in registers over all of them.
template <bool F16, int R>
void accumulate_lane(const float* p, const KvRows& v, int32_t j0, int lanes, int32_t d0, float* a) {
  __m256 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_loadu_ps(a + d0 + 8 * r);
  for (int32_t j = j0; j < v.n; j += lanes) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const size_t base = size_t(j) * v.stride + size_t(d0);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(pj, load8<F16>(v.data, base + size_t(8 * r)), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(a + d0 + 8 * r, acc[r]);
}

template <bool F16>
void accumulate_impl(const float* p_all, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0,
                     int lanes, float* acc_all) {
  const int32_t d8 = hd & ~7;
  const int32_t d_done = cpu_has_vnni() ? attn_accumulate16_avx512(p_all, p_stride, nq, v, hd, lane0, lanes, acc_all) : 0;
  for (int i = 0; i < nq; ++i) {
    const float* p = p_all + i * p_stride;
    float* acc = acc_all + size_t(i) * size_t(lanes) * size_t(hd);
    for (int l = 0; l < lanes; ++l) {
      const int32_t j0 = (l - lane0 + 16) % lanes;
      float* a = acc + size_t(l) * size_t(hd);
      int32_t d = d_done;
      for (; d + 64 <= d8; d += 64) accumulate_lane<F16, 8>(p, v, j0, lanes, d, a);
      switch ((d8 - d) / 8) {
        case 7: accumulate_lane<F16, 7>(p, v, j0, lanes, d, a); break;
        case 6: accumulate_lane<F16, 6>(p, v, j0, lanes, d, a); break;
        case 5: accumulate_lane<F16, 5>(p, v, j0, lanes, d, a); break;
        case 4: accumulate_lane<F16, 4>(p, v, j0, lanes, d, a); break;
        case 3: accumulate_lane<F16, 3>(p, v, j0, lanes, d, a); break;
        case 2: accumulate_lane<F16, 2>(p, v, j0, lanes, d, a); break;
        case 1: accumulate_lane<F16, 1>(p, v, j0, lanes, d, a); break;
        default: break;
      }
      for (int32_t j = j0; d8 < hd && j < v.n; j += lanes)
        for (int32_t dd = d8; dd < hd; ++dd) a[dd] = std::fmaf(p[j], load1<F16>(v.data, size_t(j) * v.stride + size_t(dd)), a[dd]);
    }
  }
}

// Vector traits of attn_group_impl.h: 8 query lanes.
struct Avx2Lanes {
  using F = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kQueryVectors = 1;  // queries a pass over the keys shares: 8
  static constexpr int kValueDims = 8;    // accumulators of the values pass (16 registers)
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F exp(F x) { return expf_ggml8(x); }
  static F visible(F x, int32_t j, const int32_t* lo, const int32_t* hi) {
    const __m256i jv = _mm256_set1_epi32(j);
    const __m256i hidden = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)), jv),
                                           _mm256_cmpgt_epi32(jv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi))));
    return _mm256_blendv_ps(x, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(hidden));
  }
};

}  // namespace

void widen_rows_avx2(DType t, const uint8_t* rows, size_t stride, int32_t n, int32_t hd, float* out) {
  for (int32_t i = 0; i < n; ++i) {
    float* dst = out + size_t(i) * size_t(hd);
    const float* r = row_f32(rows + size_t(i) * stride, t, 0, hd, dst);  // dst, or the row itself for f32
    if (r != dst) std::memcpy(dst, r, size_t(hd) * sizeof(float));
  }
}

void attn_group_avx2(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                      DType vt, int32_t hd, float scale) {
  attn_group_impl<Avx2Lanes>(g, k_rows, v_rows, n, kt, vt, hd, scale);
}

void attn_scores_avx2(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores, size_t stride,
                      bool online) {
  if (k.f16) scores_impl<true>(q, nq, k, hd, scale, scores, stride, online);
  else scores_impl<false>(q, nq, k, hd, scale, scores, stride, online);
}

float max_avx2(const float* x, int32_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (int32_t i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = lanes[0];
  for (int i = 1; i < 8; ++i) r = r > lanes[i] ? r : lanes[i];
  return r;
}

void scale_avx2(float* x, int32_t n, float v) {
  const __m256 s = _mm256_set1_ps(v);
  for (int32_t i = 0; i < n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
}

double softmax_exp_avx2(float* x, int32_t n, float max) {
  const __m256 m = _mm256_set1_ps(max);
  double sum = 0;
  for (int32_t b = 0; b < n; b += 16) {
    const __m256 lo = expf_ggml8(_mm256_sub_ps(_mm256_loadu_ps(x + b), m));
    const __m256 hi = expf_ggml8(_mm256_sub_ps(_mm256_loadu_ps(x + b + 8), m));
    _mm256_storeu_ps(x + b, lo);
    _mm256_storeu_ps(x + b + 8, hi);
    sum += double(tree16(lo, hi));
  }
  return sum;
}

void attn_accumulate_avx2(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0,
                          int lanes, float* acc) {
  if (v.f16) accumulate_impl<true>(p, p_stride, nq, v, hd, lane0, lanes, acc);
  else accumulate_impl<false>(p, p_stride, nq, v, hd, lane0, lanes, acc);
}

float attn_online_block_avx2(float* x, float& m, float& l) {
  const __m256 lo = _mm256_loadu_ps(x), hi = _mm256_loadu_ps(x + 8);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(lo, hi));
  float m_new = std::max(m, -FLT_MAX);
  for (float y : lanes) m_new = std::max(m_new, y);
  const __m256 mv = _mm256_set1_ps(m_new);
  const __m128 alpha = _mm_set_ss(expf_ggml(m - m_new));
  const __m256 e_lo = expf_ggml8(_mm256_sub_ps(lo, mv)), e_hi = expf_ggml8(_mm256_sub_ps(hi, mv));
  _mm256_storeu_ps(x, e_lo);
  _mm256_storeu_ps(x + 8, e_hi);
  // l * alpha + tree16(e) in two roundings (rounded() keeps GCC from fusing them).
  l = _mm_cvtss_f32(_mm_add_ss(rounded(_mm_mul_ss(_mm_set_ss(l), alpha)), _mm_set_ss(tree16(e_lo, e_hi))));
  m = m_new;
  return _mm_cvtss_f32(alpha);
}

void attn_lanes_sum_avx2(const float* acc, int32_t hd, float* out) {
  const size_t stride = size_t(hd);
  int32_t d = 0;
  for (; d + 8 <= hd; d += 8) {  // tree16 over the 16 rows, 8 dims at a time: vertical adds
    __m256 t[8];
    for (int i = 0; i < 8; ++i)
      t[i] = _mm256_add_ps(_mm256_loadu_ps(acc + size_t(i) * stride + size_t(d)), _mm256_loadu_ps(acc + size_t(i + 8) * stride + size_t(d)));
    for (int i = 0; i < 4; ++i) t[i] = _mm256_add_ps(t[i], t[i + 4]);
    for (int i = 0; i < 2; ++i) t[i] = _mm256_add_ps(t[i], t[i + 2]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(t[0], t[1]));
  }
  for (; d < hd; ++d) {
    float t[8];
    for (int i = 0; i < 8; ++i) t[i] = acc[size_t(i) * stride + size_t(d)] + acc[size_t(i + 8) * stride + size_t(d)];
    for (int i = 0; i < 4; ++i) t[i] = t[i] + t[i + 4];
    for (int i = 0; i < 2; ++i) t[i] = t[i] + t[i + 2];
    out[d] = t[0] + t[1];
  }
}

float ssm_row_update_avx2(float* s, const float* b, const float* c, float decay, float x, int64_t n) {
  const __m256 dv = _mm256_set1_ps(decay), xv = _mm256_set1_ps(x);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;  // even / odd 8-blocks, joined at the end
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 s0 = _mm256_fmadd_ps(_mm256_loadu_ps(s + i), dv, _mm256_mul_ps(_mm256_loadu_ps(b + i), xv));
    const __m256 s1 = _mm256_fmadd_ps(_mm256_loadu_ps(s + i + 8), dv, _mm256_mul_ps(_mm256_loadu_ps(b + i + 8), xv));
    _mm256_storeu_ps(s + i, s0);
    _mm256_storeu_ps(s + i + 8, s1);
    acc0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(c + i), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_loadu_ps(c + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 s0 = _mm256_fmadd_ps(_mm256_loadu_ps(s + i), dv, _mm256_mul_ps(_mm256_loadu_ps(b + i), xv));
    _mm256_storeu_ps(s + i, s0);
    acc0 = _mm256_fmadd_ps(s0, _mm256_loadu_ps(c + i), acc0);
  }
  float acc = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) {
    s[i] = std::fmaf(s[i], decay, b[i] * x);
    acc = std::fmaf(s[i], c[i], acc);
  }
  return acc;
}

}  // namespace ws::detail
