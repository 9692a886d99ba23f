// Q8_0 / Q4_0 matmul on row panels, shared by the AVX2 (8 rows per ymm) and AVX512-VNNI
// (16 rows per zmm) translation units, each instantiating it with its own vector traits.
// Like kernels_tile.h: internal to the including file, no standard-library templates.
//
// Layout: a panel holds P weight rows. For each 32-element block b it holds the P row
// scales as f32, then 8 vectors packed (transposed) so that vector g holds levels
// 4g..4g+3 of every row, one row per int32 lane. (Scales first because the kernel reads
// them first: decode streams the weights from memory, and the hardware prefetcher keeps
// up with one ascending stream.) One integer dot step multiplies a vector g by the
// broadcast 4 activation levels 4g..4g+3 of one token; eight steps leave each lane with
// that row's exact block dot product I_b.
//
// Numerics (shared with the scalar reference dot_q8_0 / dot_q4_0, bit for bit):
//   acc = 0;  for b in 0..nb-1:  acc = fma(float(I_b), d_w[b] * d_x[b], acc)
// I_b is exact in every path, and each lane runs exactly this float sequence, so the
// result does not depend on the ISA, the tile, the batch or the thread split.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"
#include "tensor/kernels_prefetch.h"

namespace ws::detail {
namespace {

// Blocks packed at a time: the packed chunk (kPanelChunk * 9 vectors) stays in L1/L2 while
// every token of the batch streams past it. Accumulators are kept in y between chunks
// (a float store and reload is exact, so the sequence above is unchanged).
constexpr int64_t kPanelChunk = 32;
constexpr int kPanelTokens = 8;  // tokens whose accumulators live in registers at once
constexpr int64_t kFewTokens = 4;  // below this many tokens, no packing (rows8_few_tokens)

// A zero Q8_0 / Q4_0-sized block standing in for rows past the end of the matrix; their
// lanes compute zeros that are never stored.
alignas(64) constexpr uint8_t kZeroBlock[64] = {};

// Packs blocks [b0, b0 + nblk) of the P rows `rows` into `out`:
// [nblk][1 V::F scale vector, 8 V::I level vectors].
template <class V, class Unpack>
void pack_panel(const uint8_t* const* rows, int64_t b0, int64_t nblk, typename V::I* out,
                PrefetchStream* ahead = nullptr) {
  constexpr int P = V::kRows, L = P / 4;  // rows, 128-bit lanes per vector
  for (int64_t j = 0; j < nblk; ++j) {
    if (ahead) ahead->step();
    const int64_t b = b0 + j;
    typename V::I lo[4], hi[4];  // lane l of lo[i] / hi[i]: levels 0..15 / 16..31 of row i+4l
    alignas(64) f16_bits d[P];
    for (int i = 0; i < 4; ++i) {
      __m128i l16[L], h16[L];
      for (int l = 0; l < L; ++l) d[i + 4 * l] = Unpack::load(rows[i + 4 * l], b, &l16[l], &h16[l]);
      lo[i] = V::from_lanes(l16);
      hi[i] = V::from_lanes(h16);
    }
    typename V::I* blk = out + j * 9;
    V::store_scales(blk, d);
    typename V::I* w = blk + 1;
    V::transpose4(lo, w);  // levels 0..15: vectors 0..3
    V::transpose4(hi, w + 4);
    for (int g = 0; g < 8; ++g) w[g] = V::prepare_levels(w[g]);
  }
}

// acc[t] over blocks [0, nblk) of a packed chunk for T tokens; x blocks start at block b0.
template <class V, int T>
void panel_tokens(const typename V::I* packed, int64_t nblk, const MatmulArgs& a, int64_t b0,
                  int64_t t0, typename V::F* acc) {
  const block_q8_0* xt[T];   // T activation rows (Q8_0)
  const int32_t* corr[T];    // [nb] per-block correction of each token
  const float* scale[T];     // [nb] per-block activation scale of each token
  const int64_t nb = a.cols / QK8_0;
  for (int t = 0; t < T; ++t) {
    xt[t] = reinterpret_cast<const block_q8_0*>(a.x + size_t(t0 + t) * a.x_stride) + b0;
    corr[t] = a.x_corr ? a.x_corr + (t0 + t) * nb + b0 : nullptr;  // VNNI only
    scale[t] = a.x_scale + (t0 + t) * nb + b0;
  }
  constexpr int U = T < V::kDotTokens ? T : V::kDotTokens;  // tokens per block_dots call
  static_assert(T % U == 0);
  for (int64_t j = 0; j < nblk; ++j) {
    const typename V::F dw = V::load_scales(packed + j * 9);
    const typename V::I* w = packed + j * 9 + 1;
#pragma GCC unroll 8
    for (int t = 0; t < T; t += U) {  // unrolled: acc stays in registers
      const int8_t* xq[U];  // [U] the tokens' 32 levels of block j
      for (int u = 0; u < U; ++u) xq[u] = xt[t + u][j].qs;
      typename V::I s[U];  // [U] int32 block dots, one lane per row
      V::template block_dots<U>(w, xq, corr + t, j, s);
      for (int u = 0; u < U; ++u) acc[t + u] = V::fma_block(s[u], dw, scale[t + u][j], acc[t + u]);
    }
  }
}

// Runs T tokens from t0 over one packed chunk, reading and writing accumulators in y.
template <class V, int T>
void panel_chunk_tokens(const typename V::I* packed, int64_t nblk, const MatmulArgs& a,
                        int64_t b0, int64_t t0, int64_t r0, int n_rows) {
  typename V::F acc[T];  // [T] accumulators, one lane per row
  for (int t = 0; t < T; ++t)
    acc[t] = b0 == 0 ? V::zero() : V::load_y(a.y + (t0 + t) * a.y_stride + r0, n_rows);
  panel_tokens<V, T>(packed, nblk, a, b0, t0, acc);
  for (int t = 0; t < T; ++t) V::store_y(a.y + (t0 + t) * a.y_stride + r0, n_rows, acc[t]);
}

// Few tokens (decode): packing would cost more than it saves, so each row's block dot is
// taken in place (8 int32 lanes from Dot::dot) and the lanes of 8 rows are summed exactly
// into one vector, lane i = row i. The float sequence is the one above.
template <class Dot, class Unpack>
void rows8_few_tokens(const MatmulArgs& a, int64_t r0, int n_rows, int64_t t) {
  const uint8_t* rows[8];
  for (int i = 0; i < 8; ++i) rows[i] = i < n_rows ? a.w + size_t(r0 + i) * a.w_stride : nullptr;
  const int64_t nb = a.cols / QK8_0;
  PrefetchStream ahead = next_chunk(a, r0, 8, 0, a.w_stride, a.w_stride, nb);  // the next 8 rows
  const auto* xb = reinterpret_cast<const block_q8_0*>(a.x + size_t(t) * a.x_stride);
  const float* x_scale = a.x_scale + t * nb;
  __m256 acc = _mm256_setzero_ps();  // [8 rows] f32
  for (int64_t b = 0; b < nb; ++b) {
    ahead.step();
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs));
    alignas(16) f16_bits d[8];
    __m256i v[8];  // [8 rows][8] int32 partial sums
    for (int i = 0; i < 8; ++i) {
      __m128i lo, hi;
      d[i] = Unpack::load(rows[i], b, &lo, &hi);
      v[i] = Dot::dot(_mm256_set_m128i(hi, lo), xq);
    }
    const __m256i h0 = _mm256_hadd_epi32(v[0], v[1]), h1 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i h2 = _mm256_hadd_epi32(v[4], v[5]), h3 = _mm256_hadd_epi32(v[6], v[7]);
    // Lane i (i < 4) of each 128-bit half: row i (g0) / row 4 + i (g1), half of its sum.
    const __m256i g0 = _mm256_hadd_epi32(h0, h1), g1 = _mm256_hadd_epi32(h2, h3);
    const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20),
                                         _mm256_permute2x128_si256(g0, g1, 0x31));
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(x_scale[b])), acc);
  }
  float* y = a.y + t * a.y_stride + r0;
  if (n_rows == 8) {
    _mm256_storeu_ps(y, acc);
  } else {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, acc);
    for (int i = 0; i < n_rows; ++i) y[i] = tmp[i];
  }
}

// Rows [r0, r1) for all tokens.
template <class V, class Dot, class Unpack>
void panel_rows_range(const MatmulArgs& a, int64_t r0, int64_t r1) {
  constexpr int P = V::kRows;
  if (!a.packed && a.n_tokens < kFewTokens) {
    for (int64_t t = 0; t < a.n_tokens; ++t)
      for (int64_t r = r0; r < r1; r += 8) rows8_few_tokens<Dot, Unpack>(a, r, int(r1 - r < 8 ? r1 - r : 8), t);
    return;
  }
  alignas(64) typename V::I scratch[kPanelChunk * 9];  // one chunk packed here, see pack_panel
  const int64_t nb = a.cols / QK8_0;
  for_each_token_tile(a, [&](int64_t t0, int64_t t1) {
    for (int64_t p0 = r0; p0 < r1; p0 += P) {
      const int n_rows = int(r1 - p0 < P ? r1 - p0 : P);
      const uint8_t* rows[P];
      for (int i = 0; i < P; ++i) rows[i] = i < n_rows ? a.w + size_t(p0 + i) * a.w_stride : nullptr;
      const auto* prepacked = reinterpret_cast<const typename V::I*>(a.packed) + (p0 / P) * nb * 9;
      for (int64_t b0 = 0; b0 < nb; b0 += kPanelChunk) {
        const int64_t nblk = nb - b0 < kPanelChunk ? nb - b0 : kPanelChunk;
        const typename V::I* chunk = scratch;
        if (a.packed) {
          chunk = prepacked + b0 * 9;
        } else {  // the next chunk's lines, a few per block packed
          const size_t B = a.w_stride / size_t(nb);  // bytes per block
          PrefetchStream ahead = next_chunk(a, p0, P, size_t(b0) * B, size_t(nblk) * B, kPanelChunk * B, nblk);
          pack_panel<V, Unpack>(rows, b0, nblk, scratch, &ahead);
        }
        int64_t t = t0;
        for (; t + kPanelTokens <= t1; t += kPanelTokens)
          panel_chunk_tokens<V, kPanelTokens>(chunk, nblk, a, b0, t, p0, n_rows);
        for (; t < t1; ++t) panel_chunk_tokens<V, 1>(chunk, nblk, a, b0, t, p0, n_rows);
      }
    }
  });
}

// The PackedRows layout of panels [p0, p1): pack_panel over all blocks of each panel.
template <class V, class Unpack>
void pack_panels(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  constexpr int P = V::kRows;
  const int64_t nb = a.cols / QK8_0, rows = a.y_stride;
  auto* dst = reinterpret_cast<typename V::I*>(out);
  for (int64_t p = p0; p < p1; ++p, dst += nb * 9) {
    const uint8_t* row_ptrs[P];
    for (int i = 0; i < P; ++i) row_ptrs[i] = p * P + i < rows ? a.w + size_t(p * P + i) * a.w_stride : nullptr;
    pack_panel<V, Unpack>(row_ptrs, 0, nb, dst);
  }
}

// Weight block readers: return the scale bits and the 32 levels as two 16-byte halves of
// signed bytes (elements 0..15, 16..31). A null row reads as zeros.
struct UnpackQ8_0 {
  static f16_bits load(const uint8_t* row, int64_t b, __m128i* lo, __m128i* hi) {
    const auto* blk = row ? reinterpret_cast<const block_q8_0*>(row) + b
                          : reinterpret_cast<const block_q8_0*>(kZeroBlock);
    *lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    *hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs + 16));
    return blk->d;
  }
};

struct UnpackQ4_0 {
  static f16_bits load(const uint8_t* row, int64_t b, __m128i* lo, __m128i* hi) {
    const auto* blk = row ? reinterpret_cast<const block_q4_0*>(row) + b
                          : reinterpret_cast<const block_q4_0*>(kZeroBlock);
    // Low nibbles are elements 0..15, high nibbles 16..31, stored as level + 8.
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i nib = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    *lo = row ? _mm_sub_epi8(_mm_and_si128(packed, nib), eight) : _mm_setzero_si128();
    *hi = row ? _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), nib), eight)
              : _mm_setzero_si128();
    return blk->d;
  }
};

}  // namespace
}  // namespace ws::detail
