// AVX-512 grouped attention: attn_group_impl.h with 16 query lanes. Called only when the
// CPU has AVX-512 (attn_group). The exp is ggml's own, _mm512_scalef_ps included, which
// expf_ggml (tensor/expf_ggml.h) reproduces bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f")
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "tensor/attn_group_impl.h"
#include "tensor/attn_kernels.h"

namespace ws::detail {
namespace {

struct Avx512Lanes {
  using F = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kQueryVectors = 2;  // queries a pass over the keys shares: 32
  static constexpr int kValueDims = 16;    // accumulators of the values pass (32 registers)
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F exp(F x) {  // ggml_v_expf
    const F r = set1(0x1.8p23f);
    const F z = _mm512_fmadd_ps(x, set1(0x1.715476p+0f), r);
    const F n = _mm512_sub_ps(z, r);
    const F b = _mm512_fnmadd_ps(n, set1(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, set1(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), set1(192), _CMP_GT_OQ);
    const F u = _mm512_mul_ps(b, b);
    const F j = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_fmadd_ps(set1(0x1.0e4020p-7f), b, set1(0x1.573e2ep-5f)), u,
                                                _mm512_fmadd_ps(set1(0x1.555e66p-3f), b, set1(0x1.fffdb6p-2f))),
                                u, _mm512_fmadd_ps(set1(0x1.ffffecp-1f), b, set1(1.0f)));
    const F res = _mm512_scalef_ps(j, n);
    const F alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, zero(), _CMP_LE_OQ), set1(INFINITY), zero());
    return _mm512_mask_blend_ps(d, res, alt);
  }
  static F visible(F x, int32_t j, const int32_t* lo, const int32_t* hi) {
    const __m512i jv = _mm512_set1_epi32(j);
    const __mmask16 seen = _mm512_cmple_epi32_mask(_mm512_loadu_si512(lo), jv) & _mm512_cmple_epi32_mask(jv, _mm512_loadu_si512(hi));
    return _mm512_mask_mov_ps(set1(-INFINITY), seen, x);
  }
};

template <bool F16>
inline __m512 load16(const void* base, size_t i) {
  if constexpr (F16)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + i)));
  else
    return _mm512_loadu_ps(static_cast<const float*>(base) + i);
}

// tree16 across the lanes of t[x] for 16 keys x at once: the pairs (i, i + 8), (i, i + 4),
// (i, i + 2), (i, i + 1); returns the 16 sums, key x in lane x.
inline __m512 lanes_tree16(const __m512* t) {
  __m512 z[8], w[4], v[2];
  for (int m = 0; m < 8; ++m)  // (i, i + 8): lanes 0-7 key 2m, lanes 8-15 key 2m + 1
    z[m] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], 0x44), _mm512_shuffle_f32x4(t[2 * m], t[2 * m + 1], 0xEE));
  for (int m = 0; m < 4; ++m)  // (i, i + 4): 128-bit lane l holds key 4m + l
    w[m] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * m], z[2 * m + 1], 0x88), _mm512_shuffle_f32x4(z[2 * m], z[2 * m + 1], 0xDD));
  for (int m = 0; m < 2; ++m)  // (i, i + 2)
    v[m] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * m], w[2 * m + 1], 0x44), _mm512_shuffle_ps(w[2 * m], w[2 * m + 1], 0xEE));
  // (i, i + 1): lane 4l + m holds key 4m + l; put key x in lane x.
  const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], 0x88), _mm512_shuffle_ps(v[0], v[1], 0xDD));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), u);
}

// Scores of the keys of k in runs of 16 for NQ queries (query i: q + i * hd, scores s + i *
// stride), hd = 64 S (S = 0: hd a multiple of 64 known at run time): each key row is loaded
// and widened once for the NQ queries; t[i][x] is key x's (a0 + a2) + (a1 + a3) over ggml's
// four accumulators for query i (Online: the one chain over all dims of the online order),
// then lanes_tree16 for its 16 keys at once. With S known and few enough queries they stay in
// 4 S NQ registers for all the keys (reloading the query for every key made the scores 1.6x
// slower). Returns the keys done.
template <bool F16, bool Online, int S, int NQ>
int32_t scores16(const float* q, const KvRows& k, int32_t hd, float scale, float* s, size_t stride) {
  constexpr bool kInRegs = S > 0 && 4 * S * NQ <= 16;
  constexpr int R = kInRegs ? 4 * S : 1;
  __m512 qr[NQ][R];  // the queries, in registers when kInRegs
  if constexpr (kInRegs)
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) qr[i][r] = _mm512_loadu_ps(q + i * hd + 16 * r);
  int32_t k0 = 0;
  for (; k0 + 16 <= k.n; k0 += 16) {
    __m512 t[NQ][16];
#pragma GCC unroll 16
    for (int x = 0; x < 16; ++x) {
      const size_t base = size_t(k0 + x) * k.stride;
      __m512 a[NQ][4];
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) a[i][0] = a[i][1] = a[i][2] = a[i][3] = _mm512_setzero_ps();
      const int32_t steps = S > 0 ? S : hd / 64;
#pragma GCC unroll 4
      for (int32_t st = 0; st < steps; ++st) {
        const int32_t d = 64 * st;
        __m512 kv[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) kv[c] = load16<F16>(k.data, base + size_t(d + 16 * c));
#pragma GCC unroll 4
        for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            __m512 qd;
            if constexpr (kInRegs) qd = qr[i][4 * st + c];
            else qd = _mm512_loadu_ps(q + i * hd + d + 16 * c);
            if constexpr (Online) a[i][0] = _mm512_fmadd_ps(qd, kv[c], a[i][0]);  // dims in order
            else a[i][c] = _mm512_fmadd_ps(qd, kv[c], a[i][c]);
          }
      }
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i)
        t[i][x] = Online ? a[i][0] : _mm512_add_ps(_mm512_add_ps(a[i][0], a[i][2]), _mm512_add_ps(a[i][1], a[i][3]));
    }
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) _mm512_storeu_ps(s + i * stride + k0, _mm512_mul_ps(lanes_tree16(t[i]), _mm512_set1_ps(scale)));
  }
  return k0;
}

template <bool F16, bool Online, int NQ>
int32_t scores16_hd(const float* q, const KvRows& k, int32_t hd, float scale, float* s, size_t stride) {
  switch (hd) {
    case 64: return scores16<F16, Online, 1, NQ>(q, k, hd, scale, s, stride);
    case 128: return scores16<F16, Online, 2, NQ>(q, k, hd, scale, s, stride);
    case 256: return scores16<F16, Online, 4, NQ>(q, k, hd, scale, s, stride);
    default: return scores16<F16, Online, 0, NQ>(q, k, hd, scale, s, stride);
  }
}

// work(i, NQ) for the queries [i, i + NQ) in chunks of up to `most` (at most 4), NQ a
// compile-time constant (std::integral_constant) so that the chunk's queries stay in registers.
template <class Work>
void query_chunks(int nq, int most, Work&& work) {
  for (int i = 0; i < nq;) {
    const int m = std::min(nq - i, most);
    switch (m) {
      case 4: work(i, std::integral_constant<int, 4>{}); break;
      case 3: work(i, std::integral_constant<int, 3>{}); break;
      case 2: work(i, std::integral_constant<int, 2>{}); break;
      default: work(i, std::integral_constant<int, 1>{}); break;
    }
    i += m;
  }
}

// The queries up to 4 at a time (2 past hd 128: their 16 t vectors each spill, and 4 of them
// were slower than 2 + 2; attn_bench decode at 32k, a group of 4 at hd 256).
template <bool F16, bool Online>
int32_t scores16_any(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* s, size_t stride) {
  int32_t done = 0;
  query_chunks(nq, hd > 128 ? 2 : 4, [&](int i, auto chunk) {
    done = scores16_hd<F16, Online, decltype(chunk)::value>(q + i * hd, k, hd, scale, s + i * stride, stride);
  });
  return done;
}

// The keys of one lane (j = j0, j0 + lanes, ...) into a[d0, d0 + 16R) for NQ queries (query
// i: probabilities p + i * p_stride, lane sums a + i * a_stride), held in registers; each
// row chunk is loaded and widened once for all of them.
template <bool F16, int R, int NQ>
void accumulate_lane16(const float* p, size_t p_stride, const KvRows& v, int32_t j0, int lanes, int32_t d0, float* a,
                       size_t a_stride) {
  __m512 acc[NQ][R];
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_loadu_ps(a + i * a_stride + d0 + 16 * r);
  for (int32_t j = j0; j < v.n; j += lanes) {
    __m512 pj[NQ];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) pj[i] = _mm512_set1_ps(p[i * p_stride + size_t(j)]);
    const size_t base = size_t(j) * v.stride + size_t(d0);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = load16<F16>(v.data, base + size_t(16 * r));
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) acc[i][r] = _mm512_fmadd_ps(pj[i], x, acc[i][r]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(a + i * a_stride + d0 + 16 * r, acc[i][r]);
}

// Lane after lane, the dims in chunks of up to kMaxR vectors (NQ kMaxR accumulators).
template <bool F16, int NQ>
void accumulate16_n(const float* p, size_t p_stride, const KvRows& v, int32_t hd, int32_t lane0, int lanes, float* acc) {
  constexpr int kMaxR = NQ <= 2 ? 8 : 4;
  const int32_t d16 = hd & ~15;
  const size_t a_stride = size_t(lanes) * size_t(hd);
  for (int l = 0; l < lanes; ++l) {
    const int32_t j0 = (l - lane0 + 16) % lanes;
    float* a = acc + size_t(l) * size_t(hd);
    int32_t d = 0;
    for (; d + 16 * kMaxR <= d16; d += 16 * kMaxR) accumulate_lane16<F16, kMaxR, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride);
    switch ((d16 - d) / 16) {
      case 7: accumulate_lane16<F16, 7, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      case 6: accumulate_lane16<F16, 6, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      case 5: accumulate_lane16<F16, 5, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      case 4: accumulate_lane16<F16, 4, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      case 3: accumulate_lane16<F16, 3, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      case 2: accumulate_lane16<F16, 2, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      case 1: accumulate_lane16<F16, 1, NQ>(p, p_stride, v, j0, lanes, d, a, a_stride); break;
      default: break;
    }
  }
}

template <bool F16>
int32_t accumulate16(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0, int lanes,
                     float* acc) {
  query_chunks(nq, 4, [&](int i, auto chunk) {
    accumulate16_n<F16, decltype(chunk)::value>(p + i * p_stride, p_stride, v, hd, lane0, lanes,
                                                acc + size_t(i) * size_t(lanes) * size_t(hd));
  });
  return hd & ~15;
}

// ---- The online order (attn_kernels.h) with the KEYS in the lanes, for head dims that are
// a multiple of 16: per block of 16 positions, the K rows are widened and transposed once
// (kt: [hd][16] f32) and the V rows widened once (vb: [16][hd] f32) for all the queries of
// the group; then, kTileQueries queries at a time, each query's 16 scores are one vector
// (leaf c of the dot is a vertical fma chain over the transposed dims c, c + 16, ..., the
// leaves summed in tree16's order), the block's max and its tree16 of e are horizontal over
// that vector (_mm512_reduce_add_ps is tree16's order), and the values have the DIMS in the
// lanes (an fma chain per dim over the block's keys in order). Every operation of a query is
// the per-query kernels' one, so the bits are theirs. Against the query-lane kernel
// (attn_group_impl.h), the rows are widened once for all the group's queries (ops.cpp hands
// over up to 512), a block no query of a tile sees is skipped, and there are no per-dim lane
// sums. attn_bench 27k keys, 165 tokens, 16/8 heads, hd 64, 2 threads: 175-185 -> 220-237
// GFLOP/s (this machine's fma peak is ~458); hd 256 at 8k: 179-185 -> 268; GQA-8 decode at
// 32k: 58-59 -> 92-96.

constexpr int kTileQueries = 4;     // queries a tile shares each transposed K / widened V vector with
constexpr int32_t kTileMaxDims = 256;

// Leaf c + leaf c + 8 of the online dot for MQ queries: the chains over d = c, c + 16, ...
// and d = c + 8, c + 24, ... of q[i][d] k_x[d] (kt: [hd][16] f32, key x in lane x).
template <int MQ>
[[gnu::always_inline]] inline void leaf_pair(const float* const* q, const float* kt, int32_t hd, int c, __m512* out) {
  __m512 a[MQ], b[MQ];
#pragma GCC unroll 4
  for (int i = 0; i < MQ; ++i) a[i] = b[i] = _mm512_setzero_ps();
  for (int32_t d = c; d < hd; d += 16) {
    const __m512 ka = _mm512_load_ps(kt + size_t(d) * 16), kb = _mm512_load_ps(kt + size_t(d + 8) * 16);
#pragma GCC unroll 4
    for (int i = 0; i < MQ; ++i) {
      a[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][d]), ka, a[i]);
      b[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][d + 8]), kb, b[i]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MQ; ++i) out[i] = _mm512_add_ps(a[i], b[i]);
}

// (pair c + pair c + 4) for MQ queries.
template <int MQ>
[[gnu::always_inline]] inline void leaf_quad(const float* const* q, const float* kt, int32_t hd, int c, __m512* out) {
  __m512 a[MQ], b[MQ];
  leaf_pair<MQ>(q, kt, hd, c, a);
  leaf_pair<MQ>(q, kt, hd, c + 4, b);
#pragma GCC unroll 4
  for (int i = 0; i < MQ; ++i) out[i] = _mm512_add_ps(a[i], b[i]);
}

// The dots of MQ queries (q[i]: [hd] f32) with the block's 16 keys (kt: [hd][16] f32), in the
// online order: s[i] lane x = tree16 over c of leaf c, ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7))
// over the pairs (c, c + 8).
template <int MQ>
[[gnu::always_inline]] inline void tile_dots(const float* const* q, const float* kt, int32_t hd, __m512* s) {
  __m512 q0[MQ], q1[MQ], q2[MQ], q3[MQ];
  leaf_quad<MQ>(q, kt, hd, 0, q0);
  leaf_quad<MQ>(q, kt, hd, 2, q2);
  leaf_quad<MQ>(q, kt, hd, 1, q1);
  leaf_quad<MQ>(q, kt, hd, 3, q3);
#pragma GCC unroll 4
  for (int i = 0; i < MQ; ++i) s[i] = _mm512_add_ps(_mm512_add_ps(q0[i], q2[i]), _mm512_add_ps(q1[i], q3[i]));
}

// out[c][r] = in[r][c] for a 16 x 16 f32 block (in: rows r at in + r * stride; out: [16][16]).
inline void transpose16(const float* in, size_t stride, float* out) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + size_t(i) * stride);
  for (int i = 0; i < 16; i += 2) {  // interleave pairs of rows: t[i] = a0 b0 a1 b1 .., t[i + 1] = a2 b2 a3 b3 ..
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)  // 4 x 4 blocks within each 128-bit lane
    for (int k = 0; k < 2; ++k) {
      const __m512d a = _mm512_castps_pd(t[i + k]), b = _mm512_castps_pd(t[i + k + 2]);
      r[i + 2 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  // r[4 g + j], 128-bit lane l: column 4 l + j of rows 4 g .. 4 g + 3. Gather the lanes.
  for (int j = 0; j < 4; ++j) {
    const __m512 a01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), a23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
    const __m512 b01 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE), b23 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
    _mm512_storeu_ps(out + (0 + j) * 16, _mm512_shuffle_f32x4(a01, a23, 0x88));
    _mm512_storeu_ps(out + (4 + j) * 16, _mm512_shuffle_f32x4(a01, a23, 0xDD));
    _mm512_storeu_ps(out + (8 + j) * 16, _mm512_shuffle_f32x4(b01, b23, 0x88));
    _mm512_storeu_ps(out + (12 + j) * 16, _mm512_shuffle_f32x4(b01, b23, 0xDD));
  }
}

// The values of the block for MQ queries and the dims [d0, d0 + 16 DV): acc[i] (row i0 + i of
// [nq][hd]) times alpha[i], then one fma chain per dim over the block's rows in order.
template <int MQ, int DV>
[[gnu::always_inline]] inline void tile_values(const float (*e)[16], const float* alpha, const float* const* vl,
                                               int32_t d0, float* const* acc) {
  __m512 a[MQ][DV];
#pragma GCC unroll 4
  for (int i = 0; i < MQ; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < DV; ++c) a[i][c] = _mm512_mul_ps(_mm512_loadu_ps(acc[i] + d0 + 16 * c), _mm512_set1_ps(alpha[i]));
  for (int r = 0; r < 16; ++r) {
    if (!vl[r]) continue;
    __m512 v[DV];
#pragma GCC unroll 4
    for (int c = 0; c < DV; ++c) v[c] = _mm512_loadu_ps(vl[r] + d0 + 16 * c);
#pragma GCC unroll 4
    for (int i = 0; i < MQ; ++i) {
      const __m512 p = _mm512_set1_ps(e[i][r]);
#pragma GCC unroll 4
      for (int c = 0; c < DV; ++c) a[i][c] = _mm512_fmadd_ps(p, v[c], a[i][c]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MQ; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < DV; ++c) _mm512_storeu_ps(acc[i] + d0 + 16 * c, a[i][c]);
}

// One block [j0, j0 + 16) for the MQ queries [i0, i0 + MQ) of g: scores, the softmax step
// (m, l: [nq] running max and sum) and the values (acc: [nq][hd] f32 sums of e v). seen:
// the block's keys that have rows; vl: [16] widened V rows (null: no row).
template <int MQ>
void tile_block(const AttnGroup& g, int i0, int32_t j0, const float* kt, const float* const* vl, __mmask16 seen,
                int32_t hd, float scale, float* m, float* l, float* acc) {
  // A block none of the tile's queries sees changes nothing (attn_kernels.h): skipped.
  bool any = false;
  for (int i = 0; i < MQ; ++i) any = any || (g.first[i0 + i] - g.p0 <= j0 + 15 && g.last[i0 + i] - g.p0 >= j0);
  if (!any) return;
  const float* q[MQ];
  for (int i = 0; i < MQ; ++i) q[i] = g.q[i0 + i];
  __m512 s[MQ];
  tile_dots<MQ>(q, kt, hd, s);
  const __m512i jv = _mm512_add_epi32(_mm512_set1_epi32(j0), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  alignas(64) float e[MQ][16];
  static_assert(MQ <= 16, "the factors of a tile's queries share one vector");
  alignas(64) float dm[16] = {}, alpha[16];  // [MQ] m - m' of each query, then expf_ggml of it
  __m512 x[MQ];
  for (int i = 0; i < MQ; ++i) {
    const int32_t lo = g.first[i0 + i] - g.p0, hi = g.last[i0 + i] - g.p0;
    const __mmask16 vis = seen & _mm512_cmple_epi32_mask(_mm512_set1_epi32(lo), jv) & _mm512_cmple_epi32_mask(jv, _mm512_set1_epi32(hi));
    x[i] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), vis, _mm512_mul_ps(s[i], _mm512_set1_ps(scale)));
    const float mx = std::max(std::max(m[i0 + i], -FLT_MAX), _mm512_reduce_max_ps(x[i]));
    dm[i] = m[i0 + i] - mx;
    m[i0 + i] = mx;
  }
  _mm512_store_ps(alpha, Avx512Lanes::exp(_mm512_load_ps(dm)));  // one exp for the MQ queries' factors
  for (int i = 0; i < MQ; ++i) {
    const __m512 ex = Avx512Lanes::exp(_mm512_sub_ps(x[i], _mm512_set1_ps(m[i0 + i])));
    _mm512_store_ps(e[i], ex);
    float la = l[i0 + i] * alpha[i];
    asm("" : "+x"(la));  // not fused with the add (attn_group_impl.h: rounded)
    l[i0 + i] = la + _mm512_reduce_add_ps(ex);  // GCC folds it in tree16's order (kernels_impl.h)
  }
  float* accs[MQ];
  for (int i = 0; i < MQ; ++i) accs[i] = acc + size_t(i0 + i) * size_t(hd);
  int32_t d0 = 0;
  for (; d0 + 64 <= hd; d0 += 64) tile_values<MQ, 4>(e, alpha, vl, d0, accs);
  switch ((hd - d0) / 16) {
    case 3: tile_values<MQ, 3>(e, alpha, vl, d0, accs); break;
    case 2: tile_values<MQ, 2>(e, alpha, vl, d0, accs); break;
    case 1: tile_values<MQ, 1>(e, alpha, vl, d0, accs); break;
    default: break;
  }
}

// attn_group in the online order with the keys in the lanes (above); hd % 16 == 0, hd <= kTileMaxDims.
void group_tiles_online(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                        DType vt, int32_t hd, float scale) {
  const size_t nq = size_t(g.nq);
  std::vector<float> m(nq), l(nq), acc(nq * size_t(hd), 0.f);  // [nq] max, [nq] sum, [nq][hd] f32 sums of e v
  for (size_t i = 0; i < nq; ++i) {
    m[i] = g.sinks ? g.sinks[i] : -INFINITY;
    l[i] = m[i] == -INFINITY ? 0.f : 1.f;  // a sink starts the sum at exp(0)
  }
  alignas(64) float ktr[kTileMaxDims * 16];   // [hd][16] f32 the block's K, transposed
  alignas(64) float vb[16 * kTileMaxDims];    // [16][hd] f32 the block's V rows
  alignas(64) float kb[16 * kTileMaxDims];    // [16][hd] f32 the block's K rows (0 where none)
  const int32_t kbytes = int32_t(row_bytes(kt, hd)), vbytes = int32_t(row_bytes(vt, hd));
  constexpr int32_t kAhead = 32;  // keys
  for (int32_t j0 = 0; j0 < n; j0 += 16) {
    __mmask16 seen = 0;
    const float* vl[16];
    for (int r = 0; r < 16; ++r) {
      const int32_t j = j0 + r;
      if (j + kAhead < n) prefetch_row(k_rows[j + kAhead], kbytes), prefetch_row(v_rows[j + kAhead], vbytes);
      vl[r] = v_rows[j] ? row_f32(v_rows[j], vt, 0, hd, vb + size_t(r) * size_t(hd)) : nullptr;
      float* kr = kb + size_t(r) * size_t(hd);
      if (!k_rows[j]) {
        std::fill(kr, kr + hd, 0.f);
        continue;
      }
      seen |= __mmask16(1u << r);
      // Copied when f32 (row_f32 hands those back in place): one contiguous block to
      // transpose ran ~6% faster at 27k than transposing from the 16 row pointers.
      const float* w = row_f32(k_rows[j], kt, 0, hd, kr);
      if (w != kr) std::copy(w, w + hd, kr);
    }
    if (!seen) continue;
    for (int32_t d = 0; d < hd; d += 16) transpose16(kb + d, size_t(hd), ktr + size_t(d) * 16);
    int i0 = 0;
    for (; i0 + kTileQueries <= g.nq; i0 += kTileQueries)
      tile_block<kTileQueries>(g, i0, j0, ktr, vl, seen, hd, scale, m.data(), l.data(), acc.data());
    for (; i0 < g.nq; ++i0) tile_block<1>(g, i0, j0, ktr, vl, seen, hd, scale, m.data(), l.data(), acc.data());
  }
  for (size_t i = 0; i < nq; ++i) {
    const float inv = 1.f / l[i];
    for (int32_t d = 0; d < hd; ++d) g.out[i][d] = acc[i * size_t(hd) + size_t(d)] * inv;
  }
}

}  // namespace

int32_t attn_scores16_avx512(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores,
                             size_t stride, bool online) {
  if (hd % 64 != 0) return 0;
  if (online)
    return k.f16 ? scores16_any<true, true>(q, nq, k, hd, scale, scores, stride)
                 : scores16_any<false, true>(q, nq, k, hd, scale, scores, stride);
  return k.f16 ? scores16_any<true, false>(q, nq, k, hd, scale, scores, stride)
               : scores16_any<false, false>(q, nq, k, hd, scale, scores, stride);
}

int32_t attn_accumulate16_avx512(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0,
                                 int lanes, float* acc) {
  return v.f16 ? accumulate16<true>(p, p_stride, nq, v, hd, lane0, lanes, acc)
               : accumulate16<false>(p, p_stride, nq, v, hd, lane0, lanes, acc);
}

void attn_group_avx512(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                        DType vt, int32_t hd, float scale) {
  if (attn_online(kt, vt) && hd % 16 == 0 && hd <= kTileMaxDims) return group_tiles_online(g, k_rows, v_rows, n, kt, vt, hd, scale);
  attn_group_impl<Avx512Lanes>(g, k_rows, v_rows, n, kt, vt, hd, scale);
}

}  // namespace ws::detail

#pragma GCC pop_options
