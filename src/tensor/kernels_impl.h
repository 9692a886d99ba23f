// Private interface between the matmul driver (kernels.cpp) and the per-ISA kernels
// (kernels.cpp scalar reference, kernels_avx2.cpp). Not part of the public API.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace ws::detail {

// One matmul after the activations were converted to the weight's dot type.
struct MatmulArgs {
  DType wtype = DType::f32;  // weight type; the activation type follows from it
  const uint8_t* w = nullptr;  // [rows][w_stride bytes], weight rows
  size_t w_stride = 0;         // bytes per weight row
  const uint8_t* x = nullptr;  // [n_tokens][x_stride bytes], converted activations
  size_t x_stride = 0;         // bytes per activation row
  int64_t cols = 0;            // elements per row (shared by w and x)
  int64_t n_tokens = 0;
  // Q8_0 activations (Q8_0/Q4_0 weights, SIMD paths): per-block scale as f32 and
  // -128 * the block's level sum (the VNNI kernel's offset correction).
  const float* x_scale = nullptr;   // [n_tokens][cols / 32] f32
  const int32_t* x_corr = nullptr;  // [n_tokens][cols / 32] int32
  const uint8_t* packed = nullptr;  // rows repacked in panels (PackedRows), or null
  float* y = nullptr;  // [n_tokens][y_stride] f32
  int64_t y_stride = 0;  // = rows
};

// The type activations are converted to before dot products with `wtype` weights.
DType dot_type(DType wtype);

// Computes y[t][r] for all tokens t and rows r in [r0, r1). Every output element is one
// dot product whose float operation sequence depends only on (wtype, cols), never on
// r0, r1, n_tokens or the element's position in a tile: that is batch invariance.
void matmul_rows_scalar(const MatmulArgs& a, int64_t r0, int64_t r1);
void matmul_rows_avx2(const MatmulArgs& a, int64_t r0, int64_t r1);
// Q8_0/Q4_0, K-quant and F16 on 16-row AVX512 (VNNI) panels, bit-identical to the AVX2
// and scalar paths.
void matmul_panels_vnni(const MatmulArgs& a, int64_t r0, int64_t r1);
// Writes the PackedRows layout of panels [p0, p1) of a Q8_0, K-quant or F16 matrix (a.w,
// a.w_stride, a.cols, a.y_stride = rows) to `out` (64-byte aligned, starting at panel p0).
void pack_panels_avx2(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out);
void pack_panels_vnni(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out);
bool cpu_has_vnni();
// quantize_row_q8_k (quant.cpp) with AVX2, byte-identical to it.
void quantize_row_q8_k_avx2(const float* src, block_q8_k* dst, int64_t n);
// quantize_row_q8_0 (quant.cpp) with AVX2, byte-identical to it; also writes each block's
// scale as f32 to scales[n / 32] and, where corr is not null, -128 * its level sum.
void quantize_row_q8_0_avx2(const float* src, block_q8_0* dst, int64_t n, float* scales,
                            int32_t* corr);
// out[i] = x[i] rounded to f16 and widened back (the F16 kernels' activations), n any.
void round_to_f16_avx2(const float* x, float* out, int64_t n);
// dst[i] = f32_to_f16(x[i]) (round to nearest even, as the scalar conversion), n any.
void f32_to_f16_avx2(const float* x, f16_bits* dst, int64_t n);
// Rows per panel (kernels_panel.h, kernels_kquant_panel.h, kernels_f16_panel.h) of the
// AVX2 and VNNI kernels; the driver splits rows in whole panels.
constexpr int64_t kPanelRowsAvx2 = 8, kPanelRowsVnni = 16;

// Tokens per tile of the panel kernels on prepacked weights: a tile's activations stay in
// L2 while every panel of a thread's rows passes over them, instead of all tokens'
// activations streaming from L3 once per panel (packing on the fly would repeat per tile,
// so unpacked weights take all tokens at once). 64: lfm2 Q8_0 pp512 +9% over no tiles.
constexpr int64_t kTokenTile = 64;

// Calls f(t0, t1) for the token tiles [t0, t1) of a matmul: kTokenTile tokens each on
// prepacked weights, all tokens at once otherwise.
template <class F>
inline void for_each_token_tile(const MatmulArgs& a, F f) {
  const int64_t tile = a.packed ? kTokenTile : a.n_tokens;
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += tile) f(t0, a.n_tokens - t0 < tile ? a.n_tokens : t0 + tile);
}

// Row tile of the AVX2 kernel; the driver hands out row ranges in multiples of it so
// that threads rarely fall back to edge tiles (correctness does not depend on it).
constexpr int64_t kRowTile = 4;

}  // namespace ws::detail
