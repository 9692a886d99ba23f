// Small AVX2 helpers shared by the AVX2 translation units (kernels via kernels_tile.h,
// attention, activations). Include only from files compiled for AVX2; internal to the includer.
#pragma once
#include <immintrin.h>

#include <cmath>

namespace ws::detail {
namespace {

// Fixed-order horizontal sum of 8 lanes: (l + h), then pairs, then the last two. Kernels
// that promise batch invariance rely on this order never changing between call sites.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// expf_ggml (tensor/expf_ggml.h) for 8 lanes: the same operations, so the same bits.
inline __m256 expf_ggml8(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  // e = n clamped to [-192, 192] (lanes outside are replaced below; -inf and NaN too), m the
  // part of it applied after the exact one: -126 below -126, 127 above 127, else 0.
  const __m256i e = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-192.f)), _mm256_set1_ps(192.f)));
  const __m256i m = _mm256_or_si256(_mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(-126), e), _mm256_set1_epi32(-126)),
                                    _mm256_and_si256(_mm256_cmpgt_epi32(e, _mm256_set1_epi32(127)), _mm256_set1_epi32(127)));
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(e, m), bias), 23));
  const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(m, bias), 23));
  const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, f1), f2);
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.f), n);
  const __m256 out_of_range = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.f), _CMP_GT_OQ);
  const __m256 alt = _mm256_andnot_ps(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ), _mm256_set1_ps(INFINITY));
  return _mm256_blendv_ps(res, alt, out_of_range);
}

}  // namespace
}  // namespace ws::detail
