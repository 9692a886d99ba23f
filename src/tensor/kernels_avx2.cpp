// AVX2/FMA/F16C matmul kernels. Compiled with -mavx2 -mfma -mf16c; only called after
// the run-time CPU check in kernels.cpp.
//
// Structure: each weight type has an "Ops" struct describing one block of a dot product
// (load a weight block, load an activation block, fold their product into an 8-lane
// float accumulator). A register tile `tile<Ops, R, T>` computes R rows x T tokens by
// walking the blocks once and reusing every loaded weight block for T tokens and every
// loaded activation block for R rows.
//
// Batch invariance: every output element owns exactly one accumulator, which starts at
// zero, receives Ops::step for blocks 0, 1, ..., nb-1 in order (plus the zero-padded
// tail block) and is then reduced by hsum(). That sequence is the same for every tile
// shape, so tile<Ops,4,3>, tile<Ops,4,1> and tile<Ops,1,1> give bit-identical results
// for the same (row, token). All float arithmetic is written as intrinsics (never as
// `a * b + c` in C++), so -ffp-contract cannot fuse differently in different tiles.
//
// Scalar vs AVX2: the integer part of each block dot is exact in both. Q8_0/Q4_0 use the
// same float sequence as the scalar reference (kernels_panel.h), so they match it bit for
// bit; the other types sum the per-block float terms in 8 lanes + a horizontal sum here
// and in one running sum there, so they agree to float rounding, not bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "tensor/kernels_impl.h"
#include "tensor/kernels_f16_panel.h"
#include "tensor/kernels_panel.h"
#include "tensor/kernels_tile.h"

namespace ws::detail {
namespace {

inline float h2f(f16_bits h) { return _cvtsh_ss(h); }

// ---- float types: a block is 8 elements; cols need not be a multiple of 8 ----

struct OpsF32 {
  static constexpr int kElems = 8, kElemBytes = 4, kXElemBytes = 4, kT = 3, kR1 = 8;
  static constexpr bool kTail = true;
  using W = __m256;
  using X = __m256;
  static __m256 load(const uint8_t* row, int64_t b) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + 8 * b);
  }
  static W load_w(const uint8_t* row, int64_t b) { return load(row, b); }
  static X load_x(const uint8_t* row, int64_t b) { return load(row, b); }
  static __m256 step(W w, X x, __m256 acc) { return _mm256_fmadd_ps(w, x, acc); }
};

struct OpsBF16 : OpsF32 {
  static constexpr int kElemBytes = 2, kXElemBytes = 2;
  static __m256 load(const uint8_t* row, int64_t b) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * b));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static W load_w(const uint8_t* row, int64_t b) { return load(row, b); }
  static X load_x(const uint8_t* row, int64_t b) { return load(row, b); }
};

// ---- Q8_0 / Q4_0: 8-row panels (kernels_panel.h) ----

struct V256 {
  using I = __m256i;
  using F = __m256;
  static constexpr int kRows = 8;
  static I from_lanes(const __m128i* l) { return _mm256_set_m128i(l[1], l[0]); }  // l[2]
  // 4x4 transpose of int32 within each 128-bit lane.
  static void transpose4(const I* a, I* o) {
    const I t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    const I t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    o[0] = _mm256_unpacklo_epi64(t0, t2);
    o[1] = _mm256_unpackhi_epi64(t0, t2);
    o[2] = _mm256_unpacklo_epi64(t1, t3);
    o[3] = _mm256_unpackhi_epi64(t1, t3);
  }
  static I prepare_levels(I w) { return w; }  // signed; block_dot moves the sign to x
  static void store_scales(I* dst, const f16_bits* d) {
    _mm256_store_ps(reinterpret_cast<float*>(dst),
                    _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d))));
  }
  static F load_scales(const I* src) { return _mm256_load_ps(reinterpret_cast<const float*>(src)); }
  // maddubs wants unsigned x signed bytes: |w| times x carrying w's sign. No saturation:
  // |w| <= 128 and |x| <= 127, so a pair of products fits in int16.
  static I block_dot(const I* w, const int8_t* xq, int32_t /*corr: levels are signed*/) {
    I s = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      int32_t x4;
      std::memcpy(&x4, xq + 4 * g, 4);
      const I prod16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w[g], w[g]),
                                            _mm256_sign_epi8(_mm256_set1_epi32(x4), w[g]));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(prod16, _mm256_set1_epi16(1)));
    }
    return s;
  }
  static F fma_block(I s, F dw, float dx, F acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc);
  }
  static F load_f16(const f16_bits* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F fma(F w, float x, F acc) { return _mm256_fmadd_ps(w, _mm256_set1_ps(x), acc); }
  static F zero() { return _mm256_setzero_ps(); }
  static I row_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F load_y(const float* y, int n) {
    return n == kRows ? _mm256_loadu_ps(y) : _mm256_maskload_ps(y, row_mask(n));
  }
  static void store_y(float* y, int n, F v) {
    if (n == kRows) _mm256_storeu_ps(y, v);
    else _mm256_maskstore_ps(y, row_mask(n), v);
  }
};

struct DotAvx2 {
  static __m256i dot(__m256i w, __m256i x) {
    const __m256i prod16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
  }
};

// ---- K-quants with Q8_K activations: one step is a whole 256-element super-block ----
//
// load_w unpacks a weight super-block once (levels as bytes, scales) and the tile reuses
// it for T tokens. Integer sums are exact and every int32 lane always collects the same
// elements, so the float values entering the accumulator do not depend on the tile.

// 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K block, as bytes.
struct ScalesK4 {
  uint8_t sc[8];
  uint8_t m[8];
};

inline ScalesK4 decode_scales_k4(const uint8_t* packed /* [12] */) {
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  // Sub-blocks 0..3: low 6 bits of bytes 0..3 (scales) and 4..7 (mins). Sub-blocks 4..7:
  // low/high nibbles of bytes 8..11, with the top 2 bits of bytes 0..3 / 4..7 above.
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
  const uint32_t m_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  ScalesK4 s;
  std::memcpy(s.sc, &sc_lo, 4);
  std::memcpy(s.sc + 4, &sc_hi, 4);
  std::memcpy(s.m, &m_lo, 4);
  std::memcpy(s.m + 4, &m_hi, 4);
  return s;
}

// A Q4_K or Q5_K super-block ready for dot products.
struct UnpackedK4 {
  __m256i q[8];      // [8 sub-blocks][32] unsigned levels (0..15 or 0..31)
  __m256i m_pairs;   // [16] int16: min of sub-block j at lanes 2j and 2j+1
  ScalesK4 s;
  float d, dmin;     // super-block scales
};

template <class Block>
__attribute__((noinline)) UnpackedK4 unpack_k4(const Block* w, const uint8_t* qh) {
  UnpackedK4 u;
  u.s = decode_scales_k4(w->scales);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i qhv = qh ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh))
                         : _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {  // 64-element chunk: sub-blocks 2c (low) and 2c+1 (high)
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qs + 32 * c));
    __m256i q_lo = _mm256_and_si256(packed, low4);
    __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
    if (qh) {  // bit j of each qh byte is the fifth bit of sub-block j
      const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(qhv, 2 * c), one);
      const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(qhv, 2 * c + 1), one);
      q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
      q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
    }
    u.q[2 * c] = q_lo;
    u.q[2 * c + 1] = q_hi;
  }
  const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u.s.m)));
  u.m_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
  u.d = h2f(w->d);
  u.dmin = h2f(w->dmin);
  return u;
}

// acc + d*sum(sc*q*xq) - dmin*sum(m*xq) for one super-block.
__attribute__((noinline)) __m256 step_k4(const UnpackedK4& w, const block_q8_k* x, __m256 acc) {
  __m256i sum_q = _mm256_setzero_si256();  // [8] int32
  for (int j = 0; j < 8; ++j) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * j));
    sum_q = _mm256_add_epi32(sum_q, _mm256_madd_epi16(_mm256_maddubs_epi16(w.q[j], xq),
                                                      _mm256_set1_epi16(w.s.sc[j])));
  }
  // Mins: bsums hold the sums of 16 activation levels, two per sub-block.
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->bsums));
  const __m256i sum_m = _mm256_madd_epi16(bs, w.m_pairs);  // [8] int32
  const __m256 d = _mm256_set1_ps(w.d * x->d);
  const __m256 dmin = _mm256_set1_ps(w.dmin * x->d);
  acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum_q), acc);
  return _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(sum_m), acc);
}

struct OpsQ4_K {
  static constexpr int kElems = QK_K, kElemBytes = 0, kT = 4, kR1 = 4;
  static constexpr bool kTail = false;
  using W = UnpackedK4;
  using X = const block_q8_k*;
  static W load_w(const uint8_t* row, int64_t b) {
    return unpack_k4(reinterpret_cast<const block_q4_k*>(row) + b, nullptr);
  }
  static X load_x(const uint8_t* row, int64_t b) { return reinterpret_cast<X>(row) + b; }
  static __m256 step(const W& w, X x, __m256 acc) { return step_k4(w, x, acc); }
};

struct OpsQ5_K : OpsQ4_K {
  static W load_w(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const block_q5_k*>(row) + b;
    return unpack_k4(blk, blk->qh);
  }
};

// A Q6_K super-block ready for dot products.
struct UnpackedQ6K {
  __m256i q[8];    // [8 quarters-of-halves][32] levels + 32 (0..63, unsigned)
  __m256i sc16;    // [16] int16 sub-block scales
  const int8_t* scales;  // [16] the block's int8 scales
  float d;
};

__attribute__((noinline)) UnpackedQ6K unpack_q6_k(const block_q6_k* w) {
  UnpackedQ6K u;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {  // 128-element halves
    const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->ql + 64 * h));
    const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->ql + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qh + 32 * h));
    for (int q = 0; q < 4; ++q) {  // quarter q: nibble half q/2 of ql(q%2), qh bits 2q..2q+1
      const __m256i ql = (q & 1) ? ql1 : ql0;
      const __m256i lo = (q < 2) ? _mm256_and_si256(ql, low4)
                                 : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * q), two_bits);
      u.q[4 * h + q] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    }
  }
  u.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales)));
  u.scales = w->scales;
  u.d = h2f(w->d);
  return u;
}

// acc + d * sum_i sc(i) * (q_i - 32) * xq_i for one Q6_K super-block.
__attribute__((noinline)) __m256 step_q6_k(const UnpackedQ6K& w, const block_q8_k* x, __m256 acc) {
  __m256i sum = _mm256_setzero_si256();  // [8] int32
  for (int k = 0; k < 8; ++k) {  // 32 elements starting at 32k, scales 2k and 2k+1
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * k));
    const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(w.scales[2 * k + 1]),
                                        _mm_set1_epi16(w.scales[2 * k]));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(w.q[k], xq), sc));
  }
  // The -32 offset of every level: subtract 32 * sum_k sc_k * bsum_k.
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->bsums));
  sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(_mm256_madd_epi16(bs, w.sc16), 5));
  const __m256 d = _mm256_set1_ps(w.d * x->d);
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
}

struct OpsQ6_K : OpsQ4_K {
  using W = UnpackedQ6K;
  static W load_w(const uint8_t* row, int64_t b) {
    return unpack_q6_k(reinterpret_cast<const block_q6_k*>(row) + b);
  }
  static __m256 step(const W& w, X x, __m256 acc) { return step_q6_k(w, x, acc); }
};

}  // namespace

void pack_panels_avx2(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  if (a.wtype == DType::f16) pack_f16_panels<V256>(a, p0, p1, out);
  else pack_panels<V256, UnpackQ8_0>(a, p0, p1, out);
}

void matmul_rows_avx2(const MatmulArgs& a, int64_t r0, int64_t r1) {
  switch (a.wtype) {
    case DType::f32: rows_range<OpsF32>(a, r0, r1); break;
    case DType::f16: f16_rows_range<V256>(a, r0, r1); break;
    case DType::bf16: rows_range<OpsBF16>(a, r0, r1); break;
    case DType::q8_0: panel_rows_range<V256, DotAvx2, UnpackQ8_0>(a, r0, r1); break;
    case DType::q4_0: panel_rows_range<V256, DotAvx2, UnpackQ4_0>(a, r0, r1); break;
    case DType::q4_k: rows_range<OpsQ4_K>(a, r0, r1); break;
    case DType::q5_k: rows_range<OpsQ5_K>(a, r0, r1); break;
    case DType::q6_k: rows_range<OpsQ6_K>(a, r0, r1); break;
    default: throw std::invalid_argument("matmul: unsupported weight type");
  }
}

}  // namespace ws::detail
