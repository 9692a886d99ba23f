// AVX2/FMA element-wise activations (compiled with -mavx2 -mfma -mf16c; called only after
// the run-time CPU check, see ops::swiglu).
#include <immintrin.h>

#include <cstring>

#include "tensor/activation.h"
#include "tensor/simd_avx2.h"

namespace ws::detail {
namespace {

// g / (1 + exp(-g)) * x, 8 lanes: the scalar formula's operations with exp_reduced's exp.
// -g is clamped to [-86.5, 88.8] first, which changes no result: below, exp(-g) < 2^-124
// vanishes next to 1 just as the exact value does; above, the product overflows to +inf as
// std::exp does (2^n is applied as 2^(n-1) * 2 so that n = 128 stays representable). A NaN
// g propagates through the division.
inline __m256 swiglu8(__m256 g, __m256 x) {
  const __m256 neg_g = _mm256_min_ps(_mm256_max_ps(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(-86.5f)),
                                     _mm256_set1_ps(88.8f));
  __m256 n;
  const __m256 poly = exp_reduced(neg_g, &n);
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(poly, pow2i(_mm256_sub_ps(n, _mm256_set1_ps(1.0f)))), _mm256_set1_ps(2.0f));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), x);
}

// x[i] = f(g[i], x[i]) 8 lanes at a time. The tail goes through the same lanes (zero
// padded), so an element's result never depends on where a caller's range starts or ends.
template <class F>
void map8(const float* g, float* x, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
  if (i == n) return;
  alignas(32) float gt[8] = {}, xt[8] = {};  // [8] f32 tail, zero padded
  const size_t m = size_t(n - i);
  std::memcpy(gt, g + i, m * sizeof(float));
  std::memcpy(xt, x + i, m * sizeof(float));
  _mm256_store_ps(xt, f(_mm256_load_ps(gt), _mm256_load_ps(xt)));
  std::memcpy(x + i, xt, m * sizeof(float));
}

// ops::gelu_ggml for 8 lanes.
inline __m256 gelu_table8(const float* table, __m256 g) {
  const __m128i h = _mm256_cvtps_ph(g, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 t = _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
  const __m256 low = _mm256_cmp_ps(g, _mm256_set1_ps(-10.0f), _CMP_LE_OQ);
  const __m256 high = _mm256_cmp_ps(g, _mm256_set1_ps(10.0f), _CMP_GE_OQ);
  return _mm256_andnot_ps(low, _mm256_blendv_ps(t, g, high));
}

}  // namespace

void gelu_table_gate_avx2(const float* table, const float* g, float* x, int64_t n) {
  map8(g, x, n, [table](__m256 gv, __m256 xv) { return _mm256_mul_ps(gelu_table8(table, gv), xv); });
}

double sum_squares_avx2(const float* x, int64_t n) {
  __m256d lo = _mm256_setzero_pd(), hi = lo;  // partial sums i % 8 = 0..3 and 4..7
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    lo = _mm256_add_pd(lo, _mm256_mul_pd(a, a));  // the products are exact in double
    hi = _mm256_add_pd(hi, _mm256_mul_pd(b, b));
  }
  alignas(32) double part[8];
  _mm256_store_pd(part, lo);
  _mm256_store_pd(part + 4, hi);
  for (; i < n; ++i) part[i % 8] += double(x[i]) * x[i];
  return join_parts8(part);
}

void swiglu_avx2(const float* g, float* x, int64_t n) { map8(g, x, n, swiglu8); }

void silu_avx2(float* x, int64_t n) {
  map8(x, x, n, [](__m256 g, __m256) { return swiglu8(g, _mm256_set1_ps(1.0f)); });  // * 1 is exact
}

}  // namespace ws::detail
