// SIMD paths of the element-wise activations in models/ops (which holds the scalar
// formulas and dispatches by ISA).
#pragma once
#include <cstdint>

namespace ws::detail {

// x[i] = g[i] / (1 + exp(-g[i])) * x[i] for i < n with AVX2/FMA: the scalar swiglu's float
// operations, with an exp polynomial of relative error ~2e-7 instead of std::exp. Each
// element's result depends only on its own inputs (not on n or on alignment).
void swiglu_avx2(const float* g, float* x, int64_t n);

}  // namespace ws::detail
