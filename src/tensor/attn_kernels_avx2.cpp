// AVX2/FMA/F16C attention kernels (compiled with -mavx2 -mfma -mf16c; called only after
// the run-time CPU check). Float arithmetic is written as intrinsics so the compiler
// cannot contract it differently in different call sites.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "tensor/attn_kernels.h"
#include "tensor/dtype.h"
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

// dot(q, row) over hd: lanes of 8 folded into one accumulator in d order, then a fixed
// horizontal sum, then the (hd % 8) tail in order. Four keys are interleaved only to
// overlap their latency chains; each key's own sequence is unchanged.
template <bool F16>
void scores_impl(const float* q, const KvRows& k, int32_t hd, float scale, float* scores) {
  const int32_t hd8 = hd & ~7;
  int32_t j = 0;
  for (; j + 4 <= k.n; j += 4) {
    const size_t b0 = size_t(j) * k.stride, b1 = b0 + k.stride, b2 = b1 + k.stride, b3 = b2 + k.stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t d = 0; d < hd8; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      a0 = _mm256_fmadd_ps(qv, load8<F16>(k.data, b0 + size_t(d)), a0);
      a1 = _mm256_fmadd_ps(qv, load8<F16>(k.data, b1 + size_t(d)), a1);
      a2 = _mm256_fmadd_ps(qv, load8<F16>(k.data, b2 + size_t(d)), a2);
      a3 = _mm256_fmadd_ps(qv, load8<F16>(k.data, b3 + size_t(d)), a3);
    }
    float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
    const size_t bs[4] = {b0, b1, b2, b3};
    for (int i = 0; i < 4; ++i) {
      for (int32_t d = hd8; d < hd; ++d) s[i] = std::fmaf(q[d], load1<F16>(k.data, bs[i] + size_t(d)), s[i]);
      scores[j + i] = s[i] * scale;
    }
  }
  for (; j < k.n; ++j) {
    const size_t b = size_t(j) * k.stride;
    __m256 a = _mm256_setzero_ps();
    for (int32_t d = 0; d < hd8; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<F16>(k.data, b + size_t(d)), a);
    float s = hsum(a);
    for (int32_t d = hd8; d < hd; ++d) s = std::fmaf(q[d], load1<F16>(k.data, b + size_t(d)), s);
    scores[j] = s * scale;
  }
}

// out[d0 .. d0 + 8R) += sum_j p[j] v_j[...], keys in order, the block kept in registers.
template <bool F16, int R>
void accumulate_block(const float* p, const KvRows& v, int32_t d0, float* out) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_loadu_ps(out + d0 + 8 * r);
  for (int32_t j = 0; j < v.n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const size_t b = size_t(j) * v.stride + size_t(d0);
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(pj, load8<F16>(v.data, b + 8 * r), acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + d0 + 8 * r, acc[r]);
}

template <bool F16>
void accumulate_impl(const float* p, const KvRows& v, int32_t hd, float* out) {
  const int32_t hd8 = hd & ~7;
  int32_t d0 = 0;
  for (; d0 + 64 <= hd8; d0 += 64) accumulate_block<F16, 8>(p, v, d0, out);
  for (; d0 < hd8; d0 += 8) accumulate_block<F16, 1>(p, v, d0, out);
  for (int32_t d = hd8; d < hd; ++d)
    for (int32_t j = 0; j < v.n; ++j) out[d] = std::fmaf(p[j], load1<F16>(v.data, size_t(j) * v.stride + size_t(d)), out[d]);
}

// exp(x) for x <= 0 (softmax arguments), exp_reduced's 2^n * P(r); x < -87 gives 0.
inline __m256 exp_neg(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  __m256 n;
  const __m256 poly = exp_reduced(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), &n);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(poly, pow2i(n)));
}

// ---- grouped attention (attn_group_*): the float sequence of attn_kernels_avx512.cpp, 8 lanes at a time ----

// Key/value row j as f32: converted into `tmp` when stored as f16.
inline const float* row_f32(const KvRows& r, int32_t j, int32_t hd, float* tmp /* [hd] */) {
  if (!r.f16) return static_cast<const float*>(r.data) + size_t(j) * r.stride;
  const auto* h = static_cast<const uint16_t*>(r.data) + size_t(j) * r.stride;
  for (int32_t d = 0; d < hd; d += 8)
    _mm256_storeu_ps(tmp + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + d))));
  return tmp;
}

// Keys kr[0, NK) against H halves of 8 query lanes (qt + 8 h). Part p of a score sums
// d = p, p + 16, ... in order; the NK * H chains of one part share each query load and each
// key broadcast (H + NK loads per NK * H fmas, the fewest the 16 registers allow). The 16
// parts wait in `part` and the tree pairs them (p, p + 8), (p, p + 4), (p, p + 2), (p, p + 1),
// the AVX-512 kernel's vertical adds.
template <int H, int NK>
inline void keys_block(const float* qt, const float* const* kr, int32_t hd, float scale, float* s /* [NK][16] */) {
  alignas(32) float part[16][NK][H][8];  // [d mod 16][key][half][lane] f32 partial sums
  for (int p = 0; p < 16; ++p) {
    __m256 acc[NK][H];  // unrolled so that the chains stay in registers
#pragma GCC unroll 8
    for (int x = 0; x < NK; ++x)
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) acc[x][h] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int32_t d = p; d < hd; d += 16) {
      __m256 q[H];
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) q[h] = _mm256_loadu_ps(qt + d * 16 + 8 * h);
#pragma GCC unroll 8
      for (int x = 0; x < NK; ++x) {
        const __m256 b = _mm256_broadcast_ss(kr[x] + d);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) acc[x][h] = _mm256_fmadd_ps(q[h], b, acc[x][h]);
      }
    }
#pragma GCC unroll 8
    for (int x = 0; x < NK; ++x)
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) _mm256_store_ps(part[p][x][h], acc[x][h]);
  }
  auto pair = [&](int p, int w, int x, int h) {
    return _mm256_add_ps(_mm256_load_ps(part[p][x][h]), _mm256_load_ps(part[p + w][x][h]));
  };
#pragma GCC unroll 8
  for (int x = 0; x < NK; ++x)
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const __m256 t0 = _mm256_add_ps(pair(0, 8, x, h), pair(4, 8, x, h)), t1 = _mm256_add_ps(pair(1, 8, x, h), pair(5, 8, x, h));
      const __m256 t2 = _mm256_add_ps(pair(2, 8, x, h), pair(6, 8, x, h)), t3 = _mm256_add_ps(pair(3, 8, x, h), pair(7, 8, x, h));
      const __m256 score = _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
      _mm256_storeu_ps(s + 16 * x + 8 * h, _mm256_mul_ps(score, _mm256_set1_ps(scale)));
    }
}

// All keys of k for H halves of query lanes, NK keys per block.
template <int H, int NK>
void scores_lanes(const float* qt, const KvRows& k, int32_t hd, float scale, float* s) {
  alignas(32) float tmp[NK * kMaxGroupHeadDim];  // [NK][hd] f32: key rows converted from f16
  const float* kr[NK];
  int32_t j = 0;
  for (; j + NK <= k.n; j += NK) {
    for (int x = 0; x < NK; ++x) kr[x] = row_f32(k, j + x, hd, tmp + x * hd);
    keys_block<H, NK>(qt, kr, hd, scale, s + j * 16);
  }
  for (; j < k.n; ++j) {
    kr[0] = row_f32(k, j, hd, tmp);
    keys_block<H, 1>(qt, kr, hd, scale, s + j * 16);
  }
}

// Few queries (decode): d in the lanes. Lane p of lo / hi is partial sum p / p + 8, so
// lo + hi is level 1 of the tree and hsum() (simd_avx2.h) pairs exactly levels 2 to 4.
void scores_dots(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s) {
  alignas(32) float qrows[4 * kMaxGroupHeadDim];  // [nq][hd] f32: the queries as rows
  alignas(32) float tmp[kMaxGroupHeadDim];        // [hd] f32: one key row
  for (int i = 0; i < nq; ++i)
    for (int32_t d = 0; d < hd; ++d) qrows[i * hd + d] = qt[d * 16 + i];
  for (int32_t j = 0; j < k.n; ++j) {
    const float* kr = row_f32(k, j, hd, tmp);
    for (int i = 0; i < nq; ++i) {
      __m256 lo = _mm256_setzero_ps(), hi = lo;
      for (int32_t d0 = 0; d0 < hd; d0 += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(qrows + i * hd + d0), _mm256_loadu_ps(kr + d0), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(qrows + i * hd + d0 + 8), _mm256_loadu_ps(kr + d0 + 8), hi);
      }
      s[j * 16 + i] = hsum(_mm256_add_ps(lo, hi)) * scale;
    }
  }
}

// out_i[d0, d0 + 16) += sum_j p[j][i] v_j[...] for queries [i0, i0 + Q), keys in order.
template <int Q>
void group_accumulate_block(const float* p, const KvRows& v, int i0, int32_t d0, float* const* out) {
  __m256 acc[Q][2];  // [query][8-lane half of the 16 d]
  for (int i = 0; i < Q; ++i)
    for (int c = 0; c < 2; ++c) acc[i][c] = _mm256_loadu_ps(out[i0 + i] + d0 + 8 * c);
  for (int32_t j = 0; j < v.n; ++j) {
    const size_t b = size_t(j) * v.stride + size_t(d0);
    const __m256 v0 = v.f16 ? load8<true>(v.data, b) : load8<false>(v.data, b);
    const __m256 v1 = v.f16 ? load8<true>(v.data, b + 8) : load8<false>(v.data, b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < Q; ++i) {  // unrolled: acc stays in registers
      const __m256 pj = _mm256_set1_ps(p[j * 16 + i0 + i]);
      acc[i][0] = _mm256_fmadd_ps(pj, v0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(pj, v1, acc[i][1]);
    }
  }
  for (int i = 0; i < Q; ++i)
    for (int c = 0; c < 2; ++c) _mm256_storeu_ps(out[i0 + i] + d0 + 8 * c, acc[i][c]);
}

}  // namespace

void attn_scores_avx2(const float* q, const KvRows& k, int32_t hd, float scale, float* scores) {
  if (k.f16) scores_impl<true>(q, k, hd, scale, scores);
  else scores_impl<false>(q, k, hd, scale, scores);
}

void attn_accumulate_avx2(const float* p, const KvRows& v, int32_t hd, float* out) {
  if (v.f16) accumulate_impl<true>(p, v, hd, out);
  else accumulate_impl<false>(p, v, hd, out);
}

float softmax_exp_avx2(float* x, int32_t n, float max, const float* sink) {
  const __m256 m = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  if (i < n) {  // the tail through the same vector exp, zero lanes masked out of the sum
    alignas(32) float tmp[8];
    for (int k = 0; k < 8; ++k) tmp[k] = i + k < n ? x[i + k] : max;
    const __m256 e = exp_neg(_mm256_sub_ps(_mm256_load_ps(tmp), m));
    _mm256_store_ps(tmp, e);
    for (int32_t k = 0; i + k < n; ++k) {
      x[i + k] = tmp[k];
      sum += tmp[k];
    }
  }
  if (sink) {  // the same vector exp, lane 0
    alignas(32) float e[8];
    _mm256_store_ps(e, exp_neg(_mm256_sub_ps(_mm256_set1_ps(*sink), m)));
    sum += e[0];
  }
  return sum;
}

void attn_group_scores_avx2(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s) {
  if (nq <= 4) scores_dots(qt, nq, k, hd, scale, s);
  else if (nq <= 8) scores_lanes<1, 8>(qt, k, hd, scale, s);
  else scores_lanes<2, 4>(qt, k, hd, scale, s);
}

void attn_group_softmax_avx2(float* s, int32_t n, const int32_t* lo, const int32_t* hi, const float* sink) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  for (int h = 0; h < 16; h += 8) {  // lanes [h, h + 8); a half with no visible key is skipped
    const __m256i lov = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + h));
    const __m256i hiv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + h));
    if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(lov, hiv))) == 0xFF) continue;
    // Keys [all_lo, all_hi] are visible to every lane of the half and need no mask.
    const int32_t all_lo = *std::max_element(lo + h, lo + h + 8), all_hi = *std::min_element(hi + h, hi + h + 8);
    __m256 m = sink ? _mm256_loadu_ps(sink + h) : neg_inf;  // the max includes the sink
    auto masked = [&](int32_t j) {
      const __m256i jv = _mm256_set1_epi32(j);
      const __m256i hidden = _mm256_or_si256(_mm256_cmpgt_epi32(lov, jv), _mm256_cmpgt_epi32(jv, hiv));
      const __m256 x = _mm256_blendv_ps(_mm256_loadu_ps(s + j * 16 + h), neg_inf, _mm256_castsi256_ps(hidden));
      _mm256_storeu_ps(s + j * 16 + h, x);
      m = _mm256_max_ps(m, x);
    };
    const int32_t a = std::clamp(all_lo, 0, n), b = std::clamp(all_hi + 1, a, n);
    for (int32_t j = 0; j < a; ++j) masked(j);
    for (int32_t j = a; j < b; ++j) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j * 16 + h));
    for (int32_t j = b; j < n; ++j) masked(j);
    __m256 sum = _mm256_setzero_ps();
    for (int32_t j = 0; j < n; ++j) {
      const __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + j * 16 + h), m));
      _mm256_storeu_ps(s + j * 16 + h, e);
      sum = _mm256_add_ps(sum, e);
    }
    if (sink) sum = _mm256_add_ps(sum, exp_neg(_mm256_sub_ps(_mm256_loadu_ps(sink + h), m)));  // after the keys
    const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), sum);
    for (int32_t j = 0; j < n; ++j)
      _mm256_storeu_ps(s + j * 16 + h, _mm256_mul_ps(_mm256_loadu_ps(s + j * 16 + h), inv));
  }
}

void attn_group_accumulate_avx2(const float* p, int nq, const KvRows& v, int32_t hd, float* const* out) {
  for (int32_t d0 = 0; d0 < hd; d0 += 16) {
    int i = 0;
    for (; i + 6 <= nq; i += 6) group_accumulate_block<6>(p, v, i, d0, out);
    switch (nq - i) {
      case 5: group_accumulate_block<5>(p, v, i, d0, out); break;
      case 4: group_accumulate_block<4>(p, v, i, d0, out); break;
      case 3: group_accumulate_block<3>(p, v, i, d0, out); break;
      case 2: group_accumulate_block<2>(p, v, i, d0, out); break;
      case 1: group_accumulate_block<1>(p, v, i, d0, out); break;
      default: break;
    }
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
