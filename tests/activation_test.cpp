// The AVX2 SwiGLU against the scalar formula (std::exp): close everywhere, equal where the
// result is exact (0, saturation, infinities, NaN), and position independent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "models/ops.h"
#include "tensor/activation.h"
#include "tensor/kernels.h"
#include "tensor/threadpool.h"

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

// The causal conv (AVX2 in blocks of 8 channels, scalar for the rest) against the
// documented formula computed here: out[t][c] = ((0 + w0*x0) + w1*x1 ...) + bias, oldest tap
// first, bit for bit; the tail becomes the last K-1 inputs; in place works; and two batches
// give what one does.
TEST(Activation, CausalConvMatchesTheFormula) {
  std::mt19937 rng(14);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ThreadPool pool(2);
  for (int64_t K : {1, 2, 3, 4, 5, 6})
    for (int64_t ch : {3, 8, 21, 64})
      for (int64_t n : {1, 2, 3, 17})
        for (int variant = 0; variant < 3; ++variant) {  // 0: bias, strided input; 1: no bias; 2: in place
          const bool with_bias = variant == 0, in_place = variant == 2;
          const int64_t stride = in_place ? ch : ch + 5;
          const auto sz = [](int64_t v) { return static_cast<size_t>(v); };
          std::vector<float> w(sz(ch * K)), bias(sz(ch)), tail(sz((K - 1) * ch)), in(sz(n * stride));
          for (auto* v : {&w, &bias, &tail, &in})
            for (auto& x : *v) x = dist(rng);
          // The formula, from [tail ; in]: an fma per tap, oldest first, then the bias.
          std::vector<float> want(size_t(n * ch)), want_tail(tail.size());
          for (int64_t c = 0; c < ch; ++c) {
            std::vector<float> win;  // [K-1 + n]
            for (int64_t k = 0; k < K - 1; ++k) win.push_back(tail[size_t(k * ch + c)]);
            for (int64_t t = 0; t < n; ++t) win.push_back(in[size_t(t * stride + c)]);
            for (int64_t t = 0; t < n; ++t) {
              float s = 0.0f;
              for (int64_t k = 0; k < K; ++k) s = std::fma(win[size_t(t + k)], w[size_t(c * K + k)], s);  // ggml_ssm_conv, contracted
              if (with_bias) s += bias[size_t(c)];
              want[size_t(t * ch + c)] = s;
            }
            for (int64_t k = 0; k < K - 1; ++k) want_tail[size_t(k * ch + c)] = win[size_t(n + k)];
          }
          std::vector<float> got_tail = tail, got(size_t(n * ch)), buf = in;
          float* out = in_place ? buf.data() : got.data();
          ops::causal_conv(w.data(), with_bias ? bias.data() : nullptr, K, got_tail.data(), buf.data(), stride, n, ch,
                           out, pool);
          const std::string at = "K " + std::to_string(K) + " ch " + std::to_string(ch) + " n " + std::to_string(n) +
                                 " variant " + std::to_string(variant);
          EXPECT_EQ(std::vector<float>(out, out + n * ch), want) << at;
          EXPECT_EQ(got_tail, want_tail) << at;
          if (n < 2 || in_place) continue;
          // Split after the first token: the same outputs and tail.
          std::vector<float> split_tail = tail, split(size_t(n * ch));
          ops::causal_conv(w.data(), with_bias ? bias.data() : nullptr, K, split_tail.data(), in.data(), stride, 1, ch,
                           split.data(), pool);
          ops::causal_conv(w.data(), with_bias ? bias.data() : nullptr, K, split_tail.data(), in.data() + stride, stride,
                           n - 1, ch, split.data() + ch, pool);
          EXPECT_EQ(split, want) << at << " split";
          EXPECT_EQ(split_tail, want_tail) << at << " split";
        }
}

// The delta rule on a head as the four passes of its definition (decay; S^T k; update;
// S^T q), against ops::delta_rule_token (SIMD strips of 32 and 8 columns, a scalar tail):
// bit for bit, over several tokens so that the state carries.
TEST(Activation, DeltaRuleTokenMatchesTheDefinition) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const auto& [dk, dv] : {std::pair<int64_t, int64_t>{64, 139}, {16, 16}, {128, 128}, {8, 5}}) {
    std::vector<float> S(static_cast<size_t>(dk * dv)), ref(S.size());  // [dk][dv]
    for (auto& s : S) s = u(rng);
    ref = S;
    const size_t nk = static_cast<size_t>(dk), nv = static_cast<size_t>(dv);
    std::vector<float> k(nk), q(nk), v(nv), out(nv), want(nv), delta(nv);  // [dk], [dk], [dv] x 4
    for (int token = 0; token < 4; ++token) {
      for (auto* x : {&k, &q, &v})
        for (auto& e : *x) e = u(rng);
      const float decay = 0.5f + 0.5f * std::fabs(u(rng)), beta = std::fabs(u(rng)), scale = 0.125f;
      for (auto& s : ref) s *= decay;
      std::fill(delta.begin(), delta.end(), 0.f);
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) delta[size_t(j)] += ref[size_t(i * dv + j)] * k[size_t(i)];
      for (int64_t j = 0; j < dv; ++j) delta[size_t(j)] = (v[size_t(j)] - delta[size_t(j)]) * beta;
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) ref[size_t(i * dv + j)] += k[size_t(i)] * delta[size_t(j)];
      std::fill(want.begin(), want.end(), 0.f);
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t j = 0; j < dv; ++j) want[size_t(j)] += ref[size_t(i * dv + j)] * q[size_t(i)];
      for (auto& w : want) w *= scale;
      ops::delta_rule_token(S.data(), k.data(), q.data(), v.data(), decay, beta, scale, dk, dv, out.data());
      ASSERT_EQ(0, std::memcmp(out.data(), want.data(), want.size() * sizeof(float))) << dk << "x" << dv;
      ASSERT_EQ(0, std::memcmp(S.data(), ref.data(), ref.size() * sizeof(float))) << dk << "x" << dv;
    }
  }
}

}  // namespace
}  // namespace ws
