// Attention / scan vector kernels: SIMD close to the scalar reference, and bit-identical
// whatever the number of keys handed over per call (K/V pages are read in chunks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/attn_kernels.h"
#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

namespace ws {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);  // [n] f32
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<Isa> isas() {
  std::vector<Isa> v = {Isa::scalar};
  if (detected_isa() == Isa::avx2) v.push_back(Isa::avx2);
  return v;
}

TEST(AttnKernels, ChunkedCallsAreBitIdentical) {
  for (int32_t hd : {64, 72, 13}) {
    const int32_t n = 100, stride = 3 * hd;
    const auto q = random_vec(size_t(hd), 1), kv = random_vec(size_t(n * stride), 2), p = random_vec(size_t(n), 3);
    for (Isa isa : isas()) {
      std::vector<float> s_one(n), s_chunk(n), o_one(size_t(hd), 0.f), o_chunk(size_t(hd), 0.f);
      attn_scores(q.data(), {kv.data(), size_t(stride), false, n}, hd, 0.125f, s_one.data(), isa);
      attn_accumulate(p.data(), {kv.data(), size_t(stride), false, n}, hd, o_one.data(), isa);
      for (int32_t j = 0; j < n;) {  // uneven chunks, like pages cut by a window
        const int32_t len = std::min(n - j, 1 + j % 7);
        const float* base = kv.data() + size_t(j) * stride;
        attn_scores(q.data(), {base, size_t(stride), false, len}, hd, 0.125f, s_chunk.data() + j, isa);
        attn_accumulate(p.data() + j, {base, size_t(stride), false, len}, hd, o_chunk.data(), isa);
        j += len;
      }
      EXPECT_EQ(s_one, s_chunk) << "hd " << hd;
      EXPECT_EQ(o_one, o_chunk) << "hd " << hd;
    }
  }
}

TEST(AttnKernels, SimdMatchesScalar) {
  if (detected_isa() != Isa::avx2) GTEST_SKIP() << "no AVX2";
  const int32_t hd = 128, n = 50;
  const auto q = random_vec(size_t(hd), 4), kv = random_vec(size_t(n * hd), 5);
  std::vector<uint16_t> kv16(kv.size());  // [n][hd] f16 copy
  for (size_t i = 0; i < kv.size(); ++i) kv16[i] = f32_to_f16(kv[i]);
  for (bool f16 : {false, true}) {
    const void* data = f16 ? static_cast<const void*>(kv16.data()) : kv.data();
    std::vector<float> s0(n), s1(n), o0(size_t(hd), 0.f), o1(size_t(hd), 0.f);
    attn_scores(q.data(), {data, size_t(hd), f16, n}, hd, 0.1f, s0.data(), Isa::scalar);
    attn_scores(q.data(), {data, size_t(hd), f16, n}, hd, 0.1f, s1.data(), Isa::avx2);
    for (int32_t j = 0; j < n; ++j) EXPECT_NEAR(s0[j], s1[j], 1e-4f);
    std::vector<float> e0 = s0, e1 = s0;
    const float m = *std::max_element(s0.begin(), s0.end());
    EXPECT_NEAR(softmax_exp(e0.data(), n, m, Isa::scalar), softmax_exp(e1.data(), n, m, Isa::avx2), 1e-5f * n);
    for (int32_t j = 0; j < n; ++j) EXPECT_NEAR(e0[j], e1[j], 1e-6f);
    for (float sink : {m - 3.f, m + 2.f}) {  // a sink below and above the largest score
      std::vector<float> x0 = s0, x1 = s0;
      const float ms = std::max(m, sink);
      const float sum0 = softmax_exp(x0.data(), n, ms, Isa::scalar, &sink);
      const float sum1 = softmax_exp(x1.data(), n, ms, Isa::avx2, &sink);
      double want = std::exp(double(sink) - ms);  // float64: the keys' exps plus the sink's
      for (int32_t j = 0; j < n; ++j) want += std::exp(double(s0[j]) - ms);
      EXPECT_NEAR(sum0, want, 1e-5 * n);
      EXPECT_NEAR(sum1, want, 1e-5 * n);
      for (int32_t j = 0; j < n; ++j) EXPECT_NEAR(x0[j], x1[j], 1e-6f);
    }
    attn_accumulate(e0.data(), {data, size_t(hd), f16, n}, hd, o0.data(), Isa::scalar);
    attn_accumulate(e0.data(), {data, size_t(hd), f16, n}, hd, o1.data(), Isa::avx2);
    for (int32_t d = 0; d < hd; ++d) EXPECT_NEAR(o0[d], o1[d], 1e-4f);
  }
}

TEST(AttnKernels, SsmRowUpdateMatchesScalar) {
  if (detected_isa() != Isa::avx2) GTEST_SKIP() << "no AVX2";
  for (int64_t n : {16, 128, 37}) {
    auto s0 = random_vec(size_t(n), 6), s1 = s0;
    const auto b = random_vec(size_t(n), 7), c = random_vec(size_t(n), 8);
    const float y0 = ssm_row_update(s0.data(), b.data(), c.data(), 0.9f, 0.3f, n, Isa::scalar);
    const float y1 = ssm_row_update(s1.data(), b.data(), c.data(), 0.9f, 0.3f, n, Isa::avx2);
    EXPECT_NEAR(y0, y1, 1e-4f);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(s0[size_t(i)], s1[size_t(i)], 1e-6f);
  }
}

// Grouped attention: each query matches a float64 softmax(q.K)V over its own visible keys,
// and its bits do not depend on the other queries in the group (nor on how the keys
// arrive: here in two spans, as from two KV pages).
TEST(AttnKernels, GroupedQueriesMatchReferenceAndAreGroupIndependent) {
  for (int32_t hd : {16, 64, 80, 256}) {
    if (!attn_group_supported(hd)) GTEST_SKIP() << "no AVX2";
    for (bool f16 : {false, true}) for (bool with_sink : {false, true}) {
      const int32_t n = 150, split = 61;  // keys, first span
      const auto kf = random_vec(size_t(n * hd), 20), vf = random_vec(size_t(n * hd), 21);
      std::vector<uint16_t> kh(kf.size()), vh(vf.size());  // [n][hd] f16 copies
      for (size_t i = 0; i < kf.size(); ++i) kh[i] = f32_to_f16(kf[i]), vh[i] = f32_to_f16(vf[i]);
      const void* kd = f16 ? static_cast<const void*>(kh.data()) : kf.data();
      const void* vd = f16 ? static_cast<const void*>(vh.data()) : vf.data();
      const size_t elem = f16 ? 2 : 4;
      auto span = [&](const void* base, int32_t j0, int32_t cnt) {
        return KvRows{static_cast<const uint8_t*>(base) + size_t(j0) * hd * elem, size_t(hd), f16, cnt};
      };
      const int nq = 13;
      const auto q = random_vec(size_t(nq * hd), 22);  // [nq][hd]
      int32_t lo[16], hi[16];
      for (int i = 0; i < 16; ++i) lo[i] = i < nq ? 3 * i : 1, hi[i] = i < nq ? n - 1 - 5 * i : 0;
      float sinks[16];  // per query: query 0's far above every score (it takes the max), the rest among them
      for (int i = 0; i < 16; ++i) sinks[i] = i == 0 ? 8.f : 0.3f * float(i) - 1.f;
      auto run = [&](int i0, int cnt, std::vector<float>& out /* [nq][hd] */) {
        std::vector<float> qt(size_t(hd) * 16, 0.f), s(size_t(n) * 16);  // [hd][16], [n][16]
        int32_t l[16], h[16];
        float snk[16];  // [16] the lanes' sink logits
        float* outs[16];
        for (int i = 0; i < 16; ++i) l[i] = i < cnt ? lo[i0 + i] : 1, h[i] = i < cnt ? hi[i0 + i] : 0;
        for (int i = 0; i < 16; ++i) snk[i] = i < cnt ? sinks[i0 + i] : 0.f;
        for (int i = 0; i < cnt; ++i) {
          for (int32_t d = 0; d < hd; ++d) qt[size_t(d) * 16 + i] = q[size_t((i0 + i) * hd + d)];
          outs[i] = out.data() + size_t(i0 + i) * hd;
          std::fill(outs[i], outs[i] + hd, 0.f);
        }
        attn_group_scores(qt.data(), cnt, span(kd, 0, split), hd, 0.125f, s.data());
        attn_group_scores(qt.data(), cnt, span(kd, split, n - split), hd, 0.125f, s.data() + split * 16);
        attn_group_softmax(s.data(), n, l, h, with_sink ? snk : nullptr);
        attn_group_accumulate(s.data(), cnt, span(vd, 0, split), hd, outs);
        attn_group_accumulate(s.data() + split * 16, cnt, span(vd, split, n - split), hd, outs);
      };
      std::vector<float> grouped(size_t(nq * hd)), alone(size_t(nq * hd));  // [nq][hd]
      run(0, nq, grouped);
      for (int i = 0; i < nq; ++i) run(i, 1, alone);
      ASSERT_EQ(0, std::memcmp(grouped.data(), alone.data(), grouped.size() * 4)) << "hd " << hd << " sink " << with_sink;
      std::vector<float> half(size_t(nq * hd), 0.f);  // a group of 6: lanes form, one 8-lane half on AVX2
      run(0, 6, half);
      ASSERT_EQ(0, std::memcmp(half.data(), alone.data(), size_t(6 * hd) * 4)) << "hd " << hd << " sink " << with_sink;
      for (int i = 0; i < nq; ++i) {  // float64 reference on the stored (rounded) K/V
        auto kv = [&](const std::vector<float>& f, const std::vector<uint16_t>& h, size_t idx) {
          return f16 ? double(f16_to_f32(h[idx])) : double(f[idx]);
        };
        std::vector<double> w(size_t(n), 0.0);
        double mx = with_sink ? double(sinks[i]) : -1e300, sum = 0;  // the max includes the sink
        for (int32_t j = lo[i]; j <= hi[i]; ++j) {
          double dot = 0;
          for (int32_t d = 0; d < hd; ++d) dot += double(q[size_t(i * hd + d)]) * kv(kf, kh, size_t(j * hd + d));
          w[size_t(j)] = 0.125 * dot;
          mx = std::max(mx, w[size_t(j)]);
        }
        for (int32_t j = lo[i]; j <= hi[i]; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - mx));
        if (with_sink) sum += std::exp(double(sinks[i]) - mx);
        for (int32_t d = 0; d < hd; ++d) {
          double o = 0;
          for (int32_t j = lo[i]; j <= hi[i]; ++j) o += w[size_t(j)] / sum * kv(vf, vh, size_t(j * hd + d));
          ASSERT_NEAR(grouped[size_t(i * hd + d)], o, 1e-4)
              << "hd " << hd << " sink " << with_sink << " query " << i << " d " << d;
        }
      }
    }
  }
}

// The AVX2 and AVX-512 group kernels promise one float sequence: a machine with AVX-512
// runs both on the same inputs (decode-sized and batch-sized groups, f32 and f16 K/V,
// ragged visible ranges, with and without sinks) and they must agree bit for bit.
TEST(AttnKernels, GroupedKernelsAgreeAcrossIsas) {
  if (!attn_group_supported(64) || !detail::cpu_has_vnni()) GTEST_SKIP() << "needs AVX-512 to compare with";
  for (int32_t hd : {16, 64, 256}) {
    for (bool f16 : {false, true}) {
      for (int nq : {1, 3, 4, 7, 9, 16}) for (bool with_sink : {false, true}) {
        const int32_t n = 77;
        const auto kf = random_vec(size_t(n * hd), 30), vf = random_vec(size_t(n * hd), 31);
        std::vector<uint16_t> kh(kf.size()), vh(vf.size());  // [n][hd] f16 copies
        for (size_t i = 0; i < kf.size(); ++i) kh[i] = f32_to_f16(kf[i]), vh[i] = f32_to_f16(vf[i]);
        const KvRows k{f16 ? static_cast<const void*>(kh.data()) : kf.data(), size_t(hd), f16, n};
        const KvRows v{f16 ? static_cast<const void*>(vh.data()) : vf.data(), size_t(hd), f16, n};
        const auto qt = random_vec(size_t(hd) * 16, 32);  // [hd][16] (all lanes set: unused ones must not matter)
        int32_t lo[16], hi[16];
        for (int i = 0; i < 16; ++i) lo[i] = i < nq ? i % 5 : 1, hi[i] = i < nq ? n - 1 - 2 * i : 0;
        float sinks[16];  // [16] per-lane sink logits: some above every score, some among them
        for (int i = 0; i < 16; ++i) sinks[i] = i % 3 == 0 ? 6.f : 0.5f * float(i % 7) - 1.f;
        const float* sink = with_sink ? sinks : nullptr;
        std::vector<float> out_avx2(size_t(nq * hd), 0.f), out_avx512 = out_avx2;  // [nq][hd]
        auto run = [&](bool avx512, std::vector<float>& out) {
          std::vector<float> s(size_t(n) * 16);  // [n][16]
          float* outs[16];
          for (int i = 0; i < nq; ++i) outs[i] = out.data() + size_t(i) * hd;
          if (avx512) {
            detail::attn_group_scores_avx512(qt.data(), nq, k, hd, 0.2f, s.data());
            detail::attn_group_softmax_avx512(s.data(), n, lo, hi, sink);
            detail::attn_group_accumulate_avx512(s.data(), nq, v, hd, outs);
          } else {
            detail::attn_group_scores_avx2(qt.data(), nq, k, hd, 0.2f, s.data());
            detail::attn_group_softmax_avx2(s.data(), n, lo, hi, sink);
            detail::attn_group_accumulate_avx2(s.data(), nq, v, hd, outs);
          }
        };
        run(false, out_avx2);
        run(true, out_avx512);
        ASSERT_EQ(0, std::memcmp(out_avx2.data(), out_avx512.data(), out_avx2.size() * 4))
            << "hd " << hd << " f16 " << f16 << " nq " << nq << " sink " << with_sink;
      }
    }
  }
}

}  // namespace
}  // namespace ws
