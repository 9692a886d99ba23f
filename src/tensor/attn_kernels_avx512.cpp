// AVX-512 grouped attention: attn_group_impl.h with 16 query lanes. Called only when the
// CPU has AVX-512 (attn_group). The exp is ggml's own, _mm512_scalef_ps included, which
// expf_ggml (tensor/expf_ggml.h) reproduces bit for bit.
#include <immintrin.h>

#include <cmath>

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

}  // namespace

void attn_group_avx512(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, bool f16,
                       int32_t hd, float scale) {
  attn_group_impl<Avx512Lanes>(g, k_rows, v_rows, n, f16, hd, scale);
}

}  // namespace ws::detail

#pragma GCC pop_options
