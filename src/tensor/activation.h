// SIMD paths of the element-wise activations, row reductions and causal conv in models/ops
// (which holds the scalar formulas and dispatches by ISA).
#pragma once
#include <cstdint>

namespace ws::detail {

// x[i] = g[i] / (1 + expf_ggml(0 - g[i])) * x[i] for i < n with AVX2/FMA: the scalar
// swiglu's float operations, the same bits. Each element's result depends only on its own
// inputs (not on n or on alignment).
void swiglu_avx2(const float* g, float* x, int64_t n);
// x[i] = silu(x[i]): swiglu_avx2 with a factor of 1 (exact), so the same bits as ops::silu.
void silu_avx2(float* x, int64_t n);

// x[i] = gelu(g[i]) * x[i] for i < n, gelu as ops::gelu_ggml (0 for g <= -10, g for g >= 10,
// else table[f16 bits of g]), 8 lanes at a time with F16C and a gather: the same bits.
void gelu_table_gate_avx2(const float* table /* [65536] */, const float* g, float* x, int64_t n);

// ops::causal_conv for channels [c0, c) in blocks of 8, the scalar operations lane by lane
// (one fma per tap from 0, oldest tap first, then the bias): the same bits.
// Returns c, where it stopped: c1 rounded down to a block, or c0 when K is not 2..5.
int64_t causal_conv_avx2(const float* w, const float* bias, int64_t K, float* tail, const float* in,
                         int64_t in_stride, int64_t n, int64_t ch, int64_t c0, int64_t c1, float* out);

// ops::delta_rule_token for columns [0, dv rounded down to 8) of S, 8 columns at a time,
// a strip of columns through both passes while it is in L1; the scalar operations lane by
// lane (multiplies and adds unfused): the same bits. Returns where it stopped.
int64_t delta_rule_token_avx2(float* S, const float* k, const float* q, const float* v, float decay, float beta,
                              float scale, int64_t dk, int64_t dv, float* out);

// ops::sum_squares with two 4-lane double accumulators: the same partial sums, same bits.
double sum_squares_avx2(const float* x, int64_t n);
// The fixed tree that joins sum_squares' eight partial sums (part[k]: i % 8 == k).
inline double join_parts8(const double* part) {
  return ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
}

}  // namespace ws::detail
