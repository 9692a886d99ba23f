// Grouped attention (attn_group, attn_kernels.h) on vector traits V, included by
// attn_kernels_avx2.cpp (8 lanes) and attn_kernels_avx512.cpp (16 lanes): the queries are the
// lanes, so every K/V row is loaded once for all of them and each lane runs the float
// sequence of attn_kernels.h as vertical operations, the same bits whatever the width.
// Internal to the including file.
//
// V provides: F, kLanes, zero(), set1(float), load(const float*), store(float*, F), add,
// sub, mul, fmadd(a, b, c) = a * b + c (fused), max, exp (expf_ggml per lane), and
// visible(x, j, lo, hi): x in the lanes i with lo[i] <= j <= hi[i], -inf in the others.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/attn_kernels.h"

namespace ws::detail {
namespace {

// tree16 of F-valued leaves t(0) .. t(15): ((t0 + t8) + (t4 + t12)) + ((t2 + t10) + (t6 + t14)),
// plus the same over the odd leaves: the pairs (i, i + 8), (i, i + 4), (i, i + 2), (0, 1).
template <class V, class Leaf>
inline typename V::F tree16(Leaf t) {
  auto pair = [&](int i) { return V::add(t(i), t(i + 8)); };
  const auto even = V::add(V::add(pair(0), pair(4)), V::add(pair(2), pair(6)));
  const auto odd = V::add(V::add(pair(1), pair(5)), V::add(pair(3), pair(7)));
  return V::add(even, odd);
}

// Row j's dims [d0, d0 + n) as f32: the row itself, or converted into tmp.
inline const float* row_f32(const void* row, bool f16, int32_t d0, int32_t n, float* tmp) {
  if (!f16) return static_cast<const float*>(row) + d0;
  const auto* h = static_cast<const uint16_t*>(row) + d0;
  int32_t d = 0;
  for (; d + 8 <= n; d += 8) _mm256_storeu_ps(tmp + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + d))));
  for (; d < n; ++d) tmp[d] = _cvtsh_ss(h[d]);
  return tmp;
}

// part[c] of one key: the fma chain over d = c, c + 64, ... (S steps; S = 0: np / 64 at run time).
template <class V, int S>
inline typename V::F group_part(const float* qt, const float* kr, int c, int32_t np) {
  constexpr int L = V::kLanes;
  auto p = V::zero();
  if constexpr (S > 0) {
#pragma GCC unroll 4
    for (int st = 0; st < S; ++st) p = V::fmadd(V::load(qt + size_t(c + 64 * st) * L), V::set1(kr[c + 64 * st]), p);
  } else {
    for (int32_t d = c; d < np; d += 64) p = V::fmadd(V::load(qt + size_t(d) * L), V::set1(kr[d]), p);
  }
  return p;
}

// The scores of one key (row kr, f32) for the L query lanes of qt [hd][L], S as above.
template <class V, int S>
inline typename V::F group_dot(const float* qt, const float* kr, int32_t hd) {
  constexpr int L = V::kLanes;
  const int32_t np = hd & ~63;
  auto s = V::zero();
  if (np > 0) {
    auto leaf = [&](int c) {  // (part[c] + part[c + 32]) + (part[c + 16] + part[c + 48])
      return V::add(V::add(group_part<V, S>(qt, kr, c, np), group_part<V, S>(qt, kr, c + 32, np)),
                    V::add(group_part<V, S>(qt, kr, c + 16, np), group_part<V, S>(qt, kr, c + 48, np)));
    };
    s = tree16<V>(leaf);
  }
  for (int32_t d = np; d < hd; ++d) s = V::fmadd(V::load(qt + size_t(d) * L), V::set1(kr[d]), s);
  return s;
}

// Scores of all rows for the lanes, -inf where a lane does not see the key (and at the
// positions with no row); returns their max per lane, starting from m.
template <class V, int S>
typename V::F group_scores(const float* qt, const void* const* k_rows, bool f16, int32_t n, int32_t hd, float scale,
                           const int32_t* lo, const int32_t* hi, float* kr, float* s, typename V::F m) {
  constexpr int L = V::kLanes;
  for (int32_t j = 0; j < n; ++j) {
    auto x = V::set1(-INFINITY);
    if (k_rows[j]) x = V::visible(V::mul(group_dot<V, S>(qt, row_f32(k_rows[j], f16, 0, hd, kr), hd), V::set1(scale)), j, lo, hi);
    V::store(s + size_t(j) * L, x);
    m = V::max(m, x);
  }
  return m;
}

// out[d][lane] += tree16 over l of (fma over the keys j = l mod 16 of p[j] v_j[d]) for the
// DC dims [d0, d0 + DC): the 16 lane sums of each dim wait in a[16][DC].
template <class V, int DC>
void group_values(const float* p, const void* const* v_rows, bool f16, int32_t n, int32_t d0, float* out) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F a[16][DC];
  float tmp[DC];  // [DC] f32 converted dims of an f16 row
  for (int l = 0; l < 16; ++l) {
    F acc[DC];
#pragma GCC unroll 8
    for (int dd = 0; dd < DC; ++dd) acc[dd] = V::zero();
    for (int32_t j = l; j < n; j += 16) {
      if (!v_rows[j]) continue;  // a position of the block outside the keys read (all lanes p = 0)
      const F pj = V::load(p + size_t(j) * L);
      const float* v = row_f32(v_rows[j], f16, d0, DC, tmp);
#pragma GCC unroll 8
      for (int dd = 0; dd < DC; ++dd) acc[dd] = V::fmadd(pj, V::set1(v[dd]), acc[dd]);
    }
#pragma GCC unroll 8
    for (int dd = 0; dd < DC; ++dd) a[l][dd] = acc[dd];
  }
#pragma GCC unroll 8
  for (int dd = 0; dd < DC; ++dd) V::store(out + size_t(d0 + dd) * L, tree16<V>([&](int l) { return a[l][dd]; }));
}

// attn_group for the queries [i0, i0 + L) of g (fewer at the end).
template <class V>
void group_lanes(const AttnGroup& g, int i0, const void* const* k_rows, const void* const* v_rows, int32_t n,
                 bool f16, int32_t hd, float scale) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const int nq = std::min(L, g.nq - i0);
  std::vector<float> qt(size_t(hd) * L, 0.f), s(size_t(n) * L), out(size_t(hd) * L), kr(size_t(hd), 0.f);  // [hd][L], [n][L], [hd][L], [hd]
  alignas(64) int32_t lo[L], hi[L];
  alignas(64) float sink[L];
  for (int i = 0; i < L; ++i) {
    const bool used = i < nq;
    lo[i] = used ? g.first[i0 + i] - g.p0 : 1;  // unused lanes see no key
    hi[i] = used ? g.last[i0 + i] - g.p0 : 0;
    sink[i] = used && g.sinks ? g.sinks[i0 + i] : -INFINITY;
    for (int32_t d = 0; used && d < hd; ++d) qt[size_t(d) * L + size_t(i)] = g.q[i0 + i][d];
  }
  // Scores, -inf where a lane does not see the key (and at the block positions with no row).
  F m = V::load(sink);
  switch (hd / 64) {
    case 1: m = group_scores<V, 1>(qt.data(), k_rows, f16, n, hd, scale, lo, hi, kr.data(), s.data(), m); break;
    case 2: m = group_scores<V, 2>(qt.data(), k_rows, f16, n, hd, scale, lo, hi, kr.data(), s.data(), m); break;
    case 4: m = group_scores<V, 4>(qt.data(), k_rows, f16, n, hd, scale, lo, hi, kr.data(), s.data(), m); break;
    default: m = group_scores<V, 0>(qt.data(), k_rows, f16, n, hd, scale, lo, hi, kr.data(), s.data(), m); break;
  }
  // e = exp(x - m); sums of the 16-key blocks in double per lane; then the sink.
  alignas(64) float lane_m[L], block[L], inv[L];
  V::store(lane_m, m);
  double sum[L] = {};
  for (int32_t b = 0; b < n; b += 16) {
    F e[16];
    for (int k = 0; k < 16; ++k) {
      e[k] = V::exp(V::sub(V::load(s.data() + size_t(b + k) * L), m));
      V::store(s.data() + size_t(b + k) * L, e[k]);
    }
    V::store(block, tree16<V>([&](int k) { return e[k]; }));
    for (int i = 0; i < L; ++i) sum[i] += double(block[i]);
  }
  for (int i = 0; i < L; ++i) {
    if (g.sinks && i < nq) sum[i] += double(std::exp(sink[i] - lane_m[i]));
    inv[i] = float(1.0 / sum[i]);
  }
  const F iv = V::load(inv);
  for (int32_t j = 0; j < n; ++j) V::store(s.data() + size_t(j) * L, V::mul(V::load(s.data() + size_t(j) * L), iv));
  // The values, 8 dims at a time, then the tail one by one.
  int32_t d = 0;
  for (; d + 8 <= hd; d += 8) group_values<V, 8>(s.data(), v_rows, f16, n, d, out.data());
  for (; d < hd; ++d) group_values<V, 1>(s.data(), v_rows, f16, n, d, out.data());
  for (int i = 0; i < nq; ++i)
    for (int32_t dd = 0; dd < hd; ++dd) g.out[i0 + i][dd] = out[size_t(dd) * L + size_t(i)];
}

}  // namespace

// All queries of g, L lanes at a time.
template <class V>
void attn_group_impl(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, bool f16,
                     int32_t hd, float scale) {
  for (int i0 = 0; i0 < g.nq; i0 += V::kLanes) group_lanes<V>(g, i0, k_rows, v_rows, n, f16, hd, scale);
}

}  // namespace ws::detail
