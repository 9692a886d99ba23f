// AVX-512 attention for a group of up to 16 queries that read the same kv head (GQA heads
// and neighbouring tokens): the queries are the 16 lanes, so every key and value row is
// loaded once for the whole group and no horizontal sums are needed. Called only when the
// CPU has AVX-512F (attn_group_supported()).
//
// Per query, the float sequence is fixed and independent of the group it is computed in:
//   part[p] = fma over d = p, p + 16, p + 32, ... of q[d] * k_j[d], from 0 (p < 16);
//   score_j = scale * tree(part), the tree adding (p, p + 8), then (p, p + 4), (p, p + 2),
//   (p, p + 1): vertical adds when the queries are the lanes, a cross-lane reduction when
//   d is (decode, few queries: scores_keys_dots).
//   m = max over the query's visible keys (and its sink logit, if any); e_j = exp(score_j - m),
//   summed over keys in order, then + exp(sink - m); p_j = e_j * (1 / sum); out[d] = fma over visible keys in order of p_j * v_j[d].
// Keys a query does not see get p_j = 0, and fma(0, v, acc) == acc (acc starts at +0 and
// never becomes -0), so computing them for the whole group changes no bit.
#include <immintrin.h>

#include <algorithm>
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

constexpr int kFewQueries = 4;  // up to this many queries, scores take the dot-product form
constexpr int kAhead = 8;  // rows prefetched ahead

// Prefetches `bytes` of row j from element d. Measured to help decode when a head's rows
// were strided by the other heads' in a KV page; sealed pages are now head-major (rows
// contiguous, which the hardware prefetcher follows: the AVX2 kernels gained by dropping
// their prefetches), and this was not re-measured on an AVX-512 machine.
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

// One key for the 16 query lanes: partial sums by d mod 16 (vertical), then the tree.
void scores_key_lanes(const float* qt, const float* kr, int32_t hd, float scale, float* s) {
  __m512 part[16];  // [d mod 16] partial sums, lanes = queries
  for (int p = 0; p < 16; ++p) part[p] = _mm512_setzero_ps();
  for (int32_t d0 = 0; d0 < hd; d0 += 16)
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p)
      part[p] = _mm512_fmadd_ps(_mm512_loadu_ps(qt + (d0 + p) * 16), _mm512_set1_ps(kr[d0 + p]), part[p]);
  for (int w = 8; w >= 1; w /= 2)  // the tree: (p, p + 8), (p, p + 4), (p, p + 2), (p, p + 1)
    for (int p = 0; p < w; ++p) part[p] = _mm512_add_ps(part[p], part[p + w]);
  _mm512_storeu_ps(s, _mm512_mul_ps(part[0], _mm512_set1_ps(scale)));
}

// Few queries (decode): 16 keys at a time, d in the lanes. Lane p of acc[x] is the
// partial sum over d = p, p + 16, ... of key x (the same fma chains as above), then the
// tree runs across lanes on all 16 keys at once, pairing exactly the same partials.
void scores_keys_dots(const float* qrows /* [nq][hd] */, int nq, const float* kt /* [16][hd] */, int nk,
                      int32_t hd, float scale, float* s /* [nk][16] */) {
  for (int i = 0; i < nq; ++i) {
    __m512 acc[16];  // [key] partial sums by d mod 16
    for (int x = 0; x < 16; ++x) acc[x] = _mm512_setzero_ps();
    for (int32_t d0 = 0; d0 < hd; d0 += 16) {
      const __m512 qv = _mm512_loadu_ps(qrows + i * hd + d0);
#pragma GCC unroll 16
      for (int x = 0; x < 16; ++x) acc[x] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kt + x * hd + d0), acc[x]);
    }
    __m512 z[8], w[4], v[2];
    for (int m = 0; m < 8; ++m)  // (p, p + 8): lanes 0-7 key 2m, lanes 8-15 key 2m + 1
      z[m] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0x44),
                           _mm512_shuffle_f32x4(acc[2 * m], acc[2 * m + 1], 0xEE));
    for (int m = 0; m < 4; ++m)  // (p, p + 4): 128-bit lane l holds key 4m + l
      w[m] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * m], z[2 * m + 1], 0x88),
                           _mm512_shuffle_f32x4(z[2 * m], z[2 * m + 1], 0xDD));
    for (int m = 0; m < 2; ++m)  // (p, p + 2)
      v[m] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * m], w[2 * m + 1], 0x44),
                           _mm512_shuffle_ps(w[2 * m], w[2 * m + 1], 0xEE));
    // (p, p + 1): lane 4l + m holds key 4m + l; put key x in lane x.
    const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], 0x88), _mm512_shuffle_ps(v[0], v[1], 0xDD));
    const __m512 dots = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), u);
    alignas(64) float out[16];
    _mm512_store_ps(out, _mm512_mul_ps(dots, _mm512_set1_ps(scale)));
    for (int x = 0; x < nk; ++x) s[x * 16 + i] = out[x];
  }
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

void attn_group_scores_avx512(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s) {
  alignas(64) float kt[16 * kMaxGroupHeadDim];  // [16 keys][hd] f32 rows (converted from f16)
  if (nq <= kFewQueries) {
    alignas(64) float qrows[kFewQueries * kMaxGroupHeadDim];  // [nq][hd] f32: the queries as rows
    for (int i = 0; i < nq; ++i)
      for (int32_t d = 0; d < hd; ++d) qrows[i * hd + d] = qt[d * 16 + i];
    for (int32_t j = 0; j < k.n; j += 16) {
      const int nk = std::min(16, k.n - j);
      for (int x = 0; x < 16; ++x) {
        prefetch_row(k, j + x + 16, 0, hd);
        const float* r = x < nk ? row_f32(k, j + x, hd, kt + x * hd) : nullptr;
        if (!r) std::fill(kt + x * hd, kt + (x + 1) * hd, 0.f);
        else if (r != kt + x * hd) std::copy(r, r + hd, kt + x * hd);
      }
      scores_keys_dots(qrows, nq, kt, nk, hd, scale, s + j * 16);
    }
    return;
  }
  for (int32_t j = 0; j < k.n; ++j) {
    prefetch_row(k, j + kAhead, 0, hd);
    scores_key_lanes(qt, row_f32(k, j, hd, kt), hd, scale, s + j * 16);
  }
}

void attn_group_softmax_avx512(float* s, int32_t n, const int32_t* lo, const int32_t* hi, const float* sink) {
  const __m512i lov = _mm512_loadu_si512(lo), hiv = _mm512_loadu_si512(hi);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 m = sink ? _mm512_loadu_ps(sink) : neg_inf;  // the max includes the sink
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
  if (sink) sum = _mm512_add_ps(sum, exp_neg(_mm512_sub_ps(_mm512_loadu_ps(sink), m)));  // after the keys
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
