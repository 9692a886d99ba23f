// Attention / scan vector kernels: SIMD close to the scalar reference, and bit-identical
// whatever the number of keys handed over per call (K/V pages are read in chunks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "memory/state.h"
#include "models/ops.h"
#include "tensor/attn_kernels.h"
#include "tensor/quant.h"
#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"
#include "tensor/threadpool.h"

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

// One query over the keys [first, last] of K/V rows [n][hd] (f32 or f16), through the
// kernels as ops::attention calls them, keys handed over in chunks of the given lengths
// (as from KV pages), in ggml's order or the online one (attn_kernels.h): returns out [hd].
std::vector<float> attend(const float* q, const void* k, const void* v, bool f16, int32_t hd, int32_t first,
                          int32_t last, const std::vector<int32_t>& chunks, const float* sink, Isa isa,
                          bool online = false) {
  const size_t elem = f16 ? 2 : 4;
  auto rows = [&](const void* base, int32_t j0, int32_t cnt) {
    return KvRows{static_cast<const uint8_t*>(base) + size_t(j0) * size_t(hd) * elem, size_t(hd), f16, cnt};
  };
  const int32_t b0 = first & ~15, b1 = (last + 16) & ~15;
  const int lanes = online ? 1 : 16;
  std::vector<float> s(size_t(b1 - b0), -INFINITY), acc(size_t(lanes * hd), 0.f), out(size_t(hd), 0.f);  // [blocks], [lanes][hd], [hd]
  // f(j, len) for the chunks of [from, to).
  auto each_chunk = [&](int32_t from, int32_t to, auto&& f) {
    size_t c = 0;
    for (int32_t j = from; j < to; ++c) {
      const int32_t len = std::min(to - j, chunks[c % chunks.size()]);
      f(j, len);
      j += len;
    }
  };
  each_chunk(first, last + 1, [&](int32_t j, int32_t len) { attn_scores(q, 1, rows(k, j, len), hd, 0.125f, s.data() + (j - b0), 0, online, isa); });
  const auto values = [&](int32_t from, int32_t to) {
    each_chunk(from, to, [&](int32_t j, int32_t len) { attn_accumulate(s.data() + (j - b0), 0, 1, rows(v, j, len), hd, j & 15, lanes, acc.data(), isa); });
  };
  if (!online) {
    attn_softmax(s.data(), b1 - b0, isa, sink);
    values(first, last + 1);
    attn_lanes_sum(acc.data(), hd, out.data(), isa);
    return out;
  }
  float m = sink ? *sink : -INFINITY, l = sink ? 1.f : 0.f;
  for (int32_t b = b0; b < b1; b += 16) {
    const float alpha = attn_online_block(s.data() + (b - b0), m, l, isa);
    for (float& a : acc) a *= alpha;
    values(std::max(b, first), std::min(b + 16, last + 1));
  }
  for (int32_t d = 0; d < hd; ++d) out[size_t(d)] = acc[size_t(d)] * (1.f / l);
  return out;
}

// How the keys arrive (KV pages, windows) changes no bit, on every ISA.
TEST(AttnKernels, ChunkedCallsAreBitIdentical) {
  for (int32_t hd : {64, 72, 13, 128}) {
    const int32_t n = 100;
    const auto q = random_vec(size_t(hd), 1), k = random_vec(size_t(n * hd), 2), v = random_vec(size_t(n * hd), 3);
    for (Isa isa : isas()) for (bool online : {false, true}) {
      const auto whole = attend(q.data(), k.data(), v.data(), false, hd, 5, n - 1, {n}, nullptr, isa, online);
      const auto pages = attend(q.data(), k.data(), v.data(), false, hd, 5, n - 1, {1, 7, 3, 16, 5}, nullptr, isa, online);
      EXPECT_EQ(whole, pages) << "hd " << hd << " online " << online;
    }
  }
}

// The AVX2 path computes the scalar reference's float sequence: the same bits, for f32 and
// f16 K/V, head dims with and without a tail past 64 (and past 8), ragged key ranges, sinks.
TEST(AttnKernels, SimdMatchesScalarBitForBit) {
  if (detected_isa() != Isa::avx2) GTEST_SKIP() << "no AVX2";
  for (int32_t hd : {64, 128, 80, 40, 13}) {
    const int32_t n = 150;
    const auto q = random_vec(size_t(hd), 4), kf = random_vec(size_t(n * hd), 5), vf = random_vec(size_t(n * hd), 6);
    std::vector<uint16_t> kh(kf.size()), vh(vf.size());  // [n][hd] f16 copies
    for (size_t i = 0; i < kf.size(); ++i) kh[i] = f32_to_f16(kf[i]), vh[i] = f32_to_f16(vf[i]);
    for (bool f16 : {false, true}) for (float sink : {NAN, -1.f, 9.f}) {
      const void* k = f16 ? static_cast<const void*>(kh.data()) : kf.data();
      const void* v = f16 ? static_cast<const void*>(vh.data()) : vf.data();
      const float* sk = std::isnan(sink) ? nullptr : &sink;
      for (auto [first, last] : {std::pair{0, n - 1}, std::pair{37, 101}, std::pair{16, 16}}) for (bool online : {false, true}) {
        const auto a = attend(q.data(), k, v, f16, hd, first, last, {n}, sk, Isa::scalar, online);
        const auto b = attend(q.data(), k, v, f16, hd, first, last, {n}, sk, Isa::avx2, online);
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "hd " << hd << " f16 " << f16 << " keys " << first << " online " << online;
      }
    }
  }
}

// The softmax sum and the output against float64 softmax(q.K)V on the stored values.
TEST(AttnKernels, MatchesFloat64Reference) {
  for (int32_t hd : {64, 80}) {
    const int32_t n = 90, first = 7, last = 83;
    const auto q = random_vec(size_t(hd), 7), k = random_vec(size_t(n * hd), 8), v = random_vec(size_t(n * hd), 9);
    for (const float* sink : {static_cast<const float*>(nullptr), &q[0]}) {
      std::vector<double> w(size_t(n), 0.0);
      double mx = sink ? double(*sink) : -1e300, sum = 0;
      for (int32_t j = first; j <= last; ++j) {
        double dot = 0;
        for (int32_t d = 0; d < hd; ++d) dot += double(q[size_t(d)]) * k[size_t(j * hd + d)];
        mx = std::max(mx, w[size_t(j)] = 0.125 * dot);
      }
      for (int32_t j = first; j <= last; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - mx));
      if (sink) sum += std::exp(double(*sink) - mx);
      for (Isa isa : isas()) for (bool online : {false, true}) {
        const auto out = attend(q.data(), k.data(), v.data(), false, hd, first, last, {n}, sink, isa, online);
        for (int32_t d = 0; d < hd; ++d) {
          double o = 0;
          for (int32_t j = first; j <= last; ++j) o += w[size_t(j)] / sum * v[size_t(j * hd + d)];
          ASSERT_NEAR(out[size_t(d)], o, 1e-5) << "hd " << hd << " d " << d << " online " << online;
        }
      }
    }
  }
}

// ggml's exp: within 3 ulp of exp (its polynomial is good to ~2) over the softmax's range, exact at 0, 0 far below.
TEST(AttnKernels, ExpAgreesWithExp) {
  EXPECT_EQ(expf_ggml(0.f), 1.f);
  EXPECT_EQ(expf_ggml(-0.f), 1.f);
  EXPECT_EQ(expf_ggml(-INFINITY), 0.f);
  EXPECT_EQ(expf_ggml(-200.f), 0.f);
  for (float x = -103.f; x <= 0.f; x += 0.0137f) {
    const double want = std::exp(double(x));
    const double ulp = std::max(double(std::nextafter(float(want), INFINITY) - float(want)), 1.4e-45);
    ASSERT_LE(std::fabs(double(expf_ggml(x)) - want), 3 * ulp) << x;
  }
}

// The grouped kernel (queries in the vector lanes) gives each query exactly the bits of the
// per-query kernels, whatever the group size, head dim, storage, visible range or sink.
TEST(AttnKernels, GroupedQueriesMatchPerQueryBitForBit) {
  if (!attn_group_supported()) GTEST_SKIP() << "no AVX2";
  // n: rows of positions 0 .. n - 1, within one block of the values pass and across several;
  // nq: within one vector of query lanes, across two, and two sets of them (online order).
  for (int32_t n : {150, 600}) for (int32_t hd : {16, 64, 80, 128, 256}) {
    const auto kf = random_vec(size_t(n * hd), 20), vf = random_vec(size_t(n * hd), 21);
    // K/V storage types, the same or not: the reference reads the widened f32 values.
    const std::pair<DType, DType> pairs[] = {{DType::f32, DType::f32}, {DType::f16, DType::f16}, {DType::q8_0, DType::q8_0},
                                             {DType::q4_0, DType::q4_0}, {DType::q8_0, DType::f16}, {DType::f16, DType::q4_0}};
    for (auto [kt, vt] : pairs) for (bool with_sink : {false, true}) for (int nq : {1, 5, 13, 16, 21, 32, 50, 64}) {
      if ((kt == DType::q8_0 || kt == DType::q4_0 || vt == DType::q4_0) && hd % 32 != 0) continue;  // whole blocks only
      std::vector<uint8_t> ks(row_bytes(kt, n * hd)), vs(row_bytes(vt, n * hd));  // [n] rows as stored
      std::vector<float> kw(kf.size()), vw(vf.size());                          // [n][hd] their f32 values
      quantize_row(kt, kf.data(), ks.data(), n * hd);
      quantize_row(vt, vf.data(), vs.data(), n * hd);
      dequantize_row(kt, ks.data(), kw.data(), n * hd);
      dequantize_row(vt, vs.data(), vw.data(), n * hd);
      const auto q = random_vec(size_t(nq * hd), 22);  // [nq][hd]
      std::vector<const float*> qs;
      std::vector<float*> outs;
      std::vector<int32_t> first, last;
      std::vector<float> sinks, out(size_t(nq * hd));  // [nq], [nq][hd]
      for (int i = 0; i < nq; ++i) {
        qs.push_back(q.data() + size_t(i * hd));
        outs.push_back(out.data() + size_t(i * hd));
        first.push_back(3 + i);  // every query sees keys
        last.push_back(n - 1 - i);
        sinks.push_back(i % 3 == 0 ? 9.f : 0.3f * float(i) - 1.f);
      }
      const int32_t p0 = 0, m = (n + 16) & ~15;  // the rows handed over: positions [0, m), rows past n null
      std::vector<const void*> krows(m, nullptr), vrows(m, nullptr);
      for (int32_t j = 3; j < n; ++j) {  // positions before 3 are not read by anyone
        krows[size_t(j)] = ks.data() + size_t(j) * row_bytes(kt, hd);
        vrows[size_t(j)] = vs.data() + size_t(j) * row_bytes(vt, hd);
      }
      const AttnGroup g{nq, qs.data(), first.data(), last.data(), with_sink ? sinks.data() : nullptr, outs.data(), p0};
      attn_group(g, krows.data(), vrows.data(), m, kt, vt, hd, 0.125f);
      for (int i = 0; i < nq; ++i) {
        const auto want = attend(q.data() + size_t(i * hd), kw.data(), vw.data(), false, hd, first[size_t(i)],
                                 last[size_t(i)], {64}, with_sink ? &sinks[size_t(i)] : nullptr, Isa::scalar,
                                 attn_online(kt, vt));
        ASSERT_EQ(0, std::memcmp(want.data(), outs[size_t(i)], size_t(hd) * 4))
            << "n " << n << " hd " << hd << " K " << dtype_name(kt) << " V " << dtype_name(vt) << " sink "
            << with_sink << " nq " << nq << " query " << i;
      }
    }
  }
}

// ops::attention over a paged KV store: a batch of queries (the grouped kernel) and the same
// tokens one at a time (decode: a token's query heads of one kv head share each slice of
// keys) give the per-query kernels' bits, for pages shorter and longer than a slice, windows,
// sinks and thread counts that split a GQA group across jobs.
void expect_batched_as_one_by_one(int32_t group, int32_t hd) {
  const int32_t n_kv = 2, n_head = n_kv * group, n = 700, batch = 5;
  const auto kf = random_vec(size_t(n * n_kv * hd), 30), vf = random_vec(size_t(n * n_kv * hd), 31);  // [n][n_kv][hd]
  const auto q = random_vec(size_t(batch * n_head * hd), 32);                                          // [batch][n_head][hd]
  const auto sinks = random_vec(size_t(n_head), 33);
  // K/V as F32 (ggml's order), F16, and q8_0 / q4_0 (the online order; widened slice by
  // slice; unrotated, so the reference can take the stored values as they are).
  const KvTypes types[] = {{KvType::f32, KvType::f32}, {KvType::f16, KvType::f16}, {KvType::q8_0, KvType::q4_0, false}};
  for (KvTypes kvt : types) for (int32_t page : {64, 600}) for (int32_t window : {0, 100}) for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    const ops::AttentionParams p{n_head, 0.125f, window, false, sinks.data()};
    FullKvState batched(n_kv, hd, kvt, page), single(n_kv, hd, kvt, page);
    batched.append(kf.data(), vf.data(), n);
    single.append(kf.data(), vf.data(), n - batch);
    std::vector<float> out_batch(q.size()), out_single(q.size());  // [batch][n_head][hd]
    ops::attention(q.data(), batched, batch, n - batch, p, out_batch.data(), pool);
    for (int32_t t = 0; t < batch; ++t) {
      const size_t row = size_t(n - batch + t) * size_t(n_kv * hd);
      single.append(kf.data() + row, vf.data() + row, 1);
      ops::attention(q.data() + size_t(t * n_head * hd), single, 1, n - batch + t, p, out_single.data() + size_t(t * n_head * hd), pool);
    }
    for (int32_t t = 0; t < batch; ++t) for (int32_t h = 0; h < n_head; ++h) {
      const int32_t pos = n - batch + t, g = h / group, first = window > 0 ? std::max(0, pos - window + 1) : 0;
      std::vector<float> ks(size_t(n * hd)), vs(ks.size());  // [n][hd] kv head g as stored, widened
      batched.read_keys(g, 0, n, ks.data());
      batched.read_values(g, 0, n, vs.data());
      const size_t at = size_t((t * n_head + h) * hd);
      const auto want = attend(q.data() + at, ks.data(), vs.data(), false, hd, first, pos, {64}, &sinks[size_t(h)], Isa::scalar,
                               attn_online(kv_dtype(kvt.k), kv_dtype(kvt.v)));
      ASSERT_EQ(0, std::memcmp(want.data(), out_batch.data() + at, size_t(hd) * 4)) << "batched: K " << kv_type_name(kvt.k) << " page " << page << " window " << window << " threads " << threads << " hd " << hd << " token " << t << " head " << h;
      ASSERT_EQ(0, std::memcmp(want.data(), out_single.data() + at, size_t(hd) * 4)) << "one by one: K " << kv_type_name(kvt.k) << " page " << page << " window " << window << " threads " << threads << " hd " << hd << " token " << t << " head " << h;
    }
  }
}

TEST(AttnKernels, AttentionIsTheSameBatchedOrOneByOne) {
  // GQA groups of up to 4 decode through the per-query kernels, which take a token's heads
  // together (queries in registers or reloaded, by head_dim and group).
  for (auto [group, hd] : {std::pair{3, 64}, {4, 128}, {2, 256}}) expect_batched_as_one_by_one(group, hd);
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

}  // namespace
}  // namespace ws
