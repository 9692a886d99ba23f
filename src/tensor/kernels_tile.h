// The register tile and row-range driver shared by the SIMD matmul translation units
// (kernels_avx2.cpp and, through the panel headers, kernels_avx512*.cpp), each with its own Ops.
// Included only from files compiled for AVX2 (or more); everything here is internal to
// the including file (anonymous namespace) and uses no standard-library templates, so
// no instance compiled for a wider ISA can be shared with (and picked by the linker for)
// a narrower translation unit.
//
// Batch invariance: every output element owns exactly one accumulator, which starts at
// zero, receives Ops::step for blocks 0, 1, ..., nb-1 in order (plus the zero-padded
// tail block) and is then reduced by hsum(). That sequence is the same for every tile
// shape, so tile<Ops,4,3>, tile<Ops,4,1> and tile<Ops,1,1> give bit-identical results.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/kernels_impl.h"
#include "tensor/simd_avx2.h"

namespace ws::detail {
namespace {

// ---- the register tile and the row-range driver ----

// Loads a partial final block (n < kElems elements) zero-padded; only float types have
// one. Padding contributes w*0 = +-0 to the accumulator, which leaves it unchanged.
template <class Ops>
__m256 load_tail(const uint8_t* row, int64_t b, int64_t n) {
  alignas(32) uint8_t tmp[32] = {};  // [8] elements of the row type, zero padded
  __builtin_memcpy(tmp, row + b * Ops::kElems * Ops::kElemBytes, size_t(n) * Ops::kElemBytes);
  return Ops::load_w(tmp, 0);
}
template <class Ops>
__m256 load_tail_x(const uint8_t* row, int64_t b, int64_t n) {
  alignas(32) uint8_t tmp[32] = {};  // [8] activation elements, zero padded
  __builtin_memcpy(tmp, row + b * Ops::kElems * Ops::kXElemBytes, size_t(n) * Ops::kXElemBytes);
  return Ops::load_x(tmp, 0);
}

// y[t0+t][r0+r] for r < R, t < T.
template <class Ops, int R, int T>
void tile(const MatmulArgs& a, int64_t r0, int64_t t0) {
  const uint8_t* wr[R];  // R weight rows
  const uint8_t* xt[T];  // T activation rows
  for (int r = 0; r < R; ++r) wr[r] = a.w + size_t(r0 + r) * a.w_stride;
  for (int t = 0; t < T; ++t) xt[t] = a.x + size_t(t0 + t) * a.x_stride;
  __m256 acc[R][T];  // one 8-lane f32 accumulator per output element
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t nb = a.cols / Ops::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    typename Ops::X xs[T];  // activation blocks, reused for all R rows
    for (int t = 0; t < T; ++t) xs[t] = Ops::load_x(xt[t], b);
    for (int r = 0; r < R; ++r) {
      const typename Ops::W w = Ops::load_w(wr[r], b);  // reused for all T tokens
      for (int t = 0; t < T; ++t) acc[r][t] = Ops::step(w, xs[t], acc[r][t]);
    }
  }
  if constexpr (Ops::kTail) {
    const int64_t rem = a.cols - nb * Ops::kElems;
    if (rem > 0) {
      for (int r = 0; r < R; ++r) {
        const __m256 w = load_tail<Ops>(wr[r], nb, rem);
        for (int t = 0; t < T; ++t)
          acc[r][t] = Ops::step(w, load_tail_x<Ops>(xt[t], nb, rem), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.y_stride + r0 + r] = hsum(acc[r][t]);
}

// Tokens are processed in chunks whose converted activations fit in L2, so the weight
// rows of a tile are read from memory once per chunk rather than once per token tile.
constexpr int64_t kTokenChunk = 64;

template <class Ops>
void rows_range(const MatmulArgs& a, int64_t r0, int64_t r1) {
  constexpr int R = int(kRowTile), T = Ops::kT;
  for (int64_t c0 = 0; c0 < a.n_tokens; c0 += kTokenChunk) {
    const int64_t c1 = a.n_tokens < c0 + kTokenChunk ? a.n_tokens : c0 + kTokenChunk;
    int64_t r = r0;
    if (c1 - c0 == 1) {
      // One token (decode): a taller tile keeps Ops::kR1 independent accumulator chains
      // in flight instead of R. Each element's sequence is unchanged (see above).
      for (; r + Ops::kR1 <= r1; r += Ops::kR1) tile<Ops, Ops::kR1, 1>(a, r, c0);
    }
    for (; r + R <= r1; r += R) {
      int64_t t = c0;
      for (; t + T <= c1; t += T) tile<Ops, R, T>(a, r, t);
      for (; t < c1; ++t) tile<Ops, R, 1>(a, r, t);
    }
    for (; r < r1; ++r) {  // leftover rows, one at a time
      int64_t t = c0;
      for (; t + T <= c1; t += T) tile<Ops, 1, T>(a, r, t);
      for (; t < c1; ++t) tile<Ops, 1, 1>(a, r, t);
    }
  }
}

}  // namespace
}  // namespace ws::detail
