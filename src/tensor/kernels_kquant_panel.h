// K-quant (Q4_K, Q5_K, Q6_K; Q8_K activations) matmul on row panels, shared by the AVX2
// (8 rows per ymm) and AVX512-VNNI (16 rows per zmm) translation units with their vector
// traits (see kernels_panel.h). Internal to the including file, no standard-library
// templates.
//
// Layout (kernels_kquant_layout.h): per super-block, a panel of P rows is a run of vectors
// of P int32 lanes, lane r holding 4 bytes of row r's GGUF block as they are: levels stay
// nibbles and high-bit planes, scales stay 6-bit packed. They are unpacked in registers at
// use, once per super-block for V::kKTokens tokens. Q4_K/Q5_K qs vector 8c + k holds levels
// 4k..4k+3 of sub-block 2c of every row in its low nibbles and those of sub-block 2c + 1
// in its high nibbles (the GGUF byte order).
//
// Numerics (shared with the scalar references dot_q4_k / dot_q5_k / dot_q6_k, bit for
// bit): per super-block, with exact integer sums over its levels q, activation levels x
// (scale xd), sub-block scales sc_j and mins m_j,
//   Q4_K, Q5_K:  A = sum_j sc_j * sum_{i in j} q_i x_i,   B = sum_j m_j * sum_{i in j} x_i
//                acc = fma(float(A), d * xd, acc);   acc = fma(-float(B), dmin * xd, acc)
//   Q6_K:        A = sum_j sc_j * sum_{i in j} (q_i - 32) x_i
//                acc = fma(float(A), d * xd, acc)
// The ISAs form the integers differently (vpdpbusd + vpmulld, or maddubs + madd), but
// exactly, and each lane runs exactly this float sequence, so the result does not depend
// on the ISA, the packing, the batch or the thread split.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"
#include "tensor/kernels_kquant_layout.h"
#include "tensor/kernels_prefetch.h"

namespace ws::detail {
namespace {

// Words 0..7 at byte offset o of the blocks src[0..7] into 8 packed vectors (out: vector 0,
// lane 0 of these 8 rows; vectors P * 4 bytes apart): an 8x8 transpose of 32-bit words,
// both 128-bit lanes at once (lane 0: words 0..3, lane 1: words 4..7).
inline void transpose8_words(const uint8_t* const* src, int o, uint8_t* out, int P) {
  __m256i r[8], t[8];  // [8] rows, then partial transposes
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src[i] + o));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // pairs of rows per word
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // rows 4h..4h+3 of words c | c + 4, c = 0..3
    r[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
    r[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
    r[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    r[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c * P * 4), _mm256_permute2x128_si256(r[c], r[c + 4], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (c + 4) * P * 4),
                        _mm256_permute2x128_si256(r[c], r[c + 4], 0x31));
  }
}

// Whether packed vectors v..v+7 take 8 consecutive words of the block (one transpose).
template <class K>
constexpr bool word_run8(int v) {
  if (v + 8 > K::kVectors) return false;
  for (int j = 0; j < 8; ++j)
    if (v + j == K::kF16 || K::word_offset(v + j) != K::word_offset(v) + 4 * j) return false;
  return true;
}

// Packed vectors V.. of rows h..h+7 (blk: their GGUF blocks) into the super-block at out:
// runs of 8 consecutive words by transposes, the others (scales) by copies; the f16
// vector is left to the caller. Unrolled at compile time.
template <int P, class K, int V = 0>
inline void pack_kq_vectors(const uint8_t* const* blk, int h, uint8_t* out) {
  if constexpr (V < K::kVectors) {
    if constexpr (word_run8<K>(V)) {
      transpose8_words(blk, K::word_offset(V), out + (V * P + h) * 4, P);
      pack_kq_vectors<P, K, V + 8>(blk, h, out);
    } else {
      if constexpr (V != K::kF16)
        for (int i = 0; i < 8; ++i) __builtin_memcpy(out + (V * P + h + i) * 4, blk[i] + K::word_offset(V), 4);
      pack_kq_vectors<P, K, V + 1>(blk, h, out);
    }
  }
}

// Packs super-blocks [sb0, sb0 + nsb) of the P rows `rows` (null: zeros) into `out`:
// [nsb][K::kVectors][P lanes][4 bytes] (kernels_kquant_layout.h), 8 rows at a time.
// `ahead` (optional) is stepped once per 8 rows.
template <int P, class K>
void pack_kq(const uint8_t* const* rows, int64_t sb0, int64_t nsb, uint8_t* out, PrefetchStream* ahead = nullptr) {
  static constexpr uint8_t kZeros[sizeof(typename K::Block)] = {};  // a null row's block
  for (int64_t s = 0; s < nsb; ++s, out += K::kVectors * P * 4) {
    for (int h = 0; h < P; h += 8) {
      if (ahead) ahead->step();
      const uint8_t* blk[8];  // rows h..h+7: this super-block's GGUF block
      for (int i = 0; i < 8; ++i)
        blk[i] = rows[h + i] ? rows[h + i] + (sb0 + s) * int64_t(sizeof(typename K::Block)) : kZeros;
      pack_kq_vectors<P, K>(blk, h, out);
      uint8_t* f16 = out + K::kF16 * P * 4;  // [d x P, dmin x P] f16
      for (int i = 0; i < 8; ++i) {
        __builtin_memcpy(f16 + (h + i) * 2, blk[i] + K::kDOffset, 2);
        if constexpr (K::kDminOffset >= 0) __builtin_memcpy(f16 + (P + h + i) * 2, blk[i] + K::kDminOffset, 2);
      }
    }
  }
}

// The PackedRows layout of panels [p0, p1) of a matrix of `rows` rows of nsb super-blocks
// (row i at w + i * w_stride).
template <int P, class K>
void pack_kq_panels(const uint8_t* w, size_t w_stride, int64_t rows, int64_t nsb, int64_t p0,
                    int64_t p1, uint8_t* out) {
  for (int64_t p = p0; p < p1; ++p, out += nsb * K::kVectors * P * 4) {
    const uint8_t* row_ptrs[P];  // the panel's weight rows, null past the end
    for (int i = 0; i < P; ++i) row_ptrs[i] = p * P + i < rows ? w + size_t(p * P + i) * w_stride : nullptr;
    pack_kq<P, K>(row_ptrs, 0, nsb, out);
  }
}

// Super-blocks per chunk: a packed chunk (<= 14 KB: Q6_K, P = 16) stays in L1 while every
// token of the batch streams past it. Accumulators are kept in y between chunks (a float
// store and reload is exact, so the sequence above is unchanged).
constexpr int64_t kKChunk = 4;

// A pshufb pattern applied to every 4-byte lane: result byte i of a lane is byte s_i of the
// same lane, or zero where s_i < 0.
inline __m128i lane_bytes(int s0, int s1, int s2, int s3) {
  auto sel = [](int s, int i) { return uint32_t(s < 0 ? 0x80 : s) << (8 * i); };
  const __m128i word = _mm_set1_epi32(int(sel(s0, 0) | sel(s1, 1) | sel(s2, 2) | sel(s3, 3)));
  return _mm_add_epi8(word, _mm_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C));
}

// Levels 4k..4k+3 of sub-block j (0..7) of every row as unsigned bytes (Q4_K, Q5_K).
template <class V, class K>
inline typename V::I k4_levels(const typename V::I* w, int j, int k) {
  const typename V::I qs = w[K::kQs + 8 * (j / 2) + k];
  const typename V::I q = V::and8(j % 2 ? V::shift16(qs, -4) : qs, 0x0F);
  if constexpr (!K::kHigh) return q;
  else return V::or_(q, V::and8(V::shift16(w[K::kQh + k], 4 - j), 0x10));  // qh bit j -> bit 4
}

// The 6-bit scales (sc) and mins (m) of sub-blocks 0..3 and 4..7 as bytes of each lane,
// from the 12 packed bytes u[0..2]: sub-blocks 0..3 take the low 6 bits of bytes 0..3 /
// 4..7; sub-blocks 4..7 the nibbles of bytes 8..11 with the top 2 bits of those above.
template <class V>
inline void k4_scales(const typename V::I* u, typename V::I* sc, typename V::I* m) {
  sc[0] = V::and8(u[0], 0x3F);
  m[0] = V::and8(u[1], 0x3F);
  sc[1] = V::or_(V::and8(u[2], 0x0F), V::and8(V::shift16(u[0], -2), 0x30));
  m[1] = V::or_(V::and8(V::shift16(u[2], -4), 0x0F), V::and8(V::shift16(u[1], -2), 0x30));
}

// acc[t] += one Q4_K / Q5_K super-block `w` of the panel times x[t] (its Q8_K block) for
// T tokens: A and B as above.
template <class V, class K, int T>
inline void k4_superblock(const typename V::I* w, const block_q8_k* const* x, typename V::F* acc) {
  using I = typename V::I;
  I sc[2], m[2];  // [sub-blocks 0..3, 4..7] scale / min bytes
  k4_scales<V>(w + K::kScales, sc, m);
  I s[T];  // [T] A, then B, one int32 lane per row
  for (int t = 0; t < T; ++t) s[t] = V::zero_i();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    I lv[8];  // [8 groups] levels 4k..4k+3 of sub-block j
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) lv[k] = k4_levels<V, K>(w, j, k);
    const I scj = V::scale_u8(sc[j / 4], j % 4);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      s[t] = V::template scaled_dot<8, K::kMaxLevel>(lv, x[t]->qs + 32 * j, scj, s[t]);
  }
  const auto* f16 = reinterpret_cast<const f16_bits*>(w + K::kF16);
  const typename V::F d = V::load_f16(f16), dmin = V::load_f16(f16 + V::kRows);
  for (int t = 0; t < T; ++t) acc[t] = V::fma_block(s[t], d, x[t]->d, acc[t]);
  // B from the activation sums of 16 (bsums): pairs (m_j, m_j) x (bsums[2j], bsums[2j+1]).
  for (int t = 0; t < T; ++t) s[t] = V::zero_i();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const I mj = V::shuffle32(m[j / 4], lane_bytes(j % 4, -1, j % 4, -1));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = V::madd_acc(s[t], mj, V::bcast32(x[t]->bsums + 2 * j));
  }
  for (int t = 0; t < T; ++t) acc[t] = V::fnma_block(s[t], dmin, x[t]->d, acc[t]);
}

// Levels 4k..4k+3 of quarter q (0..3) of half h of every row as unsigned bytes 0..63 (Q6_K:
// element 128h + 32q + l has the low nibble of ql[64h + 32(q & 1) + l] (high nibble for
// q >= 2) and bits 2q, 2q + 1 of qh[32h + l] above it).
template <class V>
inline typename V::I q6_levels(const typename V::I* w, int h, int q, int k) {
  const typename V::I ql = w[KQ6::kQl + 24 * h + 8 * (q & 1) + k];
  const typename V::I lo = V::and8(q < 2 ? ql : V::shift16(ql, -4), 0x0F);
  return V::or_(lo, V::and8(V::shift16(w[KQ6::kQh + 24 * h + k], 4 - 2 * q), 0x30));
}

// acc[t] += one Q6_K super-block `w` of the panel times x[t] for T tokens.
template <class V, int T>
inline void q6_superblock(const typename V::I* w, const block_q8_k* const* x, typename V::F* acc) {
  using I = typename V::I;
  const I* sc = w + KQ6::kScales;  // [4] int8 scales 4i..4i+3 of every row
  I s[T];  // [T] A, one int32 lane per row
  // The -32 offset of every level: s starts at -32 * sum_j sc_j * bsum_j, from int16 pairs
  // (-32 sc_2i, -32 sc_2i+1) (scale in the high byte, arithmetic shift by 3, negate).
  for (int t = 0; t < T; ++t) s[t] = V::zero_i();
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const int b = 2 * (i % 2);  // scale bytes b, b + 1 of vector i / 2
    const I pair = V::neg16(V::srai16(V::shuffle32(sc[i / 2], lane_bytes(-1, b, -1, b + 1)), 3));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = V::madd_acc(s[t], pair, V::bcast32(x[t]->bsums + 2 * i));
  }
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {  // sub-block of 16: half j / 8, quarter j / 2 % 4
    I lv[4];  // [4 groups] levels 4k..4k+3 of the sub-block
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) lv[k] = q6_levels<V>(w, j / 8, j / 2 % 4, 4 * (j % 2) + k);
    const I scj = V::scale_s8(sc[j / 4], j % 4);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = V::template scaled_dot<4, 63>(lv, x[t]->qs + 16 * j, scj, s[t]);
  }
  const typename V::F d = V::load_f16(reinterpret_cast<const f16_bits*>(w + KQ6::kF16));
  for (int t = 0; t < T; ++t) acc[t] = V::fma_block(s[t], d, x[t]->d, acc[t]);
}

template <class V, class K, int T>
inline void kq_superblock(const typename V::I* w, const block_q8_k* const* x, typename V::F* acc) {
  if constexpr (K::kMins) k4_superblock<V, K, T>(w, x, acc);
  else q6_superblock<V, T>(w, x, acc);
}

// Runs T tokens from t0 over the nsb packed super-blocks of a chunk starting at super-block
// sb0, reading and writing the accumulators in y.
template <class V, class K, int T>
void kq_chunk_tokens(const typename V::I* packed, int64_t nsb, const MatmulArgs& a, int64_t sb0,
                     int64_t t0, int64_t r0, int n_rows) {
  typename V::F acc[T];      // [T] accumulators, one lane per row
  const block_q8_k* xt[T];   // [T] activation rows (Q8_K) from super-block sb0
  for (int t = 0; t < T; ++t) {
    acc[t] = sb0 == 0 ? V::zero() : V::load_y(a.y + (t0 + t) * a.y_stride + r0, n_rows);
    xt[t] = reinterpret_cast<const block_q8_k*>(a.x + size_t(t0 + t) * a.x_stride) + sb0;
  }
  for (int64_t s = 0; s < nsb; ++s) {
    const block_q8_k* xs[T];  // [T] this super-block's activation blocks
    for (int t = 0; t < T; ++t) xs[t] = xt[t] + s;
    kq_superblock<V, K, T>(packed + s * K::kVectors, xs, acc);
  }
  for (int t = 0; t < T; ++t) V::store_y(a.y + (t0 + t) * a.y_stride + r0, n_rows, acc[t]);
}

// Rows [r0, r1) (r0 a multiple of P) for all tokens, from the prepacked panels (a.packed)
// or packing each chunk here.
template <class V, class K>
void kq_rows_range(const MatmulArgs& a, int64_t r0, int64_t r1) {
  constexpr int P = V::kRows, kVectors = K::kVectors;
  alignas(64) typename V::I scratch[kKChunk * kVectors];  // one chunk packed per call, see pack_kq
  const int64_t nsb = a.cols / QK_K;
  for_each_token_tile(a, [&](int64_t t0, int64_t t1) {
    for (int64_t p0 = r0; p0 < r1; p0 += P) {
      const int n_rows = int(r1 - p0 < P ? r1 - p0 : P);
      const uint8_t* rows[P];  // the panel's weight rows, null past the end
      for (int i = 0; i < P; ++i) rows[i] = i < n_rows ? a.w + size_t(p0 + i) * a.w_stride : nullptr;
      const auto* prepacked = reinterpret_cast<const typename V::I*>(a.packed) + (p0 / P) * nsb * kVectors;
      for (int64_t sb0 = 0; sb0 < nsb; sb0 += kKChunk) {
        const int64_t n = nsb - sb0 < kKChunk ? nsb - sb0 : kKChunk;
        const typename V::I* chunk = scratch;
        if (a.packed) {
          chunk = prepacked + sb0 * kVectors;
        } else {  // the next chunk's lines, a few per 8 rows packed
          constexpr size_t B = sizeof(typename K::Block);
          PrefetchStream ahead = next_chunk(a, p0, P, size_t(sb0) * B, size_t(n) * B, kKChunk * B, n * (P / 8));
          pack_kq<P, K>(rows, sb0, n, reinterpret_cast<uint8_t*>(scratch), &ahead);
        }
        int64_t t = t0;
        for (; t + V::kKTokens <= t1; t += V::kKTokens)
          kq_chunk_tokens<V, K, V::kKTokens>(chunk, n, a, sb0, t, p0, n_rows);
        for (; t < t1; ++t) kq_chunk_tokens<V, K, 1>(chunk, n, a, sb0, t, p0, n_rows);
      }
    }
  });
}

}  // namespace
}  // namespace ws::detail
