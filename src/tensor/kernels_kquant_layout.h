// The packed panel layout of K-quant matrices (Q4_K, Q5_K, Q6_K; kernels_kquant_panel.h):
// ISA-independent, shared by the SIMD units (which pack and compute, kernels_kquant_panel.h)
// and the driver (which reads rows back, see get_row). Internal to the including file.
//
// A panel holds P rows. Each 256-element super-block of the panel is a run of kVectors
// vectors of P 4-byte lanes, lane i holding 4 bytes of row i's GGUF block copied as they
// are, so the packed copy is as big as the original (Q6_K: +1%). Vector kF16 instead holds
// the f16 scales [d x P, dmin x P] (Q6_K: [d x P, unused]). The vectors are in the order
// the kernel reads them, so the hardware prefetcher sees one ascending stream:
//   Q4_K: 3 scale vectors, f16, 32 qs                                       (36)
//   Q5_K: 3 scale vectors, f16, 8 qh, 32 qs                                 (44)
//   Q6_K: 4 scale vectors, f16, per half h (elements 128h..): 8 qh, 16 ql   (53)
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace ws::detail {
namespace {

// Per type: bytes word_offset(v).. of each row's block go to packed vector v (v != kF16);
// kScales, kQh, kQs / kQl: the first vector of each field; kMaxLevel: the largest level.
struct KQ4 {
  using Block = block_q4_k;
  static constexpr bool kMins = true, kHigh = false;  // Q4_K: mins, no qh plane
  static constexpr int kScales = 0, kF16 = 3, kQs = 4, kVectors = 36, kMaxLevel = 15;
  static constexpr int kDOffset = 0, kDminOffset = 2;  // f16 byte offsets in the block
  static constexpr int word_offset(int v) { return v < kF16 ? 4 + 4 * v : 16 + 4 * (v - kQs); }
};
struct KQ5 {
  using Block = block_q5_k;
  static constexpr bool kMins = true, kHigh = true;
  static constexpr int kScales = 0, kF16 = 3, kQh = 4, kQs = 12, kVectors = 44, kMaxLevel = 31;
  static constexpr int kDOffset = 0, kDminOffset = 2;
  static constexpr int word_offset(int v) {
    return v < kF16 ? 4 + 4 * v : v < kQs ? 16 + 4 * (v - kQh) : 48 + 4 * (v - kQs);
  }
};
struct KQ6 {  // half h: qh vectors kQh + 24h.., ql vectors kQl + 24h..
  using Block = block_q6_k;
  static constexpr bool kMins = false;
  static constexpr int kScales = 0, kF16 = 4, kQh = 5, kQl = 13, kVectors = 53;
  static constexpr int kDOffset = 208, kDminOffset = -1;  // no mins
  static constexpr int word_offset(int v) {
    if (v < kF16) return 192 + 4 * v;
    const int h = (v - kQh) / 24, i = (v - kQh) % 24;
    return i < 8 ? 128 + 32 * h + 4 * i : 64 * h + 4 * (i - 8);
  }
};

// Calls f(block offset, packed offset, bytes) for every piece of row `lane`'s block in a
// packed super-block of P rows; together the pieces cover the whole block.
template <class K, class F>
inline void for_each_kq_piece(int P, int lane, F f) {
  for (int v = 0; v < K::kVectors; ++v)
    if (v != K::kF16) f(K::word_offset(v), (v * P + lane) * 4, 4);
  f(K::kDOffset, K::kF16 * P * 4 + lane * 2, 2);
  if (K::kDminOffset >= 0) f(K::kDminOffset, K::kF16 * P * 4 + (P + lane) * 2, 2);
}

// Row `row` of a packed matrix (panels of P rows, nsb super-blocks) as its GGUF blocks:
// dst[nsb * sizeof(K::Block)].
template <class K>
void unpack_kq_row(const uint8_t* packed, int P, int64_t nsb, int64_t row, uint8_t* dst) {
  const int64_t sb_bytes = int64_t(K::kVectors) * P * 4;
  const uint8_t* src = packed + (row / P) * nsb * sb_bytes;
  for (int64_t s = 0; s < nsb; ++s, src += sb_bytes, dst += sizeof(typename K::Block))
    for_each_kq_piece<K>(P, int(row % P),
                         [&](int b, int p, int n) { __builtin_memcpy(dst + b, src + p, size_t(n)); });
}

}  // namespace
}  // namespace ws::detail
