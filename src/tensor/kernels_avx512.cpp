// Q8_0 / Q4_0, K-quant and F16 matmul with AVX-512 (VNNI) on 512-bit registers: 16-row
// panels (see kernels_panel.h, kernels_kquant_panel.h, kernels_f16_panel.h), vpdpbusd on
// unsigned levels. Called only when the CPU has it.
//
// vpdpbusd multiplies unsigned by signed bytes, so the packed Q8_0 levels are stored as
// w + 128 (0..255) and each token's block sum starts from -128 * sum(x) (x_corr), which
// leaves the exact sum of w * x; K-quant levels are unsigned already. No saturation:
// vpdpbusd sums into int32.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

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
#include "tensor/kernels_kquant_panel.h"
#include "tensor/kernels_panel.h"

namespace ws::detail {
namespace {

struct V512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kRows = 16;
  static constexpr int kDotTokens = 1;  // tokens per block_dots (kernels_panel.h)
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
  // Block dots of U tokens (xq[u]: 32 levels, corr[u][j]: its offset correction); the
  // packed levels are vpdpbusd's unsigned operand.
  template <int U>
  static void block_dots(const I* w, const int8_t* const* xq, const int32_t* const* corr, int64_t j, I* s) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      s[u] = _mm512_set1_epi32(corr[u][j]);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        int32_t x4;
        std::memcpy(&x4, xq[u] + 4 * g, 4);
        s[u] = _mm512_dpbusd_epi32(s[u], w[g], _mm512_set1_epi32(x4));
      }
    }
  }
  static F fma_block(I s, F dw, float dx, F acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc);
  }
  static constexpr int kF16BatchPanels = 2;  // F16 batches: 2 panels x 8 tokens = 16 zmm accumulators
  static constexpr int kF16DecodePanels = 8;  // F16 decode: 8 panels, 8 chains (4: -19% llama tg at 1 thread)
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

  // K-quants (kernels_kquant_panel.h).
  static constexpr int kKTokens = 8;  // tokens per pass: 8 int32 sums + 8 level vectors in 32 zmm
  static I zero_i() { return _mm512_setzero_si512(); }
  static I bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static I and8(I v, int m) { return _mm512_and_si512(v, _mm512_set1_epi8(char(m))); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I shift16(I v, int s) {  // left by s, or right by -s
    return s > 0 ? _mm512_slli_epi16(v, unsigned(s)) : s < 0 ? _mm512_srli_epi16(v, unsigned(-s)) : v;
  }
  static I srai16(I v, int s) { return _mm512_srai_epi16(v, unsigned(s)); }
  static I neg16(I v) { return _mm512_sub_epi16(_mm512_setzero_si512(), v); }
  static I shuffle32(I v, __m128i pattern) {
    return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(pattern));
  }
  static I madd_acc(I acc, I a, I b) { return _mm512_dpwssd_epi32(acc, a, b); }
  // Sub-block scale byte b of each lane in scaled_dot's form: int32.
  static I scale_u8(I bytes, int b) { return shuffle32(bytes, lane_bytes(b, -1, -1, -1)); }
  static I scale_s8(I bytes, int b) {
    return _mm512_srai_epi32(shuffle32(bytes, lane_bytes(-1, -1, -1, b)), 24);
  }
  // acc + sc * sum_g (levels w[g] . x[4g..4g+3]), g < NG: vpdpbusd sums exactly in int32
  // (so kMax, which bounds the AVX2 int16 sums, does not matter here).
  template <int NG, int kMax>
  static I scaled_dot(const I* w, const int8_t* x, I sc, I acc) {
    I s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], bcast32(x));
#pragma GCC unroll 8
    for (int g = 1; g < NG; ++g) s = _mm512_dpbusd_epi32(s, w[g], bcast32(x + 4 * g));
    return _mm512_add_epi32(acc, _mm512_mullo_epi32(s, sc));
  }
  static F fnma_block(I s, F dw, float dx, F acc) {
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc);
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
  switch (a.wtype) {
    case DType::f16: f16_rows_range<V512>(a, r0, r1); break;
    case DType::q8_0: panel_rows_range<V512, DotVnni, UnpackQ8_0>(a, r0, r1); break;
    case DType::q4_0: panel_rows_range<V512, DotVnni, UnpackQ4_0>(a, r0, r1); break;
    case DType::q4_k: kq_rows_range<V512, KQ4>(a, r0, r1); break;
    case DType::q5_k: kq_rows_range<V512, KQ5>(a, r0, r1); break;
    case DType::q6_k: kq_rows_range<V512, KQ6>(a, r0, r1); break;
    default: throw std::invalid_argument("matmul: unsupported weight type");
  }
}

void pack_panels_vnni(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  const int64_t nsb = a.cols / QK_K;  // K-quant super-blocks per row
  switch (a.wtype) {
    case DType::f16: pack_f16_panels<V512>(a, p0, p1, out); break;
    case DType::q8_0: pack_panels<V512, UnpackQ8_0>(a, p0, p1, out); break;
    case DType::q4_k: pack_kq_panels<V512::kRows, KQ4>(a.w, a.w_stride, a.y_stride, nsb, p0, p1, out); break;
    case DType::q5_k: pack_kq_panels<V512::kRows, KQ5>(a.w, a.w_stride, a.y_stride, nsb, p0, p1, out); break;
    case DType::q6_k: pack_kq_panels<V512::kRows, KQ6>(a.w, a.w_stride, a.y_stride, nsb, p0, p1, out); break;
    default: throw std::invalid_argument("pack_panels: unsupported weight type");
  }
}

}  // namespace ws::detail

#pragma GCC pop_options
