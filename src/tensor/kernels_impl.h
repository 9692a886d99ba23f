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

// BF16 dot products compute what llama.cpp computes on a CPU with AVX512_BF16 in a prompt
// (kernels_bf16_panel.h has the whole sequence): lanes of VDPBF16PS pair steps reduced by
// a fixed tree. A matrix llamafile's tinyBLAS takes (rows % 4 == 0, cols % 32 == 0) has
// one set of 16 lanes; any other has ggml_vec_dot_bf16's two sets (alternate 32-column
// halves of each 64) added in float64 with the columns past the last whole 64. The order
// depends on the matrix alone, never on the batch.
struct Bf16Order {
  int sets = 1;        // lane sets: 1 (tinyBLAS) or 2 (vec_dot)
  int lanes = 16;      // G = 16 * sets lane sums per output
  int64_t chunks = 0;  // C = cols / (2G): column pairs per lane; lane j takes pairs G*c + j
  int64_t tail = 0;    // cols - 2G*C columns summed in float64 (sets 2 only)
};
inline Bf16Order bf16_order(int64_t rows, int64_t cols) {
  Bf16Order o;
  o.sets = rows % 4 == 0 && cols % 32 == 0 ? 1 : 2;
  o.lanes = 16 * o.sets;
  o.chunks = cols / (2 * o.lanes);
  o.tail = cols - 2 * o.lanes * o.chunks;
  return o;
}
// 32-bit words of one packed panel of p rows (kernels_bf16_panel.h): the column pairs, then
// the tail columns, two BF16 values a word.
inline int64_t bf16_panel_words(const Bf16Order& o, int p) { return o.lanes * o.chunks * p + (o.tail * p + 1) / 2; }
// One lane step of VDPBF16PS: fma(w, x, acc) rounded once, denormal inputs read as zero
// and a result below FLT_MIN after rounding (to 24 bits, exponent unbounded) flushed to a
// zero of its sign. The scalar reference; SIMD paths get it from the instruction or from
// FMA under MXCSR DAZ|FTZ.
float bf16_step(float w, float x, float acc);
// The fixed tree of _mm512_reduce_add_ps (GCC): l[i] + l[i+8], then + [i+4], + [i+2], + [i+1].
float bf16_lane_tree(const float* lanes /* [16] */);
// The float64 end of ggml_vec_dot_bf16 (two lane sets): float(r1 + r2 + the products of
// the n tail columns w[i] * x[i]), each product rounded to float first.
float bf16_vec_dot_end(float r1, float r2, const bf16_bits* w, const bf16_bits* x, int64_t n);

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
// BF16 on 16-row AVX512-BF16 panels (kernels_bf16_panel.h, VDPBF16PS), bit-identical to the
// scalar reference and the AVX2 panels; pack_panels_bf16 writes their PackedRows layout.
void matmul_panels_bf16(const MatmulArgs& a, int64_t r0, int64_t r1);
void pack_panels_bf16(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out);
bool cpu_has_avx512bf16();
// quantize_row_q8_k (quant.cpp) with AVX2, byte-identical to it.
void quantize_row_q8_k_avx2(const float* src, block_q8_k* dst, int64_t n);
// quantize_row_q8_0 (quant.cpp) with AVX2, byte-identical to it; also writes each block's
// scale as f32 to scales[n / 32] and, where corr is not null, -128 * its level sum.
void quantize_row_q8_0_avx2(const float* src, block_q8_0* dst, int64_t n, float* scales,
                            int32_t* corr);
// One activation row for the BF16 panels (kernels_bf16_panel.h): x rounded to BF16 as
// f32_to_bf16 does, lane j's column pairs G*c + j moved to j*C + c, each pair as two BF16
// values or, with widen (AVX2 panels), both as f32; then the tail columns as BF16.
void bf16_lanes_row_avx2(const float* x, uint8_t* dst, int64_t cols, const Bf16Order& o, bool widen);
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
