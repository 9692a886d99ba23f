// The AVX2 SwiGLU against the scalar formula (std::exp): close everywhere, equal where the
// result is exact (0, saturation, infinities, NaN), and position independent.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "models/ops.h"
#include "tensor/activation.h"
#include "tensor/kernels.h"

namespace ws {
namespace {

float swiglu_ref(float g, float x) { return g / (1.0f + std::exp(-g)) * x; }

TEST(Activation, SimdSwigluMatchesStdExp) {
  if (detected_isa() != Isa::avx2) GTEST_SKIP() << "no SIMD path on this CPU";
  std::mt19937 rng(7);
  std::vector<float> g, x;
  // Every exponent range SiLU sees, around the exp's clamps and overflow, and both signs.
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, 0.5f, -0.5f, 20.0f, -20.0f, 86.4f, -86.4f, 86.6f, -86.6f,
                  88.72f, -88.72f, 88.73f, -88.73f, 89.0f, -89.0f, 100.0f, -100.0f, 1e30f, -1e30f})
    g.push_back(v);
  std::uniform_real_distribution<float> wide(-95.0f, 95.0f);
  std::normal_distribution<float> typical(0.0f, 3.0f);
  for (int i = 0; i < 4000; ++i) g.push_back(i % 2 ? wide(rng) : typical(rng));
  for (size_t i = 0; i < g.size(); ++i) x.push_back(typical(rng));
  std::vector<float> y = x;
  detail::swiglu_avx2(g.data(), y.data(), int64_t(y.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const float want = swiglu_ref(g[i], x[i]);
    // The exp is within ~2e-7 relative (std::exp within half an ulp); the division and the
    // product add half an ulp each. Seen: 2.9e-7.
    EXPECT_NEAR(y[i], want, 5e-7f * std::fabs(want) + 1e-38f) << "g=" << g[i] << " x=" << x[i];
    // exp(-g) below e^-86.5 vanishes next to 1, above FLT_MAX it is inf: exact in both.
    if (g[i] > 86.5f || g[i] < -88.73f) {
      EXPECT_EQ(y[i], want) << "saturated at g=" << g[i];
    }
  }
}

TEST(Activation, SimdSwigluSpecialValues) {
  if (detected_isa() != Isa::avx2) GTEST_SKIP() << "no SIMD path on this CPU";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> g = {inf, -inf, nan, 1.0f, 0.0f, -1000.0f, 1000.0f, -inf, 2.0f};
  const std::vector<float> x = {2.0f, 2.0f, 1.0f, nan, inf, 3.0f, -3.0f, 0.0f, -inf};
  std::vector<float> y = x;
  detail::swiglu_avx2(g.data(), y.data(), int64_t(y.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const float want = swiglu_ref(g[i], x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << "g=" << g[i] << " x=" << x[i];
    } else {
      EXPECT_EQ(y[i], want) << "g=" << g[i] << " x=" << x[i];
      EXPECT_EQ(std::signbit(y[i]), std::signbit(want)) << "g=" << g[i] << " x=" << x[i];
    }
  }
}

// Threads hand swiglu ranges that start and end anywhere; an element's bits must not
// depend on that (cold and warm runs split the same tokens differently).
TEST(Activation, SwigluIsPositionIndependent) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  const int64_t n = 77;
  std::vector<float> g(n), x(n);
  for (int64_t i = 0; i < n; ++i) g[i] = dist(rng), x[i] = dist(rng);
  std::vector<float> whole = x;
  ops::swiglu(g.data(), whole.data(), n);
  for (int64_t start : {1, 3, 8, 13}) {
    for (int64_t len : {1, 5, 8, 19, 40}) {
      if (start + len > n) continue;
      std::vector<float> part(x.begin() + start, x.begin() + start + len);
      ops::swiglu(g.data() + start, part.data(), len);
      for (int64_t i = 0; i < len; ++i) EXPECT_EQ(part[i], whole[start + i]) << "start " << start << " len " << len;
    }
  }
}

// The vector GELU gate must give ops::gelu_ggml's bits (the table llama.cpp uses) times x:
// around the +-10 cut-offs, at zeros, infinities and NaN, on random values of every
// magnitude, and in the scalar-sized tail (odd n).
TEST(Activation, GeluGateMatchesScalarTable) {
  std::vector<float> g = {-10.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(-10.0f, -20.0f), 10.0f,
                          std::nextafter(10.0f, 0.0f), 0.0f, -0.0f, 1e-8f, -1e-8f, 65504.0f, 70000.0f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::uniform_real_distribution<float> expo(-30.0f, 5.0f);
  for (int i = 0; i < 5000; ++i) g.push_back(i % 2 ? dist(rng) : std::copysign(std::exp2(expo(rng)), dist(rng)));
  g.push_back(0.5f);  // odd length: a tail shorter than a vector
  const int64_t n = int64_t(g.size());
  std::vector<float> x(g.size());
  for (auto& v : x) v = dist(rng);
  x[1] = std::numeric_limits<float>::infinity();  // 0 * inf where gelu is 0
  std::vector<float> got = x;
  ops::gelu_gate(g.data(), got.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float want = ops::gelu_ggml(g[size_t(i)]) * x[size_t(i)];
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got[size_t(i)])) << "g " << g[size_t(i)];
    else EXPECT_EQ(got[size_t(i)], want) << "g " << g[size_t(i)] << " x " << x[size_t(i)];
  }
}

// The norms' double sum of squares: within double rounding of the exact sum, and on AVX2
// in exactly the documented order (eight partial sums by i % 8, then the fixed tree), so
// the SIMD and scalar paths give the same bits for every length.
TEST(Activation, SumSquaresOrderAndAccuracy) {
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n : {1, 5, 8, 13, 64, 960, 1001}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = dist(rng) * (rng() % 7 == 0 ? 1e3f : 1.0f);
    double part[8] = {};
    long double exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      part[i % 8] += double(x[size_t(i)]) * double(x[size_t(i)]);
      exact += (long double)x[size_t(i)] * x[size_t(i)];
    }
    const double ordered = ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
    const double got = ops::sum_squares(x.data(), n);
    EXPECT_EQ(got, ordered) << "n " << n;
    EXPECT_NEAR(got, double(exact), 1e-14 * double(exact)) << "n " << n;
    if (detected_isa() == Isa::avx2) {
      EXPECT_EQ(detail::sum_squares_avx2(x.data(), n), ordered) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace ws
