// AVX2/FMA element-wise activations and the causal conv (compiled with -mavx2 -mfma
// -mf16c; called only after the run-time CPU check, see ops::swiglu).
#include <immintrin.h>

#include <cstring>

#include "tensor/activation.h"
#include "tensor/simd_avx2.h"

namespace ws::detail {
namespace {

// g / (1 + exp(0 - g)) * x, 8 lanes: ggml's SwiGLU (ggml_v_silu, then the product), the
// scalar formula's operations with expf_ggml8.
inline __m256 swiglu8(__m256 g, __m256 x) {
  const __m256 e = expf_ggml8(_mm256_sub_ps(_mm256_setzero_ps(), g));
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

namespace {

// a * b rounded on its own: the empty asm hides the product from the compiler, which would
// otherwise fuse it with the add that follows into an FMA (-ffp-contract=fast) and round
// once where the scalar code rounds twice.
inline __m256 mul_unfused(__m256 a, __m256 b) {
  __m256 p = _mm256_mul_ps(a, b);
  asm("" : "+x"(p));
  return p;
}

// Channels [c, c + 8) of causal_conv_avx2 with K taps known at compile time, so that the
// window (the K-1 previous inputs) lives in registers.
template <int K>
void conv_block8(const float* w, const float* bias, float* tail, const float* in, int64_t in_stride, int64_t n,
                 int64_t ch, int64_t c, float* out) {
  __m256 wk[K];      // [K][8 channels] tap k of each channel
  __m256 hist[K];    // [K-1][8 channels] the previous inputs, oldest first (slot K-1 unused)
  alignas(32) float lane[8];
  for (int k = 0; k < K; ++k) {
    for (int j = 0; j < 8; ++j) lane[j] = w[(c + j) * K + k];
    wk[k] = _mm256_load_ps(lane);
  }
  for (int k = 0; k + 1 < K; ++k) hist[k] = _mm256_loadu_ps(tail + k * ch + c);
  const __m256 bv = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
  for (int64_t t = 0; t < n; ++t) {
    const __m256 cur = _mm256_loadu_ps(in + t * in_stride + c);  // read before out (may alias) is written
    __m256 s = _mm256_setzero_ps();
    for (int k = 0; k + 1 < K; ++k) s = _mm256_fmadd_ps(hist[k], wk[k], s);
    s = _mm256_fmadd_ps(cur, wk[K - 1], s);
    if (bias) s = _mm256_add_ps(s, bv);
    _mm256_storeu_ps(out + t * ch + c, s);
    for (int k = 0; k + 2 < K; ++k) hist[k] = hist[k + 1];
    if (K > 1) hist[K - 2] = cur;
  }
  for (int k = 0; k + 1 < K; ++k) _mm256_storeu_ps(tail + k * ch + c, hist[k]);
}

}  // namespace

int64_t causal_conv_avx2(const float* w, const float* bias, int64_t K, float* tail, const float* in,
                         int64_t in_stride, int64_t n, int64_t ch, int64_t c0, int64_t c1, float* out) {
  int64_t c = c0;
  for (; c + 8 <= c1; c += 8) {
    switch (K) {
      case 2: conv_block8<2>(w, bias, tail, in, in_stride, n, ch, c, out); break;
      case 3: conv_block8<3>(w, bias, tail, in, in_stride, n, ch, c, out); break;
      case 4: conv_block8<4>(w, bias, tail, in, in_stride, n, ch, c, out); break;
      case 5: conv_block8<5>(w, bias, tail, in, in_stride, n, ch, c, out); break;
      default: return c;
    }
  }
  return c;
}

void swiglu_avx2(const float* g, float* x, int64_t n) { map8(g, x, n, swiglu8); }

void silu_avx2(float* x, int64_t n) {
  map8(x, x, n, [](__m256 g, __m256) { return swiglu8(g, _mm256_set1_ps(1.0f)); });  // * 1 is exact
}

namespace {

// Columns [j, j + 8 * B) of delta_rule_token_avx2.
template <int B>
void delta_rule_strip(float* S, const float* k, const float* q, const float* v, float decay, float beta, float scale,
                      int64_t dk, int64_t dv, int64_t j, float* out) {
  const __m256 dec = _mm256_set1_ps(decay);
  __m256 acc[B];  // [B][8] S^T k, then delta
  for (int b = 0; b < B; ++b) acc[b] = _mm256_setzero_ps();
  for (int64_t i = 0; i < dk; ++i) {
    const __m256 ki = _mm256_set1_ps(k[i]);
    float* row = S + i * dv + j;
    for (int b = 0; b < B; ++b) {
      const __m256 s = mul_unfused(_mm256_loadu_ps(row + 8 * b), dec);
      _mm256_storeu_ps(row + 8 * b, s);
      acc[b] = _mm256_add_ps(acc[b], mul_unfused(s, ki));
    }
  }
  __m256 o[B];  // [B][8] S^T q
  for (int b = 0; b < B; ++b) {
    acc[b] = mul_unfused(_mm256_sub_ps(_mm256_loadu_ps(v + j + 8 * b), acc[b]), _mm256_set1_ps(beta));
    o[b] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < dk; ++i) {
    const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
    float* row = S + i * dv + j;
    for (int b = 0; b < B; ++b) {
      const __m256 s = _mm256_add_ps(_mm256_loadu_ps(row + 8 * b), mul_unfused(ki, acc[b]));
      _mm256_storeu_ps(row + 8 * b, s);
      o[b] = _mm256_add_ps(o[b], mul_unfused(s, qi));
    }
  }
  for (int b = 0; b < B; ++b) _mm256_storeu_ps(out + j + 8 * b, _mm256_mul_ps(o[b], _mm256_set1_ps(scale)));
}

}  // namespace

int64_t delta_rule_token_avx2(float* S, const float* k, const float* q, const float* v, float decay, float beta,
                              float scale, int64_t dk, int64_t dv, float* out) {
  int64_t j = 0;
  for (; j + 32 <= dv; j += 32) delta_rule_strip<4>(S, k, q, v, decay, beta, scale, dk, dv, j, out);
  for (; j + 8 <= dv; j += 8) delta_rule_strip<1>(S, k, q, v, decay, beta, scale, dk, dv, j, out);
  return j;
}

}  // namespace ws::detail
