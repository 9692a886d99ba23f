// Q8_0 / Q4_0 matmul tiles using AVX512-VNNI on 256-bit registers (vpdpbusd, and the 32
// ymm registers of AVX512-VL for a wider tile). Called only when the CPU has them.
//
// Same bits as the AVX2 path: vpdpbusd sums exactly the same four byte products per
// int32 lane as maddubs + madd (no saturation is possible: |w| <= 128, |x| <= 127), and
// the float operations per block are identical (scale = w.d * x.d, one fma per block).
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#include <immintrin.h>

#include <cstdint>

#include "tensor/kernels_impl.h"
#include "tensor/kernels_tile.h"

namespace ws::detail {
namespace {

inline float h2f_v(f16_bits h) { return _cvtsh_ss(h); }

struct UnpackedQ32V {
  __m256i q;      // 32 signed weight levels
  __m256i abs_q;  // |q|
  float d;
};

struct LoadedQ8V {
  __m256i q;
  float d;
};

struct OpsQ8_0V {
  static constexpr int kElems = QK8_0, kElemBytes = 0, kXElemBytes = 0, kT = 4, kR1 = 8;
  static constexpr bool kTail = false;
  using W = UnpackedQ32V;
  using X = LoadedQ8V;
  static W load_w(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const block_q8_0*>(row) + b;
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    return {q, _mm256_sign_epi8(q, q), h2f_v(blk->d)};
  }
  static X load_x(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const block_q8_0*>(row) + b;
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs)), h2f_v(blk->d)};
  }
  static __m256 step(const W& w, const X& x, __m256 acc) {
    const __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w.abs_q, _mm256_sign_epi8(x.q, w.q));
    return _mm256_fmadd_ps(_mm256_set1_ps(w.d * x.d), _mm256_cvtepi32_ps(sum), acc);
  }
};

struct OpsQ4_0V : OpsQ8_0V {
  static W load_w(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const block_q4_0*>(row) + b;
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    // Low nibbles are elements 0..15, high nibbles 16..31.
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    const __m256i q = _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
    return {q, _mm256_sign_epi8(q, q), h2f_v(blk->d)};
  }
};

}  // namespace

bool matmul_rows_vnni(const MatmulArgs& a, int64_t r0, int64_t r1) {
  switch (a.wtype) {
    case DType::q8_0: rows_range<OpsQ8_0V>(a, r0, r1); return true;
    case DType::q4_0: rows_range<OpsQ4_0V>(a, r0, r1); return true;
    default: return false;
  }
}

}  // namespace ws::detail
