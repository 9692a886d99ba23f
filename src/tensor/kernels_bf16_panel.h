// BF16 matmul on row panels, shared by the AVX2 (8 rows per ymm, VDPBF16PS emulated with
// FMA under MXCSR DAZ|FTZ) and AVX512-BF16 (16 rows per zmm, VDPBF16PS itself) translation
// units with their vector traits. Internal to the including file, no standard-library
// templates (see kernels_tile.h).
//
// Numerics: llama.cpp's BF16 matmul on a CPU with AVX512_BF16 (ggml-cpu built by GCC), bit
// for bit, as the scalar reference dot_bf16 (kernels.cpp) computes it. Activations are
// rounded to BF16 (nearest even, GGML_FP32_TO_BF16). With G = 16 * sets lanes and
// C = cols / 2G (Bf16Order, kernels_impl.h), each output is
//   l_j = 0;  for c in 0..C-1, p = G*c + j:  l_j = step(w[2p+1], x[2p+1], l_j);
//                                            l_j = step(w[2p], x[2p], l_j)      (j < G)
//   r = tree(l_0..l_15)        _mm512_reduce_add_ps: [i] + [i+8], then + [i+4], + [i+2], + [i+1]
//   sets 1 (llamafile tinyBLAS):  y = r
//   sets 2 (ggml_vec_dot_bf16):   y = float(double(r) + double(tree(l_16..l_31)) + tail)
// where step is one lane of VDPBF16PS (bf16_step) and tail sums the products of the
// columns past 2G*C in float64. Each lane is one fixed chain, so the result does not
// depend on the ISA, the panel height, the token tile, the batch or the thread split.
//
// Layout: lane j's column pairs are contiguous, pair (j, c) at index q = j*C + c, in a
// panel's weights ([G*C pairs][P rows] 32-bit words; word (q, i) holds row i's columns 2p
// (low half) and 2p+1 of pair p = G*c + j, the pair VDPBF16PS multiplies in one lane) and
// in each activation row the driver permutes (V::kPairBytes a pair: the two BF16 values, or
// both widened to f32 for AVX2), then the tail columns as BF16. One load gives a pair of P
// rows, so the lane sums l_j of P rows are one vector (rows in lanes) and the tree is
// vertical adds; a pass over one lane reads its weights in order. A panel's tail columns
// follow its pairs, [tail][P] BF16.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

namespace ws::detail {
namespace {

constexpr int kBf16FewTokens = 4;  // below this many tokens: per-token passes over all lanes (decode)

// Lane sums l_j, j in [j0, j0 + JB), of R consecutive panels (panel_words apart) for T
// tokens: lanes[((r * G) + j0 + jj) * T + t]. R x JB x T accumulators in registers; each
// weight load serves T tokens and each activation load R panels. Kept out of line so that
// the AVX2 traits' MXCSR switch (around the call) orders with it.
template <class V, int R, int JB, int T>
__attribute__((noinline)) void bf16_pass(const uint32_t* panel, int64_t panel_words, const Bf16Order& o, int j0,
                                         const uint8_t* const* xt, typename V::F* lanes) {
  constexpr int P = V::kRows;
  typename V::F acc[R][JB][T];  // [R panels][JB lanes][T tokens], rows in vector lanes
  // Every loop over acc fully unrolled, so that acc stays in registers (GCC otherwise keeps
  // it in memory and stores all of it on every step of the chunk loop).
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int jj = 0; jj < JB; ++jj)
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) acc[r][jj][t] = V::zero();
  const int64_t n_chunks = o.chunks;  // a local: vector stores may alias o (__m256 is may_alias)
  // Decode is memory-bound, and a pass's streams are short (C pairs of a few hundred bytes
  // at 1k columns) for the hardware prefetcher to ramp up: each step prefetches its share
  // of the region the next pass reads, which follows this one in memory (the next lanes,
  // then the tail and the next panel).
  constexpr int kLinesPerStep = T == 1 ? JB * P * 4 / 64 : 0;  // per panel
  const char* next[R];
  for (int r = 0; r < R; ++r)
    next[r] = reinterpret_cast<const char*>(panel + r * panel_words + (j0 + JB) * n_chunks * P);
  for (int64_t c = 0; c < n_chunks; ++c) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int l = 0; l < kLinesPerStep; ++l) _mm_prefetch(next[r] + (c * kLinesPerStep + l) * 64, _MM_HINT_T0);
#pragma GCC unroll 16
    for (int jj = 0; jj < JB; ++jj) {
      const int64_t q = (j0 + jj) * n_chunks + c;  // the pair's index in a panel and an activation row
      typename V::W w[R];                          // pair q of each panel's P rows
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) w[r] = V::load_w(panel + r * panel_words + q * P);
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) {
        const typename V::X x = V::load_x(xt[t] + q * V::kPairBytes);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][jj][t] = V::step(acc[r][jj][t], w[r], x);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int jj = 0; jj < JB; ++jj)
#pragma GCC unroll 32
      for (int t = 0; t < T; ++t) lanes[(r * o.lanes + j0 + jj) * T + t] = acc[r][jj][t];
}

// tree(l[0], l[s], ..., l[15 s]) lane by lane.
template <class V>
typename V::F bf16_tree(const typename V::F* l, int s) {
  typename V::F a[8];  // the tree's levels, in place
  for (int i = 0; i < 8; ++i) a[i] = V::add(l[i * s], l[(i + 8) * s]);
  for (int i = 0; i < 4; ++i) a[i] = V::add(a[i], a[i + 4]);
  return V::add(V::add(a[0], a[2]), V::add(a[1], a[3]));
}

// y[t][p0 .. p0 + n_rows) of one panel from its lane sums lanes[j * s]; wtail: the panel's
// tail columns.
template <class V>
void bf16_finish(const typename V::F* lanes, int s, const Bf16Order& o, const bf16_bits* wtail, const MatmulArgs& a,
                 int64_t t, int64_t p0, int n_rows) {
  constexpr int P = V::kRows;
  float* y = a.y + t * a.y_stride + p0;
  typename V::F r = bf16_tree<V>(lanes, s);
  if (o.sets == 2) {
    const typename V::F r2 = bf16_tree<V>(lanes + 16 * s, s);
    if (o.tail == 0) {
      r = V::add(r, r2);  // float(double(r) + double(r2)): one rounding of an exact sum either way
    } else {
      alignas(64) float r1s[P], r2s[P];  // [P] the two trees, row by row
      V::store(r1s, r);
      V::store(r2s, r2);
      const auto* xtail = reinterpret_cast<const bf16_bits*>(a.x + size_t(t) * a.x_stride + o.lanes * o.chunks * V::kPairBytes);
      for (int i = 0; i < n_rows; ++i) {
        bf16_bits wr[64];  // [tail] row i's tail columns
        for (int64_t k = 0; k < o.tail; ++k) wr[k] = wtail[k * P + i];
        y[i] = bf16_vec_dot_end(r1s[i], r2s[i], wr, xtail, o.tail);
      }
      return;
    }
  }
  V::store_y(y, n_rows, r);
}

// R panels (rows p0 .. p0 + R*P, the last one n_rows tall) for T tokens from t0, JB lanes
// per pass.
template <class V, int R, int JB, int T>
void bf16_panel_tokens(const uint32_t* panel, int64_t panel_words, const Bf16Order& o, const MatmulArgs& a,
                       int64_t t0, int64_t p0, int n_rows) {
  constexpr int P = V::kRows;
  alignas(64) typename V::F lanes[R * 32 * T];  // [R panels][G lanes][T tokens] lane sums
  const uint8_t* xt[T];                         // [T] permuted activation rows
  for (int t = 0; t < T; ++t) xt[t] = a.x + size_t(t0 + t) * a.x_stride;
  const unsigned csr = V::enter();
  for (int j0 = 0; j0 < o.lanes; j0 += JB) bf16_pass<V, R, JB, T>(panel, panel_words, o, j0, xt, lanes);
  V::leave(csr);
  for (int r = 0; r < R; ++r) {
    const auto* wtail = reinterpret_cast<const bf16_bits*>(panel + r * panel_words + o.lanes * o.chunks * P);
    for (int t = 0; t < T; ++t)
      bf16_finish<V>(lanes + r * o.lanes * T + t, T, o, wtail, a, t0 + t, p0 + r * P, r == R - 1 ? n_rows : P);
  }
}

// Tokens [t0, t1) of R panels in register tiles of V::kTokens, then 4, 2, 1 tokens. Few
// tokens (decode, memory-bound) go one by one; a single panel then takes
// V::kDecodeLanes lanes a pass, so that as many chains read as many sequential streams.
template <class V, int R>
void bf16_panels(const uint32_t* panel, int64_t panel_words, const Bf16Order& o, const MatmulArgs& a, int64_t t0,
                 int64_t t1, int64_t p0, int n_rows) {
  constexpr int kT = V::kTokens, JB = V::kPrefillLanes;
  int64_t t = t0;
  if (t1 - t0 < kBf16FewTokens) {
    for (; t < t1; ++t) bf16_panel_tokens<V, R, R == 1 ? V::kDecodeLanes : JB, 1>(panel, panel_words, o, a, t, p0, n_rows);
    return;
  }
  for (; t + kT <= t1; t += kT) bf16_panel_tokens<V, R, JB, kT>(panel, panel_words, o, a, t, p0, n_rows);
  if (kT > 4 && t + 4 <= t1) bf16_panel_tokens<V, R, JB, 4>(panel, panel_words, o, a, t, p0, n_rows), t += 4;
  if (t + 2 <= t1) bf16_panel_tokens<V, R, JB, 2>(panel, panel_words, o, a, t, p0, n_rows), t += 2;
  if (t < t1) bf16_panel_tokens<V, R, JB, 1>(panel, panel_words, o, a, t, p0, n_rows);
}

// Panel p of the matrix (rows p*P ..) in the layout above; rows past the end are zeros.
template <int P>
void pack_bf16_panel(const MatmulArgs& a, const Bf16Order& o, int64_t p, uint32_t* out /* bf16_panel_words */) {
  const int64_t pairs = o.lanes * o.chunks;
  auto* tail = reinterpret_cast<bf16_bits*>(out + pairs * P);  // [tail][P] BF16
  for (int i = 0; i < P; ++i) {
    const int64_t row = p * P + i;
    const uint8_t* src = row < a.y_stride ? a.w + size_t(row) * a.w_stride : nullptr;
    for (int64_t q = 0; q < pairs; ++q) {  // pair q = G*c + j of the row goes to j*C + c
      uint32_t v = 0;
      if (src) std::memcpy(&v, src + 4 * q, 4);
      out[((q % o.lanes) * o.chunks + q / o.lanes) * P + i] = v;
    }
    for (int64_t k = 0; k < o.tail; ++k)
      tail[k * P + i] = src ? reinterpret_cast<const bf16_bits*>(src)[2 * pairs + k] : bf16_bits(0);
  }
}

// Rows [r0, r1) (r0 a multiple of P) for all tokens; a panel is packed per call when the
// matrix was not packed at load.
template <class V>
void bf16_rows_range(const MatmulArgs& a, int64_t r0, int64_t r1) {
  constexpr int P = V::kRows;
  const Bf16Order o = bf16_order(a.y_stride, a.cols);
  const int64_t panel_words = bf16_panel_words(o, P);
  constexpr int R = V::kPanels;
  uint32_t* scratch = a.packed ? nullptr : new uint32_t[size_t(R * panel_words)];  // R panels, pack_bf16_panel
  for_each_token_tile(a, [&](int64_t t0, int64_t t1) {
    for (int64_t p0 = r0; p0 < r1;) {
      const int group = (r1 - p0) / P >= R ? R : 1;  // R whole panels, else one (maybe partial)
      const int n_rows = int(r1 - p0 < group * P ? r1 - p0 - (group - 1) * P : P);
      const uint32_t* panel = scratch;
      if (a.packed) panel = reinterpret_cast<const uint32_t*>(a.packed) + (p0 / P) * panel_words;
      else
        for (int g = 0; g < group; ++g) pack_bf16_panel<P>(a, o, p0 / P + g, scratch + g * panel_words);
      if (group == R) bf16_panels<V, R>(panel, panel_words, o, a, t0, t1, p0, n_rows);
      else bf16_panels<V, 1>(panel, panel_words, o, a, t0, t1, p0, n_rows);
      p0 += group * P;
    }
  });
  delete[] scratch;
}

// The PackedRows layout for BF16: panels [p0, p1).
template <int P>
void pack_bf16_panels(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  const Bf16Order o = bf16_order(a.y_stride, a.cols);
  auto* dst = reinterpret_cast<uint32_t*>(out);
  for (int64_t p = p0; p < p1; ++p, dst += bf16_panel_words(o, P)) pack_bf16_panel<P>(a, o, p, dst);
}

}  // namespace
}  // namespace ws::detail
