// Row (de)quantization for the GGUF block formats.
//
// The weight quantizers reproduce llama.cpp's reference (`*_ref`, no importance matrix)
// quantizers bit for bit: same search grids, same float operation order, same rounding
// helpers. That is what makes `warmstart quantize` produce the same bytes as
// `llama-quantize`. Do not "simplify" the arithmetic below (e.g. reorder sums, fold
// constants, use std::lround instead of nearest_int): any change in float evaluation
// order can flip a rounding decision and break byte identity with the fixtures.
#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ws {
namespace {

// nearbyint() for |x| < 2^22 in the default rounding mode (ties to even), without a libm
// call per element (the generic build has no SSE4.1 round instruction): adding 1.5 * 2^23
// leaves no fraction bits, so the float addition itself rounds.
inline float round_half_even(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

// Sub-blocks whose largest magnitude is below this are treated as all zero (ggml's value).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, via the 1.5*2^23 trick; valid for |v| <= 2^22.
// ggml uses exactly this (not lround, which rounds ties away from zero).
inline int nearest_int(float v) {
  float shifted = v + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

void check_multiple(int64_t n, int64_t block, const char* what) {
  if (n % block != 0)
    throw std::invalid_argument(std::string(what) + ": row length " + std::to_string(n) +
                                " is not a multiple of the block size " + std::to_string(block));
}

// ---------------------------------------------------------------------------------------
// Scale search helpers (the algorithms of ggml's make_qx_quants / make_qkx2_quants).

// Symmetric quantization of x[n] to levels in [-nmax, nmax-1], weighted by x^2, trying 19
// candidate scales around nmax/max. Writes L[i] = level + nmax; returns the scale.
float make_qx_quants_sq(int n, int nmax, const float* x, int8_t* L) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Asymmetric (scale + min) quantization of x[n] to levels [0, nmax], minimizing the
// weighted squared error over nstep+1 candidate scales. Returns the scale and stores
// -min (>= 0) in *the_min. Laux[n] is scratch.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// The 12-byte packed 6-bit (scale, min) pairs of Q4_K / Q5_K: sub-blocks 0..3 use the low
// 6 bits of bytes 0..7; sub-blocks 4..7 use nibbles of bytes 8..11 plus the top 2 bits of
// bytes 0..7.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

void pack_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* scales /* [12] */) {
  if (j < 4) {
    scales[j] = ls;
    scales[j + 4] = lm;
  } else {
    scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] |= uint8_t((ls >> 4) << 6);
    scales[j - 0] |= uint8_t((lm >> 4) << 6);
  }
}

// Shared first half of the Q4_K / Q5_K reference quantizers: per 32-element sub-block
// scale/min search, 6-bit packing of scales, then re-quantization of x against the
// rounded scales. Fills scales[12], d, dmin and L[256] (levels 0..nmax).
void quantize_k_superblock(const float* x, int nmax, float rmin, float rdelta, int nstep,
                           uint8_t* scales_out, f16_bits* d_out, f16_bits* dmin_out, uint8_t* L) {
  float mins[QK_K / 32];    // [8] f32: -min of each sub-block
  float scales[QK_K / 32];  // [8] f32: scale of each sub-block
  float weights[32];        // [32] f32: error weights of one sub-block
  uint8_t Laux[32];         // [32] u8: scratch levels
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 rdelta, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < QK_K / 32; ++j) {
    // The uint8_t truncation before the clamp mirrors ggml.
    uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
    uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    pack_scale_min_k4(j, ls, lm, scales_out);
  }
  *d_out = f32_to_f16(max_scale / 63.f);
  *dmin_out = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = f16_to_f32(*d_out) * sc;
    if (!d) continue;
    const float dm = f16_to_f32(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Weight quantizers (llama.cpp reference algorithms).

void quantize_q4_0(const float* x, block_q4_0* y, int64_t n) {
  for (int64_t i = 0; i < n / QK4_0; ++i, x += QK4_0) {
    float amax = 0.0f;  // largest magnitude
    float max = 0.0f;   // the signed value that has it
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    // The extreme value maps to level -8 exactly (its sign picks the scale's sign).
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      // Truncation of x+8.5 toward zero is ggml's rounding here (values are >= 0).
      const int q0 = std::min(15, int(int8_t(x[j] * id + 8.5f)));
      const int q1 = std::min(15, int(int8_t(x[QK4_0 / 2 + j] * id + 8.5f)));
      y[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_q8_0_ref(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = int8_t(std::round(x[j] * id));
  }
}

void quantize_q4_k(const float* x, block_q4_k* y, int64_t n) {
  uint8_t L[QK_K];  // [256] u8: levels 0..15
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    std::memset(&y[i], 0, sizeof(block_q4_k));
    quantize_k_superblock(x, 15, -1.f, 0.1f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < QK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, block_q5_k* y, int64_t n) {
  uint8_t L[QK_K];  // [256] u8: levels 0..31
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    std::memset(&y[i], 0, sizeof(block_q5_k));
    quantize_k_superblock(x, 31, -0.5f, 0.1f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
    // Low nibbles in qs (two sub-blocks of 32 per 32 bytes), 5th bits in qh: bit 2k / 2k+1
    // of qh[j] belong to elements 64k+j / 64k+32+j.
    uint8_t* ql = y[i].qs;
    uint8_t m1 = 1, m2 = 2;
    for (int base = 0; base < QK_K; base += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[base + j];
        int l2 = L[base + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          y[i].qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          y[i].qh[j] |= m2;
        }
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
      m1 = uint8_t(m1 << 2);
      m2 = uint8_t(m2 << 2);
    }
  }
}

void quantize_q6_k(const float* x, block_q6_k* y, int64_t n) {
  int8_t L[QK_K];         // [256] i8: levels 0..63 (level - 32 is the signed value)
  float scales[QK_K / 16];  // [16] f32: scale of each 16-element sub-block
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      scales[ib] = make_qx_quants_sq(16, 32, x + 16 * ib, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    std::memset(&y[i], 0, sizeof(block_q6_k));
    if (max_abs_scale < kGroupMaxEps) {
      y[i].d = f32_to_f16(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib)
      y[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = f16_to_f32(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    // Per 128 elements: ql holds low nibbles (elements l and l+64 share byte l, l+32 and
    // l+96 share byte l+32), qh holds the 2 high bits of elements l, l+32, l+64, l+96.
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l + 0], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
        ql[l + 0] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Dequantizers (same operation order as ggml's, so results are bit-identical to it).

void dequant_q4_0(const block_q4_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK4_0; ++i, y += QK4_0) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q8_0(const block_q8_0* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const float d = f16_to_f32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = x[i].qs[j] * d;
  }
}

void dequant_q4_k(const block_q4_k* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int j = 0, is = 0; j < QK_K; j += 64, q += 32, is += 2) {
      uint8_t sc, m;
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequant_q5_k(const block_q5_k* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    const float min = f16_to_f32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < QK_K; j += 64, ql += 32, is += 2) {
      uint8_t sc, m;
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = uint8_t(u1 << 2);
      u2 = uint8_t(u2 << 2);
    }
  }
}

void dequant_q6_k(const block_q6_k* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = f16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int base = 0; base < QK_K; base += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::f16: {
      const auto* h = static_cast<const f16_bits*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
    }
    case DType::bf16: {
      const auto* h = static_cast<const bf16_bits*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::q4_0:
      check_multiple(n, QK4_0, "dequantize Q4_0");
      return dequant_q4_0(static_cast<const block_q4_0*>(src), dst, n);
    case DType::q8_0:
      check_multiple(n, QK8_0, "dequantize Q8_0");
      return dequant_q8_0(static_cast<const block_q8_0*>(src), dst, n);
    case DType::q4_k:
      check_multiple(n, QK_K, "dequantize Q4_K");
      return dequant_q4_k(static_cast<const block_q4_k*>(src), dst, n);
    case DType::q5_k:
      check_multiple(n, QK_K, "dequantize Q5_K");
      return dequant_q5_k(static_cast<const block_q5_k*>(src), dst, n);
    case DType::q6_k:
      check_multiple(n, QK_K, "dequantize Q6_K");
      return dequant_q6_k(static_cast<const block_q6_k*>(src), dst, n);
    default:
      throw std::invalid_argument(std::string("cannot dequantize tensor type ") + dtype_name(t) +
                                  " (supported: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K)");
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::f16: {
      auto* h = static_cast<f16_bits*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::bf16: {
      auto* h = static_cast<bf16_bits*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::q4_0:
      check_multiple(n, QK4_0, "quantize Q4_0");
      return quantize_q4_0(src, static_cast<block_q4_0*>(dst), n);
    case DType::q8_0:
      check_multiple(n, QK8_0, "quantize Q8_0");
      return quantize_q8_0_ref(src, static_cast<block_q8_0*>(dst), n);
    case DType::q4_k:
      check_multiple(n, QK_K, "quantize Q4_K");
      return quantize_q4_k(src, static_cast<block_q4_k*>(dst), n);
    case DType::q5_k:
      check_multiple(n, QK_K, "quantize Q5_K");
      return quantize_q5_k(src, static_cast<block_q5_k*>(dst), n);
    case DType::q6_k:
      check_multiple(n, QK_K, "quantize Q6_K");
      return quantize_q6_k(src, static_cast<block_q6_k*>(dst), n);
    default:
      throw std::invalid_argument(std::string("cannot quantize to tensor type ") + dtype_name(t) +
                                  " (supported: F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K)");
  }
}

// Activation format for Q8_0 dot products. This follows ggml's x86 SIMD quantizer (the
// one llama.cpp's CPU backend actually runs for activations), not the weight reference:
// the multiplier is 127/amax and rounding is to nearest even.
void quantize_row_q8_0(const float* src, block_q8_0* dst, int64_t n) {
  check_multiple(n, QK8_0, "quantize_row_q8_0");
  for (int64_t i = 0; i < n / QK8_0; ++i, src += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    dst[i].d = f32_to_f16(d);
    for (int j = 0; j < QK8_0; ++j) dst[i].qs[j] = int8_t(round_half_even(src[j] * id));
  }
}

// Activation format for K-quant dot products (ggml's quantize_row_q8_K_ref): float scale,
// levels in [-127, 127] (the extreme value maps to -127 exactly so the sign fits), and the
// sum of every 16 levels, which the kernels use to apply the weight blocks' mins.
void quantize_row_q8_k(const float* src, block_q8_k* dst, int64_t n) {
  check_multiple(n, QK_K, "quantize_row_q8_k");
  for (int64_t i = 0; i < n / QK_K; ++i, src += QK_K) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(src[j]);
      if (ax > amax) {
        amax = ax;
        max = src[j];
      }
    }
    if (!amax) {
      std::memset(&dst[i], 0, sizeof(block_q8_k));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j)
      dst[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * src[j])));
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += dst[i].qs[j * 16 + ii];
      dst[i].bsums[j] = int16_t(sum);
    }
    dst[i].d = 1 / iscale;
  }
}

}  // namespace ws
