// The scalar form of ws::f32_to_f16_row for the fuzz and sanitizer builds, which link
// memory/state.cpp without the SIMD kernels. tensor/kernels.h promises the SIMD path is
// bit-identical to this loop, so the code under test behaves as in the real build.
#include "tensor/kernels.h"

namespace ws {

void f32_to_f16_row(const float* x, f16_bits* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(x[i]);
}

}  // namespace ws
