// Q8_0 / Q4_0 / F16 matmul with AVX-512 (VNNI) on 512-bit registers: 16-row panels (see
// kernels_panel.h, kernels_f16_panel.h), vpdpbusd on unsigned levels. Called only when
// the CPU has it.
//
// vpdpbusd multiplies unsigned by signed bytes, so the packed weight levels are stored
// as w + 128 (0..255) and each token's block sum starts from -128 * sum(x) (x_corr),
// which leaves the exact sum of w * x. No saturation: vpdpbusd sums into int32.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

// Only this file's own code is compiled for AVX-512: headers above are included first so
// that no inline function shared with other translation units gets an AVX-512 copy.
#pragma GCC push_options
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#include "tensor/kernels_f16_panel.h"
#include "tensor/kernels_panel.h"

namespace ws::detail {
namespace {

struct V512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kRows = 16;
  static I from_lanes(const __m128i* l) {  // l[4]
    I v = _mm512_castsi128_si512(l[0]);
    v = _mm512_inserti32x4(v, l[1], 1);
    v = _mm512_inserti32x4(v, l[2], 2);
    return _mm512_inserti32x4(v, l[3], 3);
  }
  // 4x4 transpose of int32 within each 128-bit lane.
  static void transpose4(const I* a, I* o) {
    const I t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
    const I t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
    o[0] = _mm512_unpacklo_epi64(t0, t2);
    o[1] = _mm512_unpackhi_epi64(t0, t2);
    o[2] = _mm512_unpacklo_epi64(t1, t3);
    o[3] = _mm512_unpackhi_epi64(t1, t3);
  }
  static I prepare_levels(I w) { return _mm512_xor_si512(w, _mm512_set1_epi8(char(0x80))); }
  static void store_scales(I* dst, const f16_bits* d) {
    _mm512_store_ps(reinterpret_cast<float*>(dst),
                    _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d))));
  }
  static F load_scales(const I* src) { return _mm512_load_ps(reinterpret_cast<const float*>(src)); }
  static I block_dot(const I* w, const int8_t* xq, int32_t corr) {
    I s = _mm512_set1_epi32(corr);
    for (int g = 0; g < 8; ++g) {
      int32_t x4;
      std::memcpy(&x4, xq + 4 * g, 4);
      s = _mm512_dpbusd_epi32(s, w[g], _mm512_set1_epi32(x4));
    }
    return s;
  }
  static F fma_block(I s, F dw, float dx, F acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc);
  }
  static F load_f16(const f16_bits* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F fma(F w, float x, F acc) { return _mm512_fmadd_ps(w, _mm512_set1_ps(x), acc); }
  static F zero() { return _mm512_setzero_ps(); }
  static F load_y(const float* y, int n) {
    return n == kRows ? _mm512_loadu_ps(y) : _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), y);
  }
  static void store_y(float* y, int n, F v) {
    if (n == kRows) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, __mmask16((1u << n) - 1), v);
  }
};

// Exact block dot of 32 signed levels: |w| times x carrying w's sign, 8 int32 lanes.
struct DotVnni {
  static __m256i dot(__m256i w, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  }
};

}  // namespace

void matmul_panels_vnni(const MatmulArgs& a, int64_t r0, int64_t r1) {
  if (a.wtype == DType::f16) f16_rows_range<V512>(a, r0, r1);
  else if (a.wtype == DType::q8_0) panel_rows_range<V512, DotVnni, UnpackQ8_0>(a, r0, r1);
  else panel_rows_range<V512, DotVnni, UnpackQ4_0>(a, r0, r1);
}

void pack_panels_vnni(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  if (a.wtype == DType::f16) pack_f16_panels<V512>(a, p0, p1, out);
  else pack_panels<V512, UnpackQ8_0>(a, p0, p1, out);
}

}  // namespace ws::detail

#pragma GCC pop_options
