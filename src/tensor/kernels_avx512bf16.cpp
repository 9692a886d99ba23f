// BF16 matmul with AVX512-BF16 on 16-row panels (kernels_bf16_panel.h): VDPBF16PS is the
// step the scalar reference and the AVX2 panels emulate, so all paths give the same bits.
// Called only when the CPU has it (cpu_has_avx512bf16).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

// Only this file's own code is compiled for AVX-512 (see kernels_avx512.cpp).
#pragma GCC push_options
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16")
#include "tensor/kernels_bf16_panel.h"

namespace ws::detail {
namespace {

struct Bf16Avx512 {
  using F = __m512;
  using W = __m512bh;                              // [16 rows][2] BF16: one word per row
  static constexpr int kRows = 16, kPairBytes = 4;  // activation pairs as two BF16 values
  using X = __m512bh;                               // one activation pair broadcast to 16 lanes
  static constexpr int kPanels = 4;                 // prefill tile: 4 panels x 6 tokens = 24 accumulators,
  static constexpr int kTokens = 6;                 //   10 loads a step for 24 dot products
  static constexpr int kPrefillLanes = 1;           // lane sums per prefill pass
  static constexpr int kDecodeLanes = 4;            // decode, a single panel: 4 lane chains a pass
  static F zero() { return _mm512_setzero_ps(); }
  static W load_w(const uint32_t* p) { return W(_mm512_loadu_si512(p)); }
  static X load_x(const uint8_t* x) {
    int32_t pair;
    std::memcpy(&pair, x, 4);
    return X(_mm512_set1_epi32(pair));
  }
  static F step(F acc, W w, X x) { return _mm512_dpbf16_ps(acc, w, x); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static void store(float* p, F v) { _mm512_store_ps(p, v); }
  static void store_y(float* y, int n, F v) {
    if (n == kRows) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, __mmask16((1u << n) - 1), v);
  }
  // VDPBF16PS ignores MXCSR: nothing to switch.
  static unsigned enter() { return 0; }
  static void leave(unsigned) {}
};

}  // namespace

void matmul_panels_bf16(const MatmulArgs& a, int64_t r0, int64_t r1) { bf16_rows_range<Bf16Avx512>(a, r0, r1); }

void pack_panels_bf16(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  pack_bf16_panels<Bf16Avx512::kRows>(a, p0, p1, out);
}

}  // namespace ws::detail

#pragma GCC pop_options
