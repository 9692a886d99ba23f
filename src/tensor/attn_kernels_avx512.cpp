// AVX-512 attention for a group of up to 16 queries that read the same kv head (GQA heads
// and neighbouring tokens): the queries are the 16 lanes, so every key and value row is
// loaded once for the whole group and no horizontal sums are needed. Called only when the
// CPU has AVX-512F (attn_group_supported()).
//
// Per query, the float sequence is fixed and independent of the group it is computed in:
//   score_j = scale * (fma over d = 0..hd-1 of q[d] * k_j[d], from 0)
//   m = max over the query's visible keys; e_j = exp(score_j - m), summed over keys in
//   order; p_j = e_j * (1 / sum); out[d] = fma over visible keys in order of p_j * v_j[d].
// Keys a query does not see get p_j = 0, and fma(0, v, acc) == acc (acc starts at +0 and
// never becomes -0), so computing them for the whole group changes no bit.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/attn_kernels.h"
#include "tensor/dtype.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f")
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace ws::detail {
namespace {

constexpr int kKeys = 8;  // keys whose score chains are in flight together
constexpr int kAhead = 8;  // rows prefetched ahead: a head's K/V rows are strided in the cache

// Prefetches `bytes` of row j from element d: the hardware prefetcher does not follow the
// row stride (all kv heads) well, and decode is bound by these misses.
inline void prefetch_row(const KvRows& r, int32_t j, int32_t d, int32_t n_elems) {
  if (j >= r.n) return;
  const size_t elem = r.f16 ? 2 : 4;
  const char* p = static_cast<const char*>(r.data) + (size_t(j) * r.stride + size_t(d)) * elem;
  for (size_t off = 0; off < size_t(n_elems) * elem; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

// Key/value row j as f32: converted into `tmp` when stored as f16.
inline const float* row_f32(const KvRows& r, int32_t j, int32_t hd, float* tmp /* [hd] */) {
  if (!r.f16) return static_cast<const float*>(r.data) + size_t(j) * r.stride;
  const auto* h = static_cast<const uint16_t*>(r.data) + size_t(j) * r.stride;
  for (int32_t d = 0; d < hd; d += 16)
    _mm512_storeu_ps(tmp + d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + d))));
  return tmp;
}

// exp(x) for x <= 0 (or -inf): the same polynomial as the AVX2 exp_neg, 16 lanes.
inline __m512 exp_neg(__m512 x) {
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 poly = _mm512_set1_ps(1.0f / 720.0f);
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 120.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 24.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 6.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(0.5f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(__mmask16(~underflow), poly, _mm512_castsi512_ps(e));
}

// K keys from j: s[(j + i) * 16 + lane] = scale * q_lane . k_{j+i}.
template <int K>
void scores_keys(const float* qt, const KvRows& k, int32_t j, int32_t hd, float scale, float* s, float* tmp) {
  const float* kr[K];  // K key rows as f32
  for (int i = 0; i < K; ++i) {
    prefetch_row(k, j + i + kAhead, 0, hd);
    kr[i] = row_f32(k, j + i, hd, tmp + i * hd);
  }
  __m512 acc[K];
  for (int i = 0; i < K; ++i) acc[i] = _mm512_setzero_ps();
  for (int32_t d = 0; d < hd; ++d) {
    const __m512 qd = _mm512_loadu_ps(qt + d * 16);
#pragma GCC unroll 8
    for (int i = 0; i < K; ++i) acc[i] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kr[i][d]), acc[i]);
  }
  for (int i = 0; i < K; ++i) _mm512_storeu_ps(s + (j + i) * 16, _mm512_mul_ps(acc[i], _mm512_set1_ps(scale)));
}

// Elements [d, d + 16) of value row j as f32.
inline __m512 load16(const KvRows& r, int32_t j, int32_t d) {
  if (!r.f16) return _mm512_loadu_ps(static_cast<const float*>(r.data) + size_t(j) * r.stride + d);
  const auto* h = static_cast<const uint16_t*>(r.data) + size_t(j) * r.stride + d;
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
}

// out_i[d0, d0 + 16C) += sum_j p[j][i] v_j[...] for queries [i0, i0 + Q).
template <int Q, int C>
void accumulate_block(const float* p, const KvRows& v, int i0, int32_t d0, float* const* out) {
  __m512 acc[Q][C];  // [query][16-lane chunk of d]
  for (int i = 0; i < Q; ++i)
    for (int c = 0; c < C; ++c) acc[i][c] = _mm512_loadu_ps(out[i0 + i] + d0 + 16 * c);
  for (int32_t j = 0; j < v.n; ++j) {
    prefetch_row(v, j + kAhead, d0, 16 * C);
    __m512 vc[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) vc[c] = load16(v, j, d0 + 16 * c);
#pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) {
      const __m512 pj = _mm512_set1_ps(p[j * 16 + i0 + i]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[i][c] = _mm512_fmadd_ps(pj, vc[c], acc[i][c]);
    }
  }
  for (int i = 0; i < Q; ++i)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(out[i0 + i] + d0 + 16 * c, acc[i][c]);
}

// Queries in blocks of up to Q, so each value row is loaded once per block.
template <int C>
void accumulate_chunk(const float* p, int nq, const KvRows& v, int32_t d0, float* const* out) {
  constexpr int Q = C == 4 ? 6 : 8;  // accumulators + values within 32 registers
  int i = 0;
  for (; i + Q <= nq; i += Q) accumulate_block<Q, C>(p, v, i, d0, out);
  switch (nq - i) {  // the rest in one block
    case 5: accumulate_block<5, C>(p, v, i, d0, out); break;
    case 4: accumulate_block<4, C>(p, v, i, d0, out); break;
    case 3: accumulate_block<3, C>(p, v, i, d0, out); break;
    case 2: accumulate_block<2, C>(p, v, i, d0, out); break;
    case 1: accumulate_block<1, C>(p, v, i, d0, out); break;
    default:
      for (; i < nq; ++i) accumulate_block<1, C>(p, v, i, d0, out);
  }
}

}  // namespace

void attn_group_scores_avx512(const float* qt, const KvRows& k, int32_t hd, float scale, float* s) {
  alignas(64) float tmp[kKeys * kMaxGroupHeadDim];  // [kKeys][hd] f32 key rows converted from f16
  int32_t j = 0;
  for (; j + kKeys <= k.n; j += kKeys) scores_keys<kKeys>(qt, k, j, hd, scale, s, tmp);
  for (; j < k.n; ++j) scores_keys<1>(qt, k, j, hd, scale, s, tmp);
}

void attn_group_softmax_avx512(float* s, int32_t n, const int32_t* lo, const int32_t* hi) {
  const __m512i lov = _mm512_loadu_si512(lo), hiv = _mm512_loadu_si512(hi);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = neg_inf;
  for (int32_t j = 0; j < n; ++j) {
    const __m512i jv = _mm512_set1_epi32(j);
    const __mmask16 visible = _mm512_cmple_epi32_mask(lov, jv) & _mm512_cmpge_epi32_mask(hiv, jv);
    const __m512 x = _mm512_mask_blend_ps(visible, neg_inf, _mm512_loadu_ps(s + j * 16));
    _mm512_storeu_ps(s + j * 16, x);
    m = _mm512_max_ps(m, x);
  }
  __m512 sum = _mm512_setzero_ps();
  for (int32_t j = 0; j < n; ++j) {
    const __m512 e = exp_neg(_mm512_sub_ps(_mm512_loadu_ps(s + j * 16), m));
    _mm512_storeu_ps(s + j * 16, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
  for (int32_t j = 0; j < n; ++j) _mm512_storeu_ps(s + j * 16, _mm512_mul_ps(_mm512_loadu_ps(s + j * 16), inv));
}

void attn_group_accumulate_avx512(const float* p, int nq, const KvRows& v, int32_t hd, float* const* out) {
  int32_t d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) accumulate_chunk<4>(p, nq, v, d0, out);
  for (; d0 < hd; d0 += 16) accumulate_chunk<1>(p, nq, v, d0, out);
}

}  // namespace ws::detail

#pragma GCC pop_options
