// exp(x) in float as ggml's AVX-512 ggml_v_expf computes it, the exp of llama.cpp's softmax
// and SiLU: x = n ln2 + b with n = round(x / ln2) (ln2 subtracted in two parts), a degree-5
// polynomial j ~ e^b, then j * 2^n rounded once (_mm512_scalef_ps). Within ~2 ulp of exp;
// 0 below x ~ -103.9 (|n| > 192 gives 0 or inf outright). The scalar reference of
// expf_ggml8 (simd_avx2.h): the same operations, so the same bits.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ws {

// 2^e for integral e in [-126, 127].
inline float pow2_exact(int e) {
  const uint32_t bits = uint32_t(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float expf_ggml(float x) {
  if (std::isnan(x)) return x;
  const float r = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, r);
  const float n = z - r;
  if (std::fabs(n) > 192.f) return n <= 0.f ? 0.f : INFINITY;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  // j * 2^n with one rounding: when 2^n is not a normal float, j * 2^(n - m) (exact) * 2^m.
  const int e = int(n), m = e < -126 ? -126 : e > 127 ? 127 : 0;
  return j * pow2_exact(e - m) * pow2_exact(m);
}

}  // namespace ws
