// AVX2/FMA/F16C matmul kernels. Compiled with -mavx2 -mfma -mf16c; only called after
// the run-time CPU check in kernels.cpp.
//
// Quantized, F16 and BF16 weights run on 8-row panels (kernels_panel.h, kernels_kquant_panel.h,
// kernels_f16_panel.h, kernels_bf16_panel.h) with the vector traits V256 and Bf16Avx2 below;
// they share one float sequence per output with the scalar reference, so they match it bit
// for bit.
//
// F32 uses the register tile of kernels_tile.h: it has an "Ops" struct
// describing one 8-element block of a dot product, and `tile<Ops, R, T>` computes R rows x
// T tokens reusing every loaded weight block for T tokens and every activation block for
// R rows. Every output element owns one accumulator that receives Ops::step for blocks
// 0, 1, ..., nb-1 in order (plus the zero-padded tail) and is reduced by hsum(), the same
// for every tile shape, so results are batch invariant. They sum in 8 lanes + a horizontal
// sum here and in one running sum in the scalar reference, so the two agree to float
// rounding, not bits. All float arithmetic is written as intrinsics (never as `a * b + c`
// in C++), so -ffp-contract cannot fuse differently in different tiles.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tensor/kernels_impl.h"
#include "tensor/kernels_bf16_panel.h"
#include "tensor/kernels_f16_panel.h"
#include "tensor/kernels_kquant_panel.h"
#include "tensor/kernels_panel.h"
#include "tensor/kernels_tile.h"
#include "tensor/quant.h"

namespace ws::detail {
namespace {

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

// ---- quantized and F16 types: 8-row panels ----

struct V256 {
  using I = __m256i;
  using F = __m256;
  static constexpr int kRows = 8;
  static constexpr int kDotTokens = 2;  // tokens per block_dots (kernels_panel.h); 4 and 8: slower
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
  // Block dots of U tokens (xq[u]: 32 levels). maddubs wants unsigned x signed bytes: |w|
  // times x carrying w's sign. No saturation: |w| <= 128 and |x| <= 127, so a pair of
  // products fits in int16. Each level vector is loaded and made |w| once for the U tokens;
  // the empty asm keeps GCC from reassociating the int32 sums into a tree that holds every
  // product live (which spills).
  template <int U>
  static void block_dots(const I* w, const int8_t* const* xq, const int32_t* const* /*corr: signed levels*/,
                         int64_t /*j*/, I* s) {
    for (int u = 0; u < U; ++u) s[u] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const I wg = _mm256_load_si256(w + g), w_abs = _mm256_sign_epi8(wg, wg);
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) {
        int32_t x4;
        std::memcpy(&x4, xq[u] + 4 * g, 4);
        const I prod16 = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(_mm256_set1_epi32(x4), wg));
        s[u] = _mm256_add_epi32(s[u], _mm256_madd_epi16(prod16, _mm256_set1_epi16(1)));
        asm("" : "+x"(s[u]));
      }
    }
  }
  static F fma_block(I s, F dw, float dx, F acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc);
  }
  static constexpr int kF16BatchPanels = 1;  // F16 batches: one panel x 8 tokens (16 ymm)
  static constexpr int kF16DecodePanels = 4;  // F16 decode: 4 panels side by side (16 ymm)
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

  // K-quants (kernels_kquant_panel.h).
  // Tokens per pass: their int32 sums and 8 level vectors (nearly) fit 16 ymm; 6 measured
  // best (4: 10% slower, 8: spills).
  static constexpr int kKTokens = 6;
  static I zero_i() { return _mm256_setzero_si256(); }
  static I bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static I and8(I v, int m) { return _mm256_and_si256(v, _mm256_set1_epi8(char(m))); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I shift16(I v, int s) {  // left by s, or right by -s
    return s > 0 ? _mm256_slli_epi16(v, s) : s < 0 ? _mm256_srli_epi16(v, -s) : v;
  }
  static I srai16(I v, int s) { return _mm256_srai_epi16(v, s); }
  static I neg16(I v) { return _mm256_sub_epi16(_mm256_setzero_si256(), v); }
  static I shuffle32(I v, __m128i pattern) {
    return _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(pattern));
  }
  static I madd_acc(I acc, I a, I b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
  // Sub-block scale byte b of each lane in scaled_dot's form: int16 pairs (sc, sc).
  static I scale_u8(I bytes, int b) { return shuffle32(bytes, lane_bytes(b, -1, b, -1)); }
  static I scale_s8(I bytes, int b) { return srai16(shuffle32(bytes, lane_bytes(-1, b, -1, b)), 8); }
  // acc + sc * sum_g (levels w[g] . x[4g..4g+3]), g < NG, levels 0..kMax: maddubs products
  // are summed in int16 for as many groups as cannot overflow it (each adds at most
  // 2 * 128 * kMax), then widened by madd with the scale pairs.
  template <int NG, int kMax>
  static I scaled_dot(const I* w, const int8_t* x, I sc, I acc) {
    constexpr int G = 32767 / (2 * 128 * kMax);
    static_assert(G >= 1 && NG % G == 0);
#pragma GCC unroll 8
    for (int g0 = 0; g0 < NG; g0 += G) {
      I s = _mm256_maddubs_epi16(w[g0], bcast32(x + 4 * g0));
#pragma GCC unroll 8
      for (int g = g0 + 1; g < g0 + G; ++g)
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[g], bcast32(x + 4 * g)));
      acc = madd_acc(acc, s, sc);
    }
    return acc;
  }
  static F fnma_block(I s, F dw, float dx, F acc) {
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc);
  }
};

// BF16 panels (kernels_bf16_panel.h) with VDPBF16PS emulated. A word holds columns 2p (low
// half) and 2p+1; as f32 the odd one is the word with its low half cleared and the even one
// the word shifted up by 16. FMA rounds once, as the instruction does (its step is fused),
// and MXCSR DAZ|FTZ during the passes gives its denormal handling: inputs read as zero,
// results below FLT_MIN after rounding flushed. The tree and the float64 tail run with the
// caller's MXCSR, as ggml's do.
struct Bf16Avx2 {
  using F = __m256;
  struct W {
    __m256 odd, even;  // [8 rows] f32 columns 2p+1 and 2p
  };
  static constexpr int kRows = 8, kPairBytes = 8;  // activation pairs widened: (even, odd) f32
  using X = const uint8_t*;                        // an activation pair, broadcast in step
  static constexpr int kPanels = 1;                // prefill tile: 1 panel x 8 tokens, 8 accumulators
  static constexpr int kTokens = 8;                //   + 4 of 16 ymm
  static constexpr int kPrefillLanes = 1;          // lane sums per prefill pass
  static constexpr int kDecodeLanes = 8;           // decode: 8 lane sums per pass
  static F zero() { return _mm256_setzero_ps(); }
  static W load_w(const uint32_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u)))),
            _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))};
  }
  static X load_x(const uint8_t* x) { return x; }
  static F step(F acc, const W& w, X x) {
    const float* xf = reinterpret_cast<const float*>(x);
    acc = _mm256_fmadd_ps(w.odd, _mm256_broadcast_ss(xf + 1), acc);
    return _mm256_fmadd_ps(w.even, _mm256_broadcast_ss(xf), acc);
  }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static void store(float* p, F v) { _mm256_store_ps(p, v); }
  static void store_y(float* y, int n, F v) { V256::store_y(y, n, v); }
  static unsigned enter() {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
    return csr;
  }
  static void leave(unsigned csr) { _mm_setcsr(csr); }
};

struct DotAvx2 {
  static __m256i dot(__m256i w, __m256i x) {
    const __m256i prod16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
  }
};

// Largest lane of v (max is exact, so the order does not matter).
float hmax(__m256 v) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// One Q8_K block (256 activations), byte for byte as quantize_row_q8_k (quant.cpp): the
// first element of largest magnitude sets the scale, the same float products, and for
// finite products (|v| <= 127) cvtps rounds to nearest even exactly as its nearest_int.
// Blocks with non-finite values or scale go to quant.cpp itself (its rounding trick's
// bytes for NaN and infinity are not cvtps's).
void quantize_block_q8_k(const float* src, block_q8_k* dst) {
  __m256 amax8 = _mm256_setzero_ps();  // [8] running max |x|; max_ps(x, acc) skips NaN x as the scalar does
  __m256 nan8 = _mm256_setzero_ps();   // [8] all ones where some x was NaN
  for (int j = 0; j < QK_K; j += 8) {
    const __m256 x = _mm256_loadu_ps(src + j);
    amax8 = _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), x), amax8);
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  const float amax = hmax(amax8);
  if (!amax) {
    std::memset(dst, 0, sizeof(block_q8_k));
    return;
  }
  int first = 0;
  while (std::fabs(src[first]) != amax) ++first;
  const float iscale = -127.f / src[first];
  if (_mm256_movemask_ps(nan8) || !std::isfinite(amax) || !std::isfinite(iscale)) {
    quantize_row_q8_k(src, dst, QK_K);
    return;
  }
  const __m256 scale = _mm256_set1_ps(iscale);
  for (int j = 0; j < QK_K; j += 32) {
    __m256i q[4];  // [4][8] int32 levels of elements j..j+31, within -127..127
    for (int k = 0; k < 4; ++k)
      q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(scale, _mm256_loadu_ps(src + j + 8 * k))),
                              _mm256_set1_epi32(127));
    // packs interleave 128-bit lanes; the permute restores element order.
    const __m256i q16 = _mm256_packs_epi32(q[0], q[1]), q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16, q16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst->qs + j), q8);
    // bsums of elements j..j+15 and j+16..j+31: lanes 0 and 1 of the two halves of s2.
    const __m256i s = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    const __m256i s2 = _mm256_hadd_epi32(s, s);
    const __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(s2), _mm256_extracti128_si256(s2, 1));
    dst->bsums[j / 16] = int16_t(_mm_cvtsi128_si32(sum));
    dst->bsums[j / 16 + 1] = int16_t(_mm_extract_epi32(sum, 1));
  }
  dst->d = 1 / iscale;
}

// One Q8_0 block (32 activations), byte for byte as quantize_row_q8_0 (quant.cpp): max_ps
// skips NaN as its std::max does, the same scalar scale, and for finite products
// (|v| <= 127) cvtps rounds to nearest even exactly as its round_half_even. Blocks with
// non-finite values or inverse scale go to quant.cpp itself. Returns the level sum.
int32_t quantize_block_q8_0(const float* src, block_q8_0* dst) {
  __m256 x[4];  // [4][8] f32 elements 0..31
  __m256 amax8 = _mm256_setzero_ps(), nan8 = _mm256_setzero_ps();  // [8] max |x|, NaN lanes
  for (int k = 0; k < 4; ++k) {
    x[k] = _mm256_loadu_ps(src + 8 * k);
    amax8 = _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), x[k]), amax8);
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(x[k], x[k], _CMP_UNORD_Q));
  }
  const float amax = hmax(amax8);
  const float inv_scale = amax != 0.0f ? 127.f / amax : 0.0f;
  if (_mm256_movemask_ps(nan8) || !std::isfinite(amax) || !std::isfinite(inv_scale)) {
    quantize_row_q8_0(src, dst, QK8_0);
    int32_t sum = 0;
    for (int j = 0; j < QK8_0; ++j) sum += dst->qs[j];
    return sum;
  }
  dst->d = f32_to_f16(amax / 127.f);
  const __m256 id = _mm256_set1_ps(inv_scale);
  __m256i q[4];  // [4][8] int32 levels, within -127..127
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(x[k], id));
  const __m256i q16 = _mm256_packs_epi32(q[0], q[1]), q16b = _mm256_packs_epi32(q[2], q[3]);
  const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16, q16b),
                                                 _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst->qs), q8);
  const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s4 = _mm_hadd_epi32(s4, s4);
  return _mm_cvtsi128_si32(_mm_hadd_epi32(s4, s4));
}

}  // namespace

void quantize_row_q8_k_avx2(const float* src, block_q8_k* dst, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) quantize_block_q8_k(src + b * QK_K, dst + b);
}

void quantize_row_q8_0_avx2(const float* src, block_q8_0* dst, int64_t n, float* scales,
                            int32_t* corr) {
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const int32_t sum = quantize_block_q8_0(src + b * QK8_0, dst + b);
    scales[b] = f16_to_f32(dst[b].d);
    if (corr) corr[b] = -128 * sum;
  }
}

void pack_panels_avx2(const MatmulArgs& a, int64_t p0, int64_t p1, uint8_t* out) {
  const int64_t nsb = a.cols / QK_K;  // K-quant super-blocks per row
  switch (a.wtype) {
    case DType::f16: pack_f16_panels<V256>(a, p0, p1, out); break;
    case DType::bf16: pack_bf16_panels<Bf16Avx2::kRows>(a, p0, p1, out); break;
    case DType::q8_0: pack_panels<V256, UnpackQ8_0>(a, p0, p1, out); break;
    case DType::q4_k: pack_kq_panels<V256::kRows, KQ4>(a.w, a.w_stride, a.y_stride, nsb, p0, p1, out); break;
    case DType::q5_k: pack_kq_panels<V256::kRows, KQ5>(a.w, a.w_stride, a.y_stride, nsb, p0, p1, out); break;
    case DType::q6_k: pack_kq_panels<V256::kRows, KQ6>(a.w, a.w_stride, a.y_stride, nsb, p0, p1, out); break;
    default: throw std::invalid_argument("pack_panels: unsupported weight type");
  }
}

namespace {

// f32_to_bf16 on 8 lanes, in the low half of each 32-bit lane: nearest even, NaN quieted.
__m256i round_to_bf16_8(const float* x) {
  const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64)), nan);
}

}  // namespace

void bf16_lanes_row_avx2(const float* x, uint8_t* dst, int64_t cols, const Bf16Order& o, bool widen) {
  const int64_t pairs = o.lanes * o.chunks;
  uint32_t words[1024];  // [<= 1024] rounded pairs in column order, low half = even column
  for (int64_t p0 = 0; p0 < pairs; p0 += 1024) {
    const int64_t np = pairs - p0 < 1024 ? pairs - p0 : 1024;  // a multiple of 16
    for (int64_t i = 0; i < np; i += 8) {
      const __m256i lo = round_to_bf16_8(x + 2 * (p0 + i)), hi = round_to_bf16_8(x + 2 * (p0 + i) + 8);
      // packus keeps 128-bit lanes: words 0-3 | 4-7 of lo, then of hi; the permute orders them.
      const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + i), w);
    }
    // Pair p = G*c + j goes to j*C + c.
    for (int64_t i = 0; i < np; i += o.lanes) {
      const int64_t c = (p0 + i) / o.lanes;
      for (int j = 0; j < o.lanes; ++j) {
        const int64_t q = j * o.chunks + c;
        const uint32_t wd = words[i + j];
        if (widen) {
          const uint32_t f[2] = {wd << 16, wd & 0xffff0000u};  // even, odd as f32 bits
          std::memcpy(dst + 8 * q, f, 8);
        } else {
          std::memcpy(dst + 4 * q, &wd, 4);
        }
      }
    }
  }
  auto* tail = reinterpret_cast<bf16_bits*>(dst + pairs * (widen ? 8 : 4));  // [tail] BF16
  for (int64_t k = 2 * pairs; k < cols; ++k) tail[k - 2 * pairs] = f32_to_bf16(x[k]);
}

void round_to_f16_avx2(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

void f32_to_f16_avx2(const float* x, f16_bits* dst, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
  for (; i < n; ++i) dst[i] = _cvtss_sh(x[i], kRound);
}

void matmul_rows_avx2(const MatmulArgs& a, int64_t r0, int64_t r1) {
  switch (a.wtype) {
    case DType::f32: rows_range<OpsF32>(a, r0, r1); break;
    case DType::f16: f16_rows_range<V256>(a, r0, r1); break;
    case DType::bf16: bf16_rows_range<Bf16Avx2>(a, r0, r1); break;
    case DType::q8_0: panel_rows_range<V256, DotAvx2, UnpackQ8_0>(a, r0, r1); break;
    case DType::q4_0: panel_rows_range<V256, DotAvx2, UnpackQ4_0>(a, r0, r1); break;
    case DType::q4_k: kq_rows_range<V256, KQ4>(a, r0, r1); break;
    case DType::q5_k: kq_rows_range<V256, KQ5>(a, r0, r1); break;
    case DType::q6_k: kq_rows_range<V256, KQ6>(a, r0, r1); break;
    default: throw std::invalid_argument("matmul: unsupported weight type");
  }
}

}  // namespace ws::detail
