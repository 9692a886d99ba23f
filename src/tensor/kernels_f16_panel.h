// F16 matmul on row panels, shared by the AVX2 (8 rows per ymm) and AVX512 (16 rows per
// zmm) translation units with their vector traits (see kernels_panel.h). Internal to the
// including file, no standard-library templates.
//
// Layout: a panel's weights are stored column-major, [cols][P] f16, so one vector load
// gives column k of P rows; each multiply-add then takes the broadcast activation k of
// one token. Activations arrive rounded to f16 and widened to f32 by the driver, so the
// products are those of f16 x f16 as in ggml.
//
// Numerics (shared with the scalar reference dot_f16, bit for bit):
//   acc = 0;  for k in 0..cols-1:  acc = fma(w[k], x[k], acc)
// one lane per output, so the result does not depend on the ISA, tile, batch or split.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"
#include "tensor/kernels_prefetch.h"

namespace ws::detail {
namespace {

constexpr int64_t kF16Chunk = 256;  // columns per chunk: accumulators go back to y between chunks
constexpr int kF16Tokens = 8;       // batch: 8 tokens (x V::kF16BatchPanels panels) of independent chains

// Columns [k, k + 16) of 8 rows (src[i]: row i's column k) into [16][P] f16 at out, rows
// at out[0..7] of each column: an 8x8 16-bit transpose on both 128-bit lanes at once
// (lane 0: columns k..k+7, lane 1: k+8..k+15). Loads and stores only; no arithmetic.
inline void transpose8x16_f16(const f16_bits* const* src, f16_bits* out, int P) {
  __m256i r[8], t[8];  // [8] rows, then partial transposes
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src[i]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // pairs of rows interleaved per column
    t[2 * i] = _mm256_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // quads of rows per column (rows 0..3, then 4..7)
    r[4 * h + 0] = _mm256_unpacklo_epi32(t[4 * h + 0], t[4 * h + 2]);
    r[4 * h + 1] = _mm256_unpackhi_epi32(t[4 * h + 0], t[4 * h + 2]);
    r[4 * h + 2] = _mm256_unpacklo_epi32(t[4 * h + 1], t[4 * h + 3]);
    r[4 * h + 3] = _mm256_unpackhi_epi32(t[4 * h + 1], t[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // all 8 rows of columns 2c, 2c + 1 (and + 8)
    const __m256i even = _mm256_unpacklo_epi64(r[c], r[c + 4]), odd = _mm256_unpackhi_epi64(r[c], r[c + 4]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * c) * P), _mm256_castsi256_si128(even));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * c + 8) * P), _mm256_extracti128_si256(even, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * c + 1) * P), _mm256_castsi256_si128(odd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * c + 9) * P), _mm256_extracti128_si256(odd, 1));
  }
}

// Column-major copy of columns [k0, k0 + kc) of P rows (null rows read as zeros): 16
// columns of 8 rows at a time by transposes, the last kc % 16 columns one by one.
template <int P>
void pack_f16(const uint8_t* const* rows, int64_t k0, int64_t kc, f16_bits* out /* [kc][P] */,
              PrefetchStream* ahead = nullptr) {
  static constexpr f16_bits kZeros[16] = {};  // a null row's 16 columns
  const int64_t k16 = kc / 16 * 16;
  for (int64_t k = 0; k < k16; k += 16)
#pragma GCC unroll 2
    for (int h = 0; h < P; h += 8) {
      if (ahead) ahead->step();
      const f16_bits* src[8];  // rows h..h+7 at column k0 + k
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i)
        src[i] = rows[h + i] ? reinterpret_cast<const f16_bits*>(rows[h + i]) + k0 + k : kZeros;
      transpose8x16_f16(src, out + k * P + h, P);
    }
  for (int i = 0; i < P; ++i) {
    const auto* r = reinterpret_cast<const f16_bits*>(rows[i]);
    for (int64_t k = k16; k < kc; ++k) out[k * P + i] = r ? r[k0 + k] : f16_bits(0);
  }
}

// G panels x T tokens over columns [k0, k0 + kc); panel g's chunk is w[g] ([kc][P]).
template <class V, int G, int T>
void f16_block(const f16_bits* const* w, int64_t kc, const MatmulArgs& a, int64_t k0,
               int64_t t0, int64_t r0, int n_rows_last) {
  constexpr int P = V::kRows;
  typename V::F acc[G][T];  // one accumulator per (panel, token), one lane per row
  const float* xt[T];       // T activation rows (f16-rounded, as f32) from column k0
  for (int t = 0; t < T; ++t) xt[t] = reinterpret_cast<const float*>(a.x + size_t(t0 + t) * a.x_stride) + k0;
  // Every loop over acc fully unrolled, so that acc stays in registers (GCC otherwise keeps
  // it in memory and stores it on every step).
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    const int n = g == G - 1 ? n_rows_last : P;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      acc[g][t] = k0 == 0 ? V::zero() : V::load_y(a.y + (t0 + t) * a.y_stride + r0 + g * P, n);
  }
  for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const typename V::F wk = V::load_f16(w[g] + k * P);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[g][t] = V::fma(wk, xt[t][k], acc[g][t]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      V::store_y(a.y + (t0 + t) * a.y_stride + r0 + g * P, g == G - 1 ? n_rows_last : P, acc[g][t]);
}

// Panels [r0, r0 + G * P) ∩ [r0, r1) for tokens [t0, t1), G panels at a time.
template <class V, int G>
void f16_panel_group(const MatmulArgs& a, int64_t r0, int64_t r1, int64_t t0, int64_t t1,
                     f16_bits* scratch /* [G][chunk][P] */) {
  constexpr int P = V::kRows;
  const uint8_t* rows[G][P];
  const f16_bits* w[G];
  int n_last = P;
  for (int g = 0; g < G; ++g) {
    const int64_t p0 = r0 + g * P;
    for (int i = 0; i < P; ++i) rows[g][i] = p0 + i < r1 ? a.w + size_t(p0 + i) * a.w_stride : nullptr;
    if (p0 < r1 && r1 - p0 < P) n_last = int(r1 - p0);
  }
  for (int64_t k0 = 0; k0 < a.cols; k0 += kF16Chunk) {
    const int64_t kc = a.cols - k0 < kF16Chunk ? a.cols - k0 : kF16Chunk;
    // Unpacked weights: the next chunk's lines, a few per pack step.
    PrefetchStream ahead;
    if (!a.packed)
      ahead = next_chunk(a, r0, G * P, size_t(k0) * 2, size_t(kc) * 2, kF16Chunk * 2, G * (P / 8) * (kc / 16));
    for (int g = 0; g < G; ++g) {
      if (a.packed) {
        w[g] = reinterpret_cast<const f16_bits*>(a.packed) + ((r0 / P + g) * a.cols + k0) * P;
      } else {
        w[g] = scratch + g * kF16Chunk * P;
        pack_f16<P>(rows[g], k0, kc, scratch + g * kF16Chunk * P, &ahead);
      }
    }
    int64_t t = t0;
    if constexpr (G <= V::kF16BatchPanels)
      for (; t + kF16Tokens <= t1; t += kF16Tokens) f16_block<V, G, kF16Tokens>(w, kc, a, k0, t, r0, n_last);
    for (; t < t1; ++t) f16_block<V, G, 1>(w, kc, a, k0, t, r0, n_last);
  }
}

// Rows [r0, r1) (r0 a multiple of P) for all tokens.
template <class V>
void f16_rows_range(const MatmulArgs& a, int64_t r0, int64_t r1) {
  constexpr int P = V::kRows;
  constexpr int G = V::kF16DecodePanels;  // few tokens: G panels side by side, G accumulator chains
  alignas(64) f16_bits scratch[G * kF16Chunk * P];  // per-call packing, see pack_f16
  int64_t r = r0;
  if (a.n_tokens < kF16Tokens)
    for (; r + G * P <= r1; r += G * P) f16_panel_group<V, G>(a, r, r + G * P, 0, a.n_tokens, scratch);
  for_each_token_tile(a, [&](int64_t t0, int64_t t1) {
    constexpr int B = V::kF16BatchPanels;
    int64_t p = r;
    for (; p + B * P <= r1; p += B * P) f16_panel_group<V, B>(a, p, p + B * P, t0, t1, scratch);
    for (; p < r1; p += P) f16_panel_group<V, 1>(a, p, r1 < p + P ? r1 : p + P, t0, t1, scratch);
  });
}

// The PackedRows layout for F16: panels [p0, p1), each [cols][P] f16.
template <class V>
void pack_f16_panels(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  constexpr int P = V::kRows;
  auto* dst = reinterpret_cast<f16_bits*>(out);
  for (int64_t p = p0; p < p1; ++p, dst += a.cols * P) {
    const uint8_t* rows[P];
    for (int i = 0; i < P; ++i) rows[i] = p * P + i < a.y_stride ? a.w + size_t(p * P + i) * a.w_stride : nullptr;
    pack_f16<P>(rows, 0, a.cols, dst);
  }
}

}  // namespace
}  // namespace ws::detail
