// Small AVX2 helpers shared by the AVX2 translation units (kernels via kernels_tile.h,
// attention, activations). Include only from files compiled for AVX2; internal to the includer.
#pragma once
#include <immintrin.h>

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

// The parts of exp(x) = 2^n * P(r): returns P(r) and sets *n = round(x log2e), where
// r = x - n ln2 lies in [-ln2/2, ln2/2] (ln2 subtracted in two parts) and P is the
// degree-6 Taylor polynomial (relative error ~2e-7). Valid for |x| <= 88.8.
inline __m256 exp_reduced(__m256 x, __m256* n) {
  *n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(*n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(*n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 poly = _mm256_set1_ps(1.0f / 720.0f);
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 120.0f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 24.0f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 6.0f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(0.5f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f));
  return _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f));
}

// 2^n for integral n in [-126, 127].
inline __m256 pow2i(__m256 n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

}  // namespace
}  // namespace ws::detail
