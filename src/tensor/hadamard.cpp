#include "tensor/hadamard.h"

#include <cmath>

namespace ws {

void hadamard_rotate(float* x, int64_t count, int32_t n) {
  const float scale = 1.0f / std::sqrt(float(n));  // ggml_gen_hadamard's 1/sqrtf(n)
  for (int64_t r = 0; r < count; ++r) {
    float* v = x + r * n;
    // Butterflies of span h: (a, b) -> (a + b, a - b); after log2(n) of them v = (sqrt(n) H) v
    // in the Sylvester order (entry (i, j) has the sign (-1)^popcount(i & j)).
    for (int32_t h = 1; h < n; h *= 2)
      for (int32_t i = 0; i < n; i += 2 * h)
        for (int32_t j = i; j < i + h; ++j) {
          const float a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
    for (int32_t i = 0; i < n; ++i) v[i] *= scale;
  }
}

}  // namespace ws
