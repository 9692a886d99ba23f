// Small AVX2 helpers shared by the AVX2 translation units (kernels via kernels_tile.h,
// attention). Include only from files compiled for AVX2; internal to the includer.
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

}  // namespace
}  // namespace ws::detail
