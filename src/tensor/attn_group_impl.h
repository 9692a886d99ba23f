// Grouped attention (attn_group, attn_kernels.h) on vector traits V, included by
// attn_kernels_avx2.cpp (8 lanes) and attn_kernels_avx512.cpp (16 lanes): the queries are the
// lanes, so every K/V row is loaded once for all of them and each lane runs the float
// sequence of attn_kernels.h as vertical operations, the same bits whatever the width.
// Internal to the including file.
//
// V provides: F, kLanes, kQueryVectors (vectors of queries a pass over the keys shares),
// kValueDims (accumulators of the values pass), zero(), set1(float), load(const float*), store(float*, F), add,
// sub, mul, fmadd(a, b, c) = a * b + c (fused), max, exp (expf_ggml per lane), and
// visible(x, j, lo, hi): x in the lanes i with lo[i] <= j <= hi[i], -inf in the others.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tensor/attn_kernels.h"

namespace ws::detail {
namespace {

constexpr int32_t kValueBlock = 256;  // keys per block of the values pass (a multiple of 16)
constexpr int32_t kScoreKeys = 4;   // keys a pass over the queries' leaves scores at once

// tree16 of F-valued leaves t(0) .. t(15): ((t0 + t8) + (t4 + t12)) + ((t2 + t10) + (t6 + t14)),
// plus the same over the odd leaves: the pairs (i, i + 8), (i, i + 4), (i, i + 2), (0, 1).
template <class V, class Leaf>
inline typename V::F tree16(Leaf t) {
  auto pair = [&](int i) { return V::add(t(i), t(i + 8)); };
  const auto even = V::add(V::add(pair(0), pair(4)), V::add(pair(2), pair(6)));
  const auto odd = V::add(V::add(pair(1), pair(5)), V::add(pair(3), pair(7)));
  return V::add(even, odd);
}

// Row j's dims [d0, d0 + n) as f32: the row itself (f32), or widened into tmp: f16 exactly,
// q8_0 / q4_0 as dequantize_row does (d * q, d * (q - 8)), block by block.
inline const float* row_f32(const void* row, DType type, int32_t d0, int32_t n, float* tmp) {
  switch (type) {
    case DType::f32: return static_cast<const float*>(row) + d0;
    case DType::f16: {
      const auto* h = static_cast<const uint16_t*>(row) + d0;
      int32_t d = 0;
      for (; d + 8 <= n; d += 8) _mm256_storeu_ps(tmp + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + d))));
      for (; d < n; ++d) tmp[d] = _cvtsh_ss(h[d]);
      return tmp;
    }
    case DType::q8_0: {  // d0 and n: multiples of 8 (whole head rows, or DC dims)
      const auto* b = static_cast<const block_q8_0*>(row);
      for (int32_t i = d0; i < d0 + n; i += 8) {
        const block_q8_0& blk = b[i / 32];
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + i % 32))));
        _mm256_storeu_ps(tmp + (i - d0), _mm256_mul_ps(q, _mm256_set1_ps(_cvtsh_ss(blk.d))));
      }
      return tmp;
    }
    default: {  // q4_0: elements 0..15 of a block in the low nibbles, 16..31 in the high ones
      const auto* b = static_cast<const block_q4_0*>(row);
      for (int32_t i = d0; i < d0 + n; i += 8) {
        const block_q4_0& blk = b[i / 32];
        const int j = i % 32;
        __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + j % 16)));
        q = j < 16 ? _mm256_and_si256(q, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(q, 4);
        const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(8)));
        _mm256_storeu_ps(tmp + (i - d0), _mm256_mul_ps(v, _mm256_set1_ps(_cvtsh_ss(blk.d))));
      }
      return tmp;
    }
  }
}

// Asks for the cache lines of a K/V row ahead of its use: the rows of one kv head are
// spread a whole token's K/V apart (pages of all heads), a stride the hardware prefetcher
// does not follow far enough to hide the memory latency at depth.
inline void prefetch_row(const void* row, int32_t bytes) {
  if (!row) return;
  for (int32_t b = 0; b < bytes; b += 64) _mm_prefetch(static_cast<const char*>(row) + b, _MM_HINT_T0);
}

// part[c] of one key for the Q query vectors: the fma chains over d = c, c + 64, ... (S
// steps; S = 0: np / 64 at run time); qt: [hd][Q * L].
template <class V, int S, int Q>
inline void group_part(const float* qt, const float* kr, int c, int32_t np, typename V::F* p) {
  constexpr int L = V::kLanes;
  for (int v = 0; v < Q; ++v) p[v] = V::zero();
  if constexpr (S > 0) {
#pragma GCC unroll 4
    for (int st = 0; st < S; ++st) {
      const auto k = V::set1(kr[c + 64 * st]);
      for (int v = 0; v < Q; ++v) p[v] = V::fmadd(V::load(qt + (size_t(c + 64 * st) * Q + v) * L), k, p[v]);
    }
  } else {
    for (int32_t d = c; d < np; d += 64) {
      const auto k = V::set1(kr[d]);
      for (int v = 0; v < Q; ++v) p[v] = V::fmadd(V::load(qt + (size_t(d) * Q + v) * L), k, p[v]);
    }
  }
}

// The scores of one key (row kr, f32) for the Q * L query lanes of qt, S as above: s[Q].
template <class V, int S, int Q>
inline void group_dot(const float* qt, const float* kr, int32_t hd, typename V::F* s) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const int32_t np = hd & ~63;
  for (int v = 0; v < Q; ++v) s[v] = V::zero();
  if (np > 0) {
    // All 16 t[c] first, then the tree: independent chains for the out-of-order core (making
    // each t when the tree reaches it keeps fewer registers alive but ran 15% slower).
    F t[16][Q];  // (part[c] + part[c + 32]) + (part[c + 16] + part[c + 48])
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) {
      F a[Q], b[Q], e[Q], f[Q];
      group_part<V, S, Q>(qt, kr, c, np, a);
      group_part<V, S, Q>(qt, kr, c + 32, np, b);
      group_part<V, S, Q>(qt, kr, c + 16, np, e);
      group_part<V, S, Q>(qt, kr, c + 48, np, f);
      for (int v = 0; v < Q; ++v) t[c][v] = V::add(V::add(a[v], b[v]), V::add(e[v], f[v]));
    }
    for (int v = 0; v < Q; ++v) s[v] = tree16<V>([&](int c) { return t[c][v]; });
  }
  for (int32_t d = np; d < hd; ++d) {
    const auto k = V::set1(kr[d]);
    for (int v = 0; v < Q; ++v) s[v] = V::fmadd(V::load(qt + (size_t(d) * Q + v) * L), k, s[v]);
  }
}

// The online order's dot (attn_kernels.h) of one key (row kr, f32) for the Q * L query lanes
// of qt: s[Q]. Leaf c is the chain over d = c, c + 16, ...
template <class V, int Q>
inline void group_dot_online(const float* qt, const float* kr, int32_t hd, typename V::F* s) {
  constexpr int L = V::kLanes;
  const int32_t np = hd & ~15;
  for (int v = 0; v < Q; ++v) {
    s[v] = tree16<V>([&](int c) {
      auto p = V::zero();
      for (int32_t d = c; d < np; d += 16) p = V::fmadd(V::load(qt + (size_t(d) * Q + v) * L), V::set1(kr[d]), p);
      return p;
    });
    for (int32_t d = np; d < hd; ++d) s[v] = V::fmadd(V::load(qt + (size_t(d) * Q + v) * L), V::set1(kr[d]), s[v]);
  }
}

// group_dot for kScoreKeys keys at once (rows kr[x] f32, S = hd / 64 >= 1), leaf after leaf: the
// query vectors of leaf c are loaded once for all the keys (one key at a time, the loads of
// q and of the key's broadcasts outnumber the multiplies 3 to 2 and bind the loop); the
// leaves t[c] wait in tl ([kScoreKeys][16][Q] vectors, L1) for the trees. Out: s[x][Q].
// Online: the online order's dot, leaf c one chain over d = c, c + 16, ... in order.
template <class V, int S, int Q, bool Online>
inline void group_dot_keys(const float* qt, const float* const* kr, int32_t hd, typename V::F* tl, typename V::F (*s)[Q]) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  for (int c = 0; c < 16; ++c) {
    F q[4][S][Q];  // the dims c, c + 32, c + 16, c + 48 (+ 64 st) of the query vectors (online: in order)
    const int xs[4] = {c, Online ? c + 16 : c + 32, Online ? c + 32 : c + 16, c + 48};
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int st = 0; st < S; ++st)
#pragma GCC unroll 2
        for (int v = 0; v < Q; ++v) q[i][st][v] = V::load(qt + (size_t(xs[i] + 64 * st) * Q + v) * L);
    for (int x = 0; x < kScoreKeys; ++x) {
      if constexpr (Online) {
        F p[Q];
#pragma GCC unroll 2
        for (int v = 0; v < Q; ++v) p[v] = V::zero();
#pragma GCC unroll 4
        for (int st = 0; st < S; ++st)
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) {
            const F e = V::set1(kr[x][xs[i] + 64 * st]);
#pragma GCC unroll 2
            for (int v = 0; v < Q; ++v) p[v] = V::fmadd(q[i][st][v], e, p[v]);
          }
#pragma GCC unroll 2
        for (int v = 0; v < Q; ++v) tl[(x * 16 + c) * Q + v] = p[v];
        continue;
      }
      F p[4][Q];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
        for (int st = 0; st < S; ++st) {
          const F e = V::set1(kr[x][xs[i] + 64 * st]);
#pragma GCC unroll 2
          for (int v = 0; v < Q; ++v) p[i][v] = V::fmadd(q[i][st][v], e, st == 0 ? V::zero() : p[i][v]);
        }
#pragma GCC unroll 2
      for (int v = 0; v < Q; ++v) tl[(x * 16 + c) * Q + v] = V::add(V::add(p[0][v], p[1][v]), V::add(p[2][v], p[3][v]));
    }
  }
  for (int x = 0; x < kScoreKeys; ++x)
    for (int v = 0; v < Q; ++v) {
      s[x][v] = tree16<V>([&](int c) { return tl[(x * 16 + c) * Q + v]; });
      for (int32_t d = 64 * S; d < hd; ++d) s[x][v] = V::fmadd(V::load(qt + (size_t(d) * Q + v) * L), V::set1(kr[x][d]), s[x][v]);
    }
}

// Scores of the rows [j0, j1) of n for the lanes (row j: k_rows[j - j0]; s: [j1 - j0][Q *
// L]), the dots in ggml's order or the online one, -inf where a lane does not see the key
// (and at the positions with no row); returns their max per lane, starting from m[Q].
template <class V, int S, int Q, bool Online>
void group_scores(const float* qt, const void* const* k_rows, DType kt, int32_t j0, int32_t j1, int32_t n, int32_t hd,
                  float scale, const int32_t* lo, const int32_t* hi, float* kr, float* s, typename V::F* m) {
  constexpr int L = V::kLanes;
  const auto sc = V::set1(scale);
  constexpr int32_t kAhead = 8;  // keys
  const int32_t bytes = int32_t(row_bytes(kt, hd));
  typename V::F tl[kScoreKeys * 16 * Q];  // [kScoreKeys][16][Q] leaves of group_dot_keys
  for (int32_t j = j0; j < j1; ++j) {
    if (j + kAhead < n) prefetch_row(k_rows[j - j0 + kAhead], bytes);
    typename V::F x[Q];
    const bool whole = S > 0 && j + kScoreKeys <= j1 &&
                       std::all_of(k_rows + (j - j0), k_rows + (j - j0) + kScoreKeys, [](const void* r) { return r != nullptr; });
    if (whole) {  // kScoreKeys keys at once
      for (int y = 1; y < kScoreKeys && j + kAhead + y < n; ++y) prefetch_row(k_rows[j - j0 + kAhead + y], bytes);
      const float* rows[kScoreKeys];
      for (int y = 0; y < kScoreKeys; ++y) rows[y] = row_f32(k_rows[j - j0 + y], kt, 0, hd, kr + y * hd);
      typename V::F out[kScoreKeys][Q];
      group_dot_keys<V, S, Q, Online>(qt, rows, hd, tl, out);
      for (int y = 0; y < kScoreKeys; ++y)
        for (int v = 0; v < Q; ++v) {
          x[v] = V::visible(V::mul(out[y][v], sc), j + y, lo + v * L, hi + v * L);
          V::store(s + (size_t(j - j0 + y) * Q + v) * L, x[v]);
          m[v] = V::max(m[v], x[v]);
        }
      j += kScoreKeys - 1;
      continue;
    }
    if (k_rows[j - j0]) {
      const float* row = row_f32(k_rows[j - j0], kt, 0, hd, kr);
      if constexpr (Online) group_dot_online<V, Q>(qt, row, hd, x);
      else group_dot<V, S, Q>(qt, row, hd, x);
      for (int v = 0; v < Q; ++v) x[v] = V::visible(V::mul(x[v], sc), j, lo + v * L, hi + v * L);
    } else {
      for (int v = 0; v < Q; ++v) x[v] = V::set1(-INFINITY);
    }
    for (int v = 0; v < Q; ++v) {
      V::store(s + (size_t(j - j0) * Q + v) * L, x[v]);
      m[v] = V::max(m[v], x[v]);
    }
  }
}

// group_scores with S = hd / 64 known at compile time for the usual head dims (the online
// order's chains run through every dim up to hd & ~15, so there hd must be 64 S).
template <class V, int Q, bool Online>
void group_scores_hd(const float* qt, const void* const* k_rows, DType kt, int32_t j0, int32_t j1, int32_t n,
                     int32_t hd, float scale, const int32_t* lo, const int32_t* hi, float* kr, float* s,
                     typename V::F* m) {
  switch (Online && hd % 64 != 0 ? 0 : hd / 64) {
    case 1: return group_scores<V, 1, Q, Online>(qt, k_rows, kt, j0, j1, n, hd, scale, lo, hi, kr, s, m);
    case 2: return group_scores<V, 2, Q, Online>(qt, k_rows, kt, j0, j1, n, hd, scale, lo, hi, kr, s, m);
    case 4: return group_scores<V, 4, Q, Online>(qt, k_rows, kt, j0, j1, n, hd, scale, lo, hi, kr, s, m);
    default: return group_scores<V, 0, Q, Online>(qt, k_rows, kt, j0, j1, n, hd, scale, lo, hi, kr, s, m);
  }
}

// The values of the lane l (keys j = l mod 16) of the block [j0, j1) (j0 a multiple of 16)
// for the DC dims [d0, d0 + DC): the lane sums a[l][d] (acc of attn_kernels.h; a:
// [16][hd][Q * L] f32) continue their fma chains over these keys in order. The lane's r-th
// key: probabilities pl[r] (Q vectors), row vl[r] widened to f32 (null: no row, all p = 0).
template <class V, int DC, int Q>
void lane_values(const float* pl, const float* const* vl, int32_t rows, int l, int32_t d0, int32_t hd, float* a) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  float* al = a + (size_t(l) * size_t(hd) + size_t(d0)) * Q * L;
  F acc[DC][Q];
#pragma GCC unroll 16
  for (int dd = 0; dd < DC; ++dd)
    for (int v = 0; v < Q; ++v) acc[dd][v] = V::load(al + (size_t(dd) * Q + v) * L);
  for (int32_t r = 0; r < rows; ++r) {
    if (!vl[r]) continue;
    F pj[Q];
    for (int v = 0; v < Q; ++v) pj[v] = V::load(pl + (size_t(r) * Q + v) * L);
    const float* vr = vl[r] + d0;
#pragma GCC unroll 16
    for (int dd = 0; dd < DC; ++dd) {
      const auto x = V::set1(vr[dd]);
      for (int v = 0; v < Q; ++v) acc[dd][v] = V::fmadd(pj[v], x, acc[dd][v]);
    }
  }
#pragma GCC unroll 16
  for (int dd = 0; dd < DC; ++dd)
    for (int v = 0; v < Q; ++v) V::store(al + (size_t(dd) * Q + v) * L, acc[dd][v]);
}

// The values of the keys [j0, j1), lane after lane: a lane's rows (16 at most) are widened
// once into vw ([kValueBlock / 16][hd] f32) and its probabilities p_j = e_j * inv made once
// into pw ([kValueBlock / 16][Q * L] f32; e: [n][Q * L] exponentials, inv: [Q] 1 / their
// sums), both staying in L1 while all the dims are done (dims outermost, every pass over the
// block's 64 KB of rows and probabilities missed L1). Asks for the next block's rows.
template <class V, int Q>
void group_values(const float* e, const typename V::F* inv, const void* const* v_rows, DType vt, int32_t n,
                  int32_t j0, int32_t j1, int32_t hd, float* vw, float* pw, float* a) {
  constexpr int DC = V::kValueDims / Q, L = V::kLanes;
  const int32_t bytes = int32_t(row_bytes(vt, hd));
  for (int l = 0; l < 16; ++l) {
    for (int32_t j = j1 + l; j < std::min(n, j1 + kValueBlock); j += 16) prefetch_row(v_rows[j], bytes);
    const float* vl[kValueBlock / 16];
    int32_t rows = 0;
    for (int32_t j = j0 + l; j < j1; j += 16, ++rows) {
      vl[rows] = v_rows[j] ? row_f32(v_rows[j], vt, 0, hd, vw + size_t(rows) * size_t(hd)) : nullptr;
      for (int v = 0; v < Q; ++v)
        V::store(pw + (size_t(rows) * Q + v) * L, V::mul(V::load(e + (size_t(j) * Q + v) * L), inv[v]));
    }
    int32_t d = 0;
    for (; d + DC <= hd; d += DC) lane_values<V, DC, Q>(pw, vl, rows, l, d, hd, a);
    for (; d < hd; ++d) lane_values<V, 1, Q>(pw, vl, rows, l, d, hd, a);
  }
}

// Uninitialised scratch (every element is written before it is read).
inline std::unique_ptr<float[]> scratch(size_t n) { return std::unique_ptr<float[]>(new float[n]); }

// The lanes of the queries [i0, i0 + nq) of g, w lanes in all: qt [hd][w] the queries
// (0 in unused lanes), lo / hi [w] their visible rows (none in unused lanes), sink [w] their
// sink logits (-inf where none).
inline void lanes_setup(const AttnGroup& g, int i0, int nq, int w, int32_t hd, float* qt, int32_t* lo, int32_t* hi,
                        float* sink) {
  for (int i = 0; i < w; ++i) {
    const bool used = i < nq;
    lo[i] = used ? g.first[i0 + i] - g.p0 : 1;
    hi[i] = used ? g.last[i0 + i] - g.p0 : 0;
    sink[i] = used && g.sinks ? g.sinks[i0 + i] : -INFINITY;
    for (int32_t d = 0; used && d < hd; ++d) qt[size_t(d) * size_t(w) + size_t(i)] = g.q[i0 + i][d];
  }
}

// attn_group for the queries [i0, i0 + Q * L) of g (fewer at the end), Q vectors of L lanes.
template <class V, int Q>
void group_lanes(const AttnGroup& g, int i0, const void* const* k_rows, const void* const* v_rows, int32_t n,
                 DType kt, DType vt, int32_t hd, float scale) {
  using F = typename V::F;
  constexpr int L = V::kLanes, W = Q * L;  // W: queries side by side
  const int nq = std::min(W, g.nq - i0);
  std::vector<float> qt(size_t(hd) * W, 0.f), kr(size_t(kScoreKeys * hd), 0.f);  // [hd][W] queries, [kScoreKeys][hd] converted keys
  const auto s = scratch(size_t(n) * W);                             // [n][W] scores, then probabilities
  alignas(64) int32_t lo[W], hi[W];
  alignas(64) float sink[W];
  lanes_setup(g, i0, nq, W, hd, qt.data(), lo, hi, sink);
  // Scores, -inf where a lane does not see the key (and at the block positions with no row).
  F m[Q];
  for (int v = 0; v < Q; ++v) m[v] = V::load(sink + v * L);
  group_scores_hd<V, Q, false>(qt.data(), k_rows, kt, 0, n, n, hd, scale, lo, hi, kr.data(), s.get(), m);
  // e = exp(x - m); sums of the 16-key blocks in double per lane; then the sink.
  alignas(64) float lane_m[W], block[L], inv_lanes[W];
  for (int v = 0; v < Q; ++v) V::store(lane_m + v * L, m[v]);
  double sum[W] = {};
  for (int32_t b = 0; b < n; b += 16)
    for (int v = 0; v < Q; ++v) {
      F e[16];
      for (int k = 0; k < 16; ++k) {
        float* x = s.get() + (size_t(b + k) * Q + v) * L;
        e[k] = V::exp(V::sub(V::load(x), m[v]));
        V::store(x, e[k]);
      }
      V::store(block, tree16<V>([&](int k) { return e[k]; }));
      for (int i = 0; i < L; ++i) sum[v * L + i] += double(block[i]);
    }
  for (int i = 0; i < W; ++i) {
    if (g.sinks && i < nq) sum[i] += double(std::exp(sink[i] - lane_m[i]));
    inv_lanes[i] = float(1.0 / sum[i]);
  }
  F inv[Q];
  for (int v = 0; v < Q; ++v) inv[v] = V::load(inv_lanes + v * L);
  // The values, kValueBlock keys at a time, a lane's keys at a time, DC dims a pass (the
  // accumulators in registers, the other dims' lane sums in a, in L2), then the tree over the
  // 16 lane sums of each dim. p_j = e_j * inv is made there (one pass over s fewer).
  const auto a = scratch(size_t(16) * size_t(hd) * W);  // [16][hd][W] f32 lane sums
  std::fill(a.get(), a.get() + size_t(16) * size_t(hd) * W, 0.f);
  std::vector<float> vw(size_t(kValueBlock / 16) * size_t(hd));  // a lane's rows widened
  std::vector<float> pw(size_t(kValueBlock / 16) * W);           // a lane's probabilities
  for (int32_t j0 = 0; j0 < n; j0 += kValueBlock)
    group_values<V, Q>(s.get(), inv, v_rows, vt, n, j0, std::min(n, j0 + kValueBlock), hd, vw.data(), pw.data(), a.get());
  for (int i = 0; i < nq; ++i) {
    const int v = i / L, lane = i % L;
    for (int32_t dd = 0; dd < hd; ++dd) {
      alignas(64) float t[L];
      V::store(t, tree16<V>([&](int l) { return V::load(a.get() + ((size_t(l) * size_t(hd) + size_t(dd)) * Q + v) * L); }));
      g.out[i0 + i][dd] = t[lane];
    }
  }
}

// ---- The online-softmax order (attn_kernels.h; K/V not both f32).

// x as it is: the empty asm hides a product from GCC, which would otherwise fuse it with the
// add that follows (GCC writes vector intrinsics as operators, and contracts them).
template <class F>
inline F rounded(F x) {
  asm("" : "+v"(x));
  return x;
}

constexpr int32_t kOnlineKeys = 64;  // keys per step: their scores / exponentials ([64][W]) and
                                     // widened V rows ([64][hd]) stay in L1 between the passes

// The softmax step of the 16-key blocks of one step for the lanes: e: [rows][Q * L] the
// scores, become the exponentials; m, l: [Q] running max and sum; alpha: [rows / 16][Q] the
// blocks' factors of the sums; grown: [rows / 16] whether any lane's alpha is not 1.
template <class V, int Q>
void online_softmax(float* e, int32_t rows, typename V::F* m, typename V::F* l, typename V::F (*alpha)[Q], bool* grown) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  for (int32_t b = 0; b < rows; b += 16) {
    grown[b / 16] = false;
    for (int v = 0; v < Q; ++v) {
      float* x = e + (size_t(b) * Q + v) * L;
      F mx = V::max(m[v], V::set1(-FLT_MAX));
      for (int k = 0; k < 16; ++k) mx = V::max(mx, V::load(x + size_t(k) * Q * L));
      const F a = V::exp(V::sub(m[v], mx));
      F ek[16];
      for (int k = 0; k < 16; ++k) {
        ek[k] = V::exp(V::sub(V::load(x + size_t(k) * Q * L), mx));
        V::store(x + size_t(k) * Q * L, ek[k]);
      }
      l[v] = V::add(rounded(V::mul(l[v], a)), tree16<V>([&](int k) { return ek[k]; }));
      m[v] = mx;
      alpha[b / 16][v] = a;
      alignas(64) float t[L];
      V::store(t, a);
      for (float y : t) grown[b / 16] = grown[b / 16] || y != 1.f;
    }
  }
}

// The values of one step's rows for the DC dims [d0, d0 + DC): acc ([hd][Q * L] f32, one
// chain per dim and lane) continues over the rows in order, multiplied by a block's alpha
// before its rows where it grew. e: [rows][Q * L] exponentials; vl: [rows] rows widened to
// f32 (null: no row, all e = 0).
template <class V, int DC, int Q>
void online_values(const float* e, const float* const* vl, int32_t rows, const typename V::F (*alpha)[Q],
                   const bool* grown, int32_t d0, float* acc) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  float* ad = acc + size_t(d0) * Q * L;
  F a[DC][Q];
#pragma GCC unroll 16
  for (int dd = 0; dd < DC; ++dd)
    for (int v = 0; v < Q; ++v) a[dd][v] = V::load(ad + (size_t(dd) * Q + v) * L);
  for (int32_t b = 0; b < rows; b += 16) {
    if (grown[b / 16])
#pragma GCC unroll 16
      for (int dd = 0; dd < DC; ++dd)
        for (int v = 0; v < Q; ++v) a[dd][v] = V::mul(a[dd][v], alpha[b / 16][v]);
    for (int32_t r = b; r < b + 16; ++r) {
      if (!vl[r]) continue;
      F pj[Q];
      for (int v = 0; v < Q; ++v) pj[v] = V::load(e + (size_t(r) * Q + v) * L);
      const float* vr = vl[r] + d0;
#pragma GCC unroll 16
      for (int dd = 0; dd < DC; ++dd) {
        const auto x = V::set1(vr[dd]);
        for (int v = 0; v < Q; ++v) a[dd][v] = V::fmadd(pj[v], x, a[dd][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int dd = 0; dd < DC; ++dd)
    for (int v = 0; v < Q; ++v) V::store(ad + (size_t(dd) * Q + v) * L, a[dd][v]);
}

// Rows [j0, j0 + rows) widened to f32 into buf ([rows][hd]; an f32 row is used in place):
// out[r] points at row j0 + r (null where there is no row); asks for the next rows' lines.
inline void widen_step(const void* const* rows_in, DType t, int32_t j0, int32_t rows, int32_t n, int32_t hd, float* buf,
                       const float** out) {
  const int32_t bytes = int32_t(row_bytes(t, hd));
  for (int32_t r = 0; r < rows; ++r) {
    if (j0 + kOnlineKeys + r < n) prefetch_row(rows_in[j0 + kOnlineKeys + r], bytes);
    const void* row = rows_in[j0 + r];
    out[r] = row ? row_f32(row, t, 0, hd, buf + size_t(r) * size_t(hd)) : nullptr;
  }
}

// group_lanes in the online order for the queries [i0, i0 + sets * Q * L) of g (fewer at the
// end), kOnlineKeys keys a step: the step's K rows widened once for all sets, each set's
// scores and softmax step, the V rows widened once, each set's values.
template <class V, int Q>
void group_lanes_online(const AttnGroup& g, int i0, int sets, const void* const* k_rows, const void* const* v_rows,
                        int32_t n, DType kt, DType vt, int32_t hd, float scale) {
  using F = typename V::F;
  constexpr int L = V::kLanes, W = Q * L, DC = V::kValueDims / Q;
  struct Set {
    std::vector<float> qt, acc;  // [hd][W] queries (0 in unused lanes), [hd][W] f32 sums of e v
    std::unique_ptr<float[]> e;  // [kOnlineKeys][W] scores, then exponentials
    alignas(64) int32_t lo[W], hi[W];
    alignas(64) float sink[W];
    F m[Q], l[Q], alpha[kOnlineKeys / 16][Q];
    bool grown[kOnlineKeys / 16];
    int nq;
  };
  std::vector<Set> lane_sets(static_cast<size_t>(sets));
  for (int si = 0; si < sets; ++si) {
    Set& st = lane_sets[size_t(si)];
    st.nq = std::min(W, g.nq - i0 - si * W);
    st.qt.assign(size_t(hd) * W, 0.f);
    st.acc.assign(size_t(hd) * W, 0.f);
    st.e = scratch(size_t(kOnlineKeys) * W);
    lanes_setup(g, i0 + si * W, st.nq, W, hd, st.qt.data(), st.lo, st.hi, st.sink);
    alignas(64) float l0[W];
    for (int i = 0; i < W; ++i) l0[i] = st.sink[i] == -INFINITY ? 0.f : 1.f;  // a sink starts the sum at exp(0)
    for (int v = 0; v < Q; ++v) st.m[v] = V::load(st.sink + v * L), st.l[v] = V::load(l0 + v * L);
  }
  // [kScoreKeys][hd] f32: group_scores' conversion buffer; never written, as the rows come
  // widened (f32 rows are read in place), but it must point at memory (it is offset per key).
  std::vector<float> kr(size_t(kScoreKeys * hd));
  const auto kw = scratch(size_t(kOnlineKeys) * size_t(hd));    // [kOnlineKeys][hd] widened K rows
  const auto vw = scratch(size_t(kOnlineKeys) * size_t(hd));    // [kOnlineKeys][hd] widened V rows
  for (int32_t j0 = 0; j0 < n; j0 += kOnlineKeys) {
    const int32_t rows = std::min(n - j0, kOnlineKeys);
    const float* kl[kOnlineKeys];
    const float* vl[kOnlineKeys];
    widen_step(k_rows, kt, j0, rows, n, hd, kw.get(), kl);
    for (Set& st : lane_sets) {
      F step_max[Q];  // group_scores' running max, not needed here (online_softmax takes it per block)
      for (int v = 0; v < Q; ++v) step_max[v] = st.m[v];
      group_scores_hd<V, Q, true>(st.qt.data(), reinterpret_cast<const void* const*>(kl), DType::f32, j0, j0 + rows,
                                  j0 + rows, hd, scale, st.lo, st.hi, kr.data(), st.e.get(), step_max);
      online_softmax<V, Q>(st.e.get(), rows, st.m, st.l, st.alpha, st.grown);
    }
    widen_step(v_rows, vt, j0, rows, n, hd, vw.get(), vl);
    for (Set& st : lane_sets) {
      int32_t d = 0;
      for (; d + DC <= hd; d += DC) online_values<V, DC, Q>(st.e.get(), vl, rows, st.alpha, st.grown, d, st.acc.data());
      for (; d < hd; ++d) online_values<V, 1, Q>(st.e.get(), vl, rows, st.alpha, st.grown, d, st.acc.data());
    }
  }
  for (int si = 0; si < sets; ++si) {
    const Set& st = lane_sets[size_t(si)];
    alignas(64) float sums[W];
    for (int v = 0; v < Q; ++v) V::store(sums + v * L, st.l[v]);
    for (int i = 0; i < st.nq; ++i) {
      const float inv = 1.f / sums[i];
      for (int32_t dd = 0; dd < hd; ++dd) g.out[i0 + si * W + i][dd] = st.acc[size_t(dd) * W + size_t(i)] * inv;
    }
  }
}

}  // namespace

// All queries of g: V::kQueryVectors vectors of L lanes at a time, the last ones one vector
// at a time, in the order attn_online(kt, vt) says.
template <class V>
void attn_group_impl(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                     DType vt, int32_t hd, float scale) {
  constexpr int Q = V::kQueryVectors, L = V::kLanes, W = Q * L;
  int i0 = 0;
  if (attn_online(kt, vt)) {
    // Up to two sets of W queries share each widened row (their state is a few KB each).
    while (i0 + (Q - 1) * L < g.nq) {
      const int sets = i0 + W + (Q - 1) * L < g.nq ? 2 : 1;
      group_lanes_online<V, Q>(g, i0, sets, k_rows, v_rows, n, kt, vt, hd, scale);
      i0 += sets * W;
    }
    for (; i0 < g.nq; i0 += L) group_lanes_online<V, 1>(g, i0, 1, k_rows, v_rows, n, kt, vt, hd, scale);
    return;
  }
  for (; i0 + (Q - 1) * L < g.nq; i0 += W) group_lanes<V, Q>(g, i0, k_rows, v_rows, n, kt, vt, hd, scale);
  for (; i0 < g.nq; i0 += L) group_lanes<V, 1>(g, i0, k_rows, v_rows, n, kt, vt, hd, scale);
}

}  // namespace ws::detail
