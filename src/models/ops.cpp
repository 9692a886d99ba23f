#include "models/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tensor/activation.h"
#include "tensor/attn_kernels.h"
#include "tensor/hadamard.h"

namespace ws::ops {

double sum_squares(const float* x, int64_t n) {
  if (detected_isa() == Isa::avx2) return detail::sum_squares_avx2(x, n);
  double part[8] = {};  // part[k]: sum over i % 8 == k, in order
  for (int64_t i = 0; i < n; ++i) part[i % 8] += double(x[i]) * x[i];
  return detail::join_parts8(part);
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    const double sum = sum_squares(xr, d);  // double like ggml, so long rows lose nothing
    const float mean = float(sum / double(d));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < d; ++i) yr[i] = w ? (xr[i] * scale) * w[i] : xr[i] * scale;
  }
}

void swiglu(const float* g, float* x, int64_t n) {
  if (detected_isa() == Isa::avx2) return detail::swiglu_avx2(g, x, n);
  for (int64_t i = 0; i < n; ++i) x[i] = silu(g[i]) * x[i];
}

void silu_rows(float* x, int64_t n, int64_t d, ThreadPool& pool) {
  const bool simd = detected_isa() == Isa::avx2;
  pool.parallel_for(n, ThreadPool::rows_grain(d), [&](int64_t t0, int64_t t1) {
    float* v = x + t0 * d;
    const int64_t m = (t1 - t0) * d;
    if (simd) return detail::silu_avx2(v, m);
    for (int64_t i = 0; i < m; ++i) v[i] = silu(v[i]);
  });
}

void l2_norm(float* x, int64_t n, int64_t d, float eps) {
  for (int64_t r = 0; r < n; ++r) {
    float* v = x + r * d;
    const double sum = sum_squares(v, d);  // double like ggml's row reductions
    const float scale = 1.0f / std::max(float(std::sqrt(sum)), eps);
    for (int64_t i = 0; i < d; ++i) v[i] *= scale;
  }
}

void add_scaled(float* a, const float* b, int64_t n, float scale) {
  if (scale == 1.f) {
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] += b[i] * scale;
  }
}

namespace {

// ggml's YaRN correction dimension: the pair index whose wavelength fits n_rot_beta turns
// into the original context, in f32 as ggml computes it.
float yarn_corr_dim(int32_t n_rot, int32_t n_orig, float beta, float base) {
  return float(n_rot) * std::log(float(n_orig) / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(base));
}

}  // namespace

void read_rope_scaling(const gguf::File& f, const std::string& arch, RopeParams& r) {
  if (const auto* t = optional_tensor(f, "rope_freqs.weight")) r.freq_factors = vector_f32(f, t->name, r.n_rot / 2);
  const std::string type = f.get_string(arch + ".rope.scaling.type");
  if (type.empty() || type == "none") return;
  const double factor = f.get_float(arch + ".rope.scaling.factor", 0.0);
  if (type != "linear" && type != "yarn")
    f.fail(arch + ".rope.scaling.type '" + type + "' is not supported (supported: none, linear, yarn)");
  if (factor <= 0.0) return;  // llama.cpp: no factor, no scaling
  r.freq_scale = 1.0f / float(factor);
  if (type == "yarn") {
    r.yarn = true;
    r.yarn_orig_ctx = int32_t(f.get_int(arch + ".rope.scaling.original_context_length", 0));
    if (r.yarn_orig_ctx <= 0) f.fail(arch + ".rope.scaling.original_context_length is required for YaRN");
  }
}

namespace {

// The angle-independent parts of RoPE: the step between pairs and YaRN's ramp and magnitude.
struct RopeFrame {
  float theta_scale = 1.f;
  float corr_lo = 0.f, corr_hi = 0.f, mscale = 1.f;
  explicit RopeFrame(const RopeParams& r) : theta_scale(std::pow(r.base, -2.0f / float(r.n_rot))) {
    if (!r.yarn) return;
    corr_lo = std::max(0.0f, std::floor(yarn_corr_dim(r.n_rot, r.yarn_orig_ctx, r.yarn_beta_fast, r.base)));
    corr_hi = std::min(float(r.n_rot - 1), std::ceil(yarn_corr_dim(r.n_rot, r.yarn_orig_ctx, r.yarn_beta_slow, r.base)));
    mscale = 1.0f + 0.1f * std::log(1.0f / r.freq_scale);
  }
  // cos and sin of pair i whose unscaled angle is theta (ggml's rope_yarn).
  void cos_sin(const RopeParams& r, int32_t i, float theta, float* cs) const {
    const float extrap = r.freq_factors ? theta / r.freq_factors[i] : theta;
    float th = r.freq_scale * extrap;
    if (r.yarn) {
      const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, (float(i) - corr_lo) / std::max(0.001f, corr_hi - corr_lo)));
      th = th * (1.0f - ramp) + extrap * ramp;
    }
    cs[0] = std::cos(th) * mscale;
    cs[1] = std::sin(th) * mscale;
  }
};

// Rotates the first n_rot dims of every head of one token: x [n_heads][head_dim] by
// cos_sin [n_rot/2][2]; NORM rotates adjacent pairs, NEOX (and M-RoPE) pairs half apart.
void rotate_heads(float* x, int32_t n_heads, int32_t head_dim, const RopeParams& r, const float* cos_sin) {
  const int32_t half = r.n_rot / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const int32_t a = r.type == RopeType::norm ? 2 * i : i;
      const int32_t b = r.type == RopeType::norm ? 2 * i + 1 : i + half;
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float x0 = v[a], x1 = v[b];
      // ggml's rope as GCC contracts it (FMA targets): the first product fused, the second
      // rounded. One ulp here flips BF16 roundings downstream (issue 29).
      v[a] = std::fma(x0, c, -(x1 * s));
      v[b] = std::fma(x0, s, x1 * c);
    }
  }
}

}  // namespace

void rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t pos0, const RopeParams& r) {
  if (r.type == RopeType::none || r.n_rot <= 0) return;
  const RopeFrame frame(r);
  std::vector<float> cos_sin(static_cast<size_t>(r.n_rot));  // [n_rot/2][2]: cos, sin per rotated pair
  for (int64_t t = 0; t < n_tokens; ++t) {
    // theta_i = pos * theta_scale^i, built by repeated multiplication in f32 as GGUF
    // runtimes do, so the angles match theirs to the last bit.
    float theta = float(pos0 + t);
    for (int32_t i = 0; i < r.n_rot / 2; ++i) {
      frame.cos_sin(r, i, theta, cos_sin.data() + 2 * i);
      theta *= frame.theta_scale;
    }
    rotate_heads(x + t * n_heads * head_dim, n_heads, head_dim, r, cos_sin.data());
  }
}

void rope_multi(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                const RopeParams& r) {
  const int32_t n_rot = r.n_rot;
  if (r.type == RopeType::none || n_rot <= 0) return;
  const auto& sec = r.sections;
  const int32_t n_sect = sec[0] + sec[1] + sec[2] + sec[3];
  if (n_sect <= 0) throw std::invalid_argument("M-RoPE needs rope.dimension_sections");
  std::vector<int32_t> comp(static_cast<size_t>(n_rot / 2));  // [n_rot/2] position component of each pair
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    const int32_t s = i % n_sect;
    comp[size_t(i)] = s % 3 == 1 && s < 3 * sec[1]   ? 1
                      : s % 3 == 2 && s < 3 * sec[2] ? 2
                      : s % 3 == 0 && s < 3 * sec[0] ? 0
                                                     : 3;
  }
  const RopeFrame frame(r);
  RopeParams neox = r;  // M-RoPE rotates pairs half a rotation apart
  neox.type = RopeType::neox;
  std::vector<float> cos_sin(static_cast<size_t>(n_rot));  // [n_rot/2][2]: cos, sin per rotated pair
  for (int64_t t = 0; t < n_tokens; ++t) {
    // All four components advance together, so each pair's angle is built exactly as rope() builds it.
    float theta[4] = {float(pos[4 * t]), float(pos[4 * t + 1]), float(pos[4 * t + 2]), float(pos[4 * t + 3])};
    for (int32_t i = 0; i < n_rot / 2; ++i) {
      frame.cos_sin(r, i, theta[comp[size_t(i)]], cos_sin.data() + 2 * i);
      for (float& c : theta) c *= frame.theta_scale;
    }
    rotate_heads(x + t * n_heads * head_dim, n_heads, head_dim, neox, cos_sin.data());
  }
}

namespace {

constexpr int kGroupQueries = 512;   // queries per attn_group call (AVX-512's online kernel widens each K/V row once for all
                                     // of them; the query-lane kernels take 64 or 32 per pass over the keys)
constexpr int kGroupMinQueries = 5;  // below this many per kv head (decode), the per-query kernels
// (attend_heads: the K/V of a slice read, and widened if quantized, once for the token's
// heads; attn_bench at 16k, 2 threads, grouped vs per-query: a GQA group of 4, hd 256, 9.0
// vs 3.9 ms; 2 tokens of a group of 2, 4.3 vs 3.6; q8_0 K/V, group of 2, 4.1 vs 2.4; from 8
// queries on the grouped kernel is as fast or faster).

// The key (or value) rows of kv head g in a span read from kv: in place for f32 and f16,
// else (q8_0, q4_0) dequantized into `widened` ([r.n][head_dim] f32), the values the
// grouped kernel reads too.
KvRows head_rows(const KvStore& kv, const KvStore::RowSpan& r, bool keys, int32_t g, std::vector<float>& widened) {
  const KvType type = keys ? kv.types().k : kv.types().v;
  const size_t hb = kv.head_bytes(keys), hd = size_t(kv.head_dim());
  const uint8_t* base = (keys ? r.k : r.v) + size_t(g) * r.head_stride * hb;
  if (type == KvType::f32 || type == KvType::f16) return {base, r.row_stride * hd, type == KvType::f16, r.n};
  widened.resize(size_t(r.n) * hd);
  widen_rows(kv_dtype(type), base, r.row_stride * hb, r.n, int32_t(hd), widened.data(), detected_isa());
  return {widened.data(), hd, false, r.n};
}

// Asks for the cache lines of kv head g's K (keys) or V rows of the positions [p0, p1): the
// pages are separate allocations of a few KB per head, too short for the hardware
// prefetcher to get going.
void prefetch_head_rows(const KvStore& kv, bool keys, int32_t g, int32_t p0, int32_t p1) {
  const size_t hb = kv.head_bytes(keys);
  for (int32_t p = p0; p < p1;) {
    const KvStore::RowSpan r = kv.rows(p, p1);
    const uint8_t* base = (keys ? r.k : r.v) + size_t(g) * r.head_stride * hb;
    for (int32_t i = 0; i < r.n; ++i)
      for (size_t b = 0; b < hb; b += 64) __builtin_prefetch(base + size_t(i) * r.row_stride * hb + b);
    p += r.n;
  }
}

// Query heads h0 .. h0 + nq - 1 of one token, all reading kv head g: out_i[hd] =
// softmax(scale * q_i.K) V over the keys [first, last], read in place page by page, in
// llama.cpp's float sequence (attn_kernels.h; K and V f32) per head; sinks: the heads' sink logits (one
// more softmax entry that attends to nothing), or null. The keys go by in slices of
// kSliceKeys and each slice serves all nq heads while it is in the cache (at depth K/V
// come from memory, and a GQA group would read them once per query head otherwise); on
// AVX-512 each row is also loaded and widened once for all nq heads.
// Slicing changes no bits: a score depends on its key alone, and the values reach each
// lane in key order whatever the slices. q, out: [nq][hd] f32 (consecutive heads);
// scores: [nq][stride] f32, stride >= the keys in whole 16-blocks around first..last;
// acc: [nq][16][hd] f32 lane sums.
constexpr int32_t kSliceKeys = 256;
void attend_heads(const float* q, int nq, const KvStore& kv, int32_t g, int32_t first, int32_t last, float scale,
                  const float* sinks, float* scores, size_t stride, float* acc, std::vector<float>& widened,
                  float* out, Isa isa) {
  const int32_t hd = kv.head_dim();
  const int32_t b0 = first & ~15, b1 = (last + 16) & ~15;  // the 16-position blocks of the softmax sum
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const auto slice = [&](int32_t p) {
    KvStore::RowSpan r = kv.rows(p, last + 1);
    r.n = std::min(r.n, kSliceKeys);
    return r;
  };
  // work(p, rows) for each slice of K (keys) or V in order; the next slice's rows are asked
  // for while one is worked on: pages are separate allocations of a few KB per head, too
  // short for the hardware prefetcher to get going (asking further ahead made no difference).
  const auto each_slice = [&](bool keys, auto&& work) {
    KvStore::RowSpan r = slice(first);
    for (int32_t p = first;;) {
      const int32_t next = p + r.n;
      KvStore::RowSpan after;
      if (next <= last) {
        after = slice(next);
        prefetch_head_rows(kv, keys, g, next, next + after.n);
      }
      work(p, head_rows(kv, r, keys, g, widened));
      if (next > last) return;
      p = next;
      r = after;
    }
  };
  each_slice(true, [&](int32_t p, const KvRows& k) { attn_scores(q, nq, k, hd, scale, scores + (p - b0), stride, false, isa); });
  for (int i = 0; i < nq; ++i) {
    float* s = scores + i * stride;
    std::fill(s, s + (first - b0), neg_inf);
    std::fill(s + (last + 1 - b0), s + (b1 - b0), neg_inf);
    attn_softmax(s, b1 - b0, isa, sinks ? sinks + i : nullptr);
  }
  std::fill(acc, acc + size_t(nq) * 16 * size_t(hd), 0.f);
  each_slice(false, [&](int32_t p, const KvRows& v) { attn_accumulate(scores + (p - b0), stride, nq, v, hd, p & 15, 16, acc, isa); });
  for (int i = 0; i < nq; ++i) attn_lanes_sum(acc + size_t(i) * 16 * size_t(hd), hd, out + i * hd, isa);
}

// attend_heads in the online-softmax order (attn_kernels.h; K/V not both f32), windows of
// kSliceKeys positions at a time (multiples of 16 from first's block): the scores of the
// window's visible keys for the nq heads, each 16-block's softmax step per head, then the
// values, a head's sums multiplied by a block's alpha before that block's keys where its max
// grew. Each head's float sequence depends on its keys alone, as in attn_group. q, out:
// [nq][hd] f32; scores: [nq][kSliceKeys] f32; acc: [nq][hd] f32 sums of e v.
void attend_heads_online(const float* q, int nq, const KvStore& kv, int32_t g, int32_t first, int32_t last, float scale,
                         const float* sinks, float* scores, float* acc, std::vector<float>& widened, float* out,
                         Isa isa) {
  const int32_t hd = kv.head_dim();
  std::vector<float> state(size_t(2) * size_t(nq));     // [nq] running max, then [nq] running sum
  std::vector<float> alpha(size_t(nq) * (kSliceKeys / 16));  // [nq][blocks of the window]
  float* m = state.data();
  float* l = m + nq;
  for (int i = 0; i < nq; ++i) {
    m[i] = sinks ? sinks[i] : -std::numeric_limits<float>::infinity();
    l[i] = sinks ? 1.f : 0.f;
  }
  std::fill(acc, acc + size_t(nq) * size_t(hd), 0.f);
  const auto each_span = [&](bool keys, int32_t p0, int32_t p1, auto&& work) {
    for (int32_t p = p0; p < p1;) {
      const KvStore::RowSpan r = kv.rows(p, p1);
      work(p, head_rows(kv, r, keys, g, widened));
      p += r.n;
    }
  };
  for (int32_t w0 = first & ~15; w0 <= last; w0 += kSliceKeys) {
    const int32_t lo = std::max(first, w0), hi = std::min(last + 1, w0 + kSliceKeys), w1 = (hi + 15) & ~15;
    const int32_t next = std::min(last + 1, hi + kSliceKeys);
    prefetch_head_rows(kv, false, g, lo, hi);  // this window's V, needed once the scores are done
    for (int i = 0; i < nq; ++i) {
      float* s = scores + size_t(i) * kSliceKeys;
      std::fill(s, s + (lo - w0), -std::numeric_limits<float>::infinity());
      std::fill(s + (hi - w0), s + (w1 - w0), -std::numeric_limits<float>::infinity());
    }
    each_span(true, lo, hi, [&](int32_t p, const KvRows& k) { attn_scores(q, nq, k, hd, scale, scores + (p - w0), kSliceKeys, true, isa); });
    prefetch_head_rows(kv, true, g, hi, next);  // the next window's K, while the values go
    for (int32_t b = w0; b < w1; b += 16)
      for (int i = 0; i < nq; ++i)
        alpha[size_t(i) * (kSliceKeys / 16) + size_t((b - w0) / 16)] =
            attn_online_block(scores + size_t(i) * kSliceKeys + (b - w0), m[i], l[i], isa);
    // The values of [done, b) go in before block b's rescale.
    int32_t done = lo;
    const auto values_to = [&](int32_t end) {
      each_span(false, done, end, [&](int32_t p, const KvRows& v) { attn_accumulate(scores + (p - w0), kSliceKeys, nq, v, hd, 0, 1, acc, isa); });
      done = std::max(done, end);
    };
    for (int32_t b = w0; b < w1; b += 16)
      for (int i = 0; i < nq; ++i) {
        const float a = alpha[size_t(i) * (kSliceKeys / 16) + size_t((b - w0) / 16)];
        if (a == 1.f) continue;
        values_to(b);
        for (float* x = acc + size_t(i) * size_t(hd); x < acc + size_t(i + 1) * size_t(hd); ++x) *x *= a;
      }
    values_to(hi);
  }
  for (int i = 0; i < nq; ++i) {
    const float inv = 1.f / l[i];
    for (int32_t d = 0; d < hd; ++d) out[size_t(i) * size_t(hd) + size_t(d)] = acc[size_t(i) * size_t(hd) + size_t(d)] * inv;
  }
}

// Queries [qi0, qi0 + nq) of kv head g (query qi: token qi / group, head g * group +
// qi % group), attended together by attn_group over the union of their visible keys, whose
// rows are gathered page by page; rows: scratch for the row pointers.
void attend_group(const float* q, const KvStore& kv, int32_t g, int64_t qi0, int nq, int32_t pos0,
                  const AttentionParams& p, std::vector<const void*>& rows, float* out) {
  const int32_t hd = kv.head_dim(), group = p.n_head / kv.n_kv_heads();
  const int32_t p_begin = kv.first_position(), p_end = kv.position();
  const float* qs[kGroupQueries];
  float* outs[kGroupQueries];
  int32_t first[kGroupQueries], last[kGroupQueries];
  float sinks[kGroupQueries];
  int32_t u0 = p_end, u1 = p_begin - 1;  // the union of the visible keys
  for (int i = 0; i < nq; ++i) {
    const int64_t t = (qi0 + i) / group, h = g * group + (qi0 + i) % group;
    const int32_t pos = pos0 + int32_t(t);
    first[i] = p.window > 0 ? std::max(p_begin, pos - p.window + 1) : p_begin;
    last[i] = p.non_causal ? p_end - 1 : pos;
    u0 = std::min(u0, first[i]);
    u1 = std::max(u1, last[i]);
    sinks[i] = p.sinks ? p.sinks[h] : 0.f;
    qs[i] = q + (t * p.n_head + h) * hd;
    outs[i] = out + (t * p.n_head + h) * hd;
  }
  const int32_t b0 = u0 & ~15, n = ((u1 + 16) & ~15) - b0;
  rows.assign(size_t(2 * n), nullptr);  // [n] key rows, then [n] value rows
  const size_t kb = kv.head_bytes(true), vb = kv.head_bytes(false);
  for (int32_t pp = u0; pp <= u1;) {
    const KvStore::RowSpan r = kv.rows(pp, u1 + 1);
    for (int32_t i = 0; i < r.n; ++i) {
      rows[size_t(pp - b0 + i)] = r.k + (size_t(i) * r.row_stride + size_t(g) * r.head_stride) * kb;
      rows[size_t(n + pp - b0 + i)] = r.v + (size_t(i) * r.row_stride + size_t(g) * r.head_stride) * vb;
    }
    pp += r.n;
  }
  const AttnGroup grp{nq, qs, first, last, p.sinks ? sinks : nullptr, outs, b0};
  attn_group(grp, rows.data(), rows.data() + n, n, kv_dtype(kv.types().k), kv_dtype(kv.types().v), hd, p.scale);
}

// attention() on K/V as stored: rotated or not, whatever q and out are in.
void attention_stored(const float* q, const KvStore& kv, int64_t n_tokens, int32_t pos0, const AttentionParams& p,
                      float* out, ThreadPool& pool) {
  const int32_t hd = kv.head_dim();
  const int32_t group = p.n_head / kv.n_kv_heads();
  const int64_t per_head = n_tokens * group;  // queries per kv head
  if (attn_group_supported() && per_head >= kGroupMinQueries) {
    // Jobs: chunks of up to kGroupQueries queries of one kv head, head after head (so the
    // threads share one head's K/V in the cache: at depth all heads' K/V do not fit), latest
    // tokens (most keys) first. With fewer kv heads than threads the chunks shrink until
    // every thread has one; a query's bits do not depend on the chunk it is computed in.
    const int64_t n_kv = kv.n_kv_heads();
    const int64_t want = (pool.size() + n_kv - 1) / n_kv;  // chunks per kv head
    const int64_t size = std::clamp<int64_t>((per_head + want - 1) / want, 1, kGroupQueries);
    const int64_t chunks = (per_head + size - 1) / size;
    pool.parallel_for(chunks * n_kv, 1, [&](int64_t j0, int64_t j1) {
      std::vector<const void*> rows;  // [2][union keys] K/V row pointers
      for (int64_t job = j0; job < j1; ++job) {
        const int64_t qi0 = (chunks - 1 - job % chunks) * size;
        attend_group(q, kv, int32_t(job / chunks), qi0, int(std::min<int64_t>(size, per_head - qi0)), pos0, p, rows, out);
      }
    });
    return;
  }
  const int32_t p_end = pos0 + int32_t(n_tokens);
  const int32_t p_begin = kv.first_position();
  const Isa isa = detected_isa();
  // Jobs: a token's query heads of one kv head (split into chunks until every thread has
  // one), claimed dynamically, latest tokens (most keys) first, so the threads finish
  // together; each head's result is independent of the job it is computed in.
  const int64_t pairs = n_tokens * kv.n_kv_heads();
  const int64_t want = (pool.size() + pairs - 1) / pairs;  // chunks per (token, kv head)
  const int32_t size = int32_t(std::clamp<int64_t>((group + want - 1) / want, 1, group));
  const int32_t chunks = (group + size - 1) / size;
  const bool online = attn_online(kv_dtype(kv.types().k), kv_dtype(kv.types().v));
  pool.parallel_for(pairs * chunks, 1, [&](int64_t j0, int64_t j1) {
    // ggml order: all visible keys' scores and 16 lane sums per dim; online: a window's scores, one sum per dim.
    const size_t stride = online ? size_t(kSliceKeys) : size_t(p_end - p_begin + 32);
    std::vector<float> scores(size_t(size) * stride);                      // [size][stride] f32
    std::vector<float> acc(size_t(size) * (online ? 1 : 16) * size_t(hd));  // [size][16 or 1][hd] f32 sums
    std::vector<float> widened;                                // [slice rows][hd] f32 dequantized K or V
    for (int64_t job = j0; job < j1; ++job) {
      const int64_t t = n_tokens - 1 - job / (kv.n_kv_heads() * chunks);
      const int32_t g = int32_t(job / chunks % kv.n_kv_heads());
      const int32_t h0 = g * group + int32_t(job % chunks) * size;
      const int nq = std::min(size, (g + 1) * group - h0);
      const int32_t pos = pos0 + int32_t(t);
      // Visible keys: [first, last]: causal (last = pos) or the whole batch (non-causal),
      // earlier keys limited to the window.
      const int32_t first = p.window > 0 ? std::max(p_begin, pos - p.window + 1) : p_begin;
      const int32_t last = p.non_causal ? p_end - 1 : pos;
      const float* sinks = p.sinks ? p.sinks + h0 : nullptr;
      if (online)
        attend_heads_online(q + (t * p.n_head + h0) * hd, nq, kv, g, first, last, p.scale, sinks, scores.data(),
                            acc.data(), widened, out + (t * p.n_head + h0) * hd, isa);
      else
        attend_heads(q + (t * p.n_head + h0) * hd, nq, kv, g, first, last, p.scale, sinks, scores.data(), stride,
                     acc.data(), widened, out + (t * p.n_head + h0) * hd, isa);
    }
  });
}

}  // namespace

void attention(const float* q, const KvStore& kv, int64_t n_tokens, int32_t pos0, const AttentionParams& p,
               float* out, ThreadPool& pool) {
  const int32_t rk = kv.rotation(true), rv = kv.rotation(false);
  const int64_t count = n_tokens * p.n_head * kv.head_dim();  // query (and output) values
  std::vector<float> rotated_q;                               // [n_tokens][n_head][head_dim] f32, H q
  if (rk > 0) {  // K is stored as H k, and (H q).(H k) = q.k
    rotated_q.assign(q, q + count);
    hadamard_rotate(rotated_q.data(), count / rk, rk);
    q = rotated_q.data();
  }
  attention_stored(q, kv, n_tokens, pos0, p, out, pool);
  if (rv > 0) hadamard_rotate(out, count / rv, rv);  // V is stored as H v: H sum p H v = sum p v
}

void delta_rule_token(float* S, const float* k, const float* q, const float* v, float decay, float beta, float scale,
                      int64_t dk, int64_t dv, float* out) {
  // Column by column, both passes over the column (S^T k sees the decayed S; S^T q the
  // updated one); the SIMD path does 8 columns at a time in the same order.
  const int64_t j0 = detected_isa() == Isa::avx2 ? detail::delta_rule_token_avx2(S, k, q, v, decay, beta, scale, dk, dv, out) : 0;
  for (int64_t j = j0; j < dv; ++j) {
    float acc = 0.f;
    for (int64_t i = 0; i < dk; ++i) {
      S[i * dv + j] *= decay;
      acc += S[i * dv + j] * k[i];
    }
    const float delta = (v[j] - acc) * beta;
    float o = 0.f;
    for (int64_t i = 0; i < dk; ++i) {
      S[i * dv + j] += k[i] * delta;
      o += S[i * dv + j] * q[i];
    }
    out[j] = o * scale;
  }
}

void causal_conv(const float* w, const float* bias, int64_t K, float* tail, const float* in, int64_t in_stride,
                 int64_t n, int64_t ch, float* out, ThreadPool& pool) {
  // Channel by channel (8 at a time on AVX2, the same operations): a channel's inputs are
  // read before its outputs are written, which is what makes out == in safe.
  const bool simd = detected_isa() == Isa::avx2;
  pool.parallel_for(ch, 16, [&](int64_t c0, int64_t c1) {
    if (simd) c0 = detail::causal_conv_avx2(w, bias, K, tail, in, in_stride, n, ch, c0, c1, out);
    if (c0 == c1) return;
    std::vector<float> win(size_t(K - 1 + n));  // [K-1 + n] f32: this channel's tail, then its new inputs
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t k = 0; k < K - 1; ++k) win[size_t(k)] = tail[k * ch + c];
      for (int64_t t = 0; t < n; ++t) win[size_t(K - 1 + t)] = in[t * in_stride + c];
      const float* wc = w + c * K;
      for (int64_t t = 0; t < n; ++t) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s = std::fma(win[size_t(t + k)], wc[k], s);  // oldest tap first
        if (bias) s += bias[c];
        out[t * ch + c] = s;
      }
      // The new tail is the last K-1 inputs (older tail values when n < K-1).
      for (int64_t k = 0; k < K - 1; ++k) tail[k * ch + c] = win[size_t(n + k)];
    }
  });
}

Embeddings load_embeddings(const gguf::File& f, const ModelConfig& c, const std::string& norm_name) {
  Embeddings e;
  e.tok_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab);
  e.output = optional_tensor(f, "output.weight") ? matrix(f, "output.weight", c.n_embd, c.n_vocab) : e.tok_embd;
  e.output_norm = vector_f32(f, norm_name, c.n_embd);
  return e;
}

void embed_tokens(const Matrix& tok_embd, std::span<const Token> tokens, float* x) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= tok_embd.rows)
      throw std::runtime_error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                               std::to_string(tok_embd.rows - 1) + ")");
    get_row(tok_embd, tokens[t], x + int64_t(t) * tok_embd.cols);
  }
}

void embed_batch(const Matrix& tok_embd, const Batch& batch, bool non_causal_ok, float* x) {
  if (batch.non_causal && !non_causal_ok)
    throw std::invalid_argument("this architecture cannot evaluate a non-causal (bidirectional) batch");
  if (!batch.embeddings) return embed_tokens(tok_embd, batch.tokens, x);
  std::copy(batch.embeddings, batch.embeddings + batch.n_rows * tok_embd.cols, x);
}

namespace {

// [65536] f32: fp16(gelu(v)) for every fp16 bit pattern v, built once (thread-safe static).
const std::vector<float>& gelu_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float v = f16_to_f32(f16_bits(i));
      const float g = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + kCoefA * v * v)));
      t[i] = f16_to_f32(f32_to_f16(g));
    }
    return t;
  }();
  return table;
}

}  // namespace

float gelu_ggml(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gelu_table()[f32_to_f16(x)];
}

void gelu_gate(const float* g, float* x, int64_t n) {
  if (detected_isa() == Isa::avx2) return detail::gelu_table_gate_avx2(gelu_table().data(), g, x, n);
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_ggml(g[i]) * x[i];
}

void output_logits(const Embeddings& e, const float* x, int64_t n, LogitsMode mode, float eps, float* logits,
                   ThreadPool& pool) {
  if (mode == LogitsMode::none || n == 0) return;
  if (mode == LogitsMode::hidden) return rms_norm(x, e.output_norm, logits, n, e.output.cols, eps);
  const int64_t d = e.output.cols, first = mode == LogitsMode::all ? 0 : n - 1, rows = n - first;
  std::vector<float> xn(size_t(rows * d));  // [rows][n_embd] normed final hidden states
  rms_norm(x + first * d, e.output_norm, xn.data(), rows, d, eps);
  matmul(e.output, xn.data(), rows, logits, pool);
}

SwigluFfn load_swiglu(const gguf::File& f, const std::string& p, int64_t n_embd, int64_t n_ff) {
  return {matrix(f, p + "ffn_gate.weight", n_embd, n_ff), matrix(f, p + "ffn_up.weight", n_embd, n_ff),
          matrix(f, p + "ffn_down.weight", n_ff, n_embd)};
}

namespace {

// out = down(act(gate xn) * up xn), act applied by gate_rows over row ranges of [n][ff].
template <class GateRows>
void gated_ffn(const SwigluFfn& w, const float* xn, int64_t n, float* out, ThreadPool& pool, GateRows gate_rows) {
  const int64_t ff = w.gate.rows;
  std::vector<float> g(size_t(n * ff)), u(size_t(n * ff));  // [n][n_ff] gate and up projections
  matmul(w.gate, xn, n, g.data(), pool);
  matmul(w.up, xn, n, u.data(), pool);
  pool.parallel_for(n, ThreadPool::rows_grain(ff), [&](int64_t t0, int64_t t1) {
    gate_rows(g.data() + t0 * ff, u.data() + t0 * ff, (t1 - t0) * ff);
  });
  matmul(w.down, u.data(), n, out, pool);
}

}  // namespace

void swiglu_ffn(const SwigluFfn& w, const float* xn, int64_t n, float* out, ThreadPool& pool) {
  gated_ffn(w, xn, n, out, pool, swiglu);
}

void gelu_ffn(const SwigluFfn& w, const float* xn, int64_t n, float* out, ThreadPool& pool) {
  gated_ffn(w, xn, n, out, pool, gelu_gate);
}

AttnWeights load_attention(const gguf::File& f, const std::string& p, int64_t n_embd, int32_t n_head, int32_t n_kv,
                           int32_t hd, bool qk_norm, int64_t q_factor) {
  AttnWeights w;
  w.wq = matrix(f, p + "attn_q.weight", n_embd, q_factor * n_head * hd);
  w.wk = matrix(f, p + "attn_k.weight", n_embd, int64_t(n_kv) * hd);
  w.wv = matrix(f, p + "attn_v.weight", n_embd, int64_t(n_kv) * hd);
  w.wo = matrix(f, p + "attn_output.weight", int64_t(n_head) * hd, n_embd);
  if (qk_norm) {
    w.q_norm = vector_f32(f, p + "attn_q_norm.weight", hd);
    w.k_norm = vector_f32(f, p + "attn_k_norm.weight", hd);
  }
  w.bq = optional_vector_f32(f, p + "attn_q.bias", w.wq.rows);
  w.bk = optional_vector_f32(f, p + "attn_k.bias", w.wk.rows);
  w.bv = optional_vector_f32(f, p + "attn_v.bias", w.wv.rows);
  w.bo = optional_vector_f32(f, p + "attn_output.bias", n_embd);
  return w;
}

AttnOptions attention_options(const ModelConfig& c) {
  AttnOptions o;
  o.n_head = c.n_head;
  o.eps = c.rms_eps;
  o.rope.type = c.rope_type;
  o.rope.n_rot = c.n_rot;
  o.rope.base = c.rope_base;
  o.scale = c.head_dim > 0 ? 1.0f / std::sqrt(float(c.head_dim)) : 1.f;
  return o;
}

void attend(const AttnWeights& w, const AttnOptions& o, KvStore& kv, float* q, float* k, const float* v, int64_t n,
            int32_t pos0, float* attn, ThreadPool& pool, const int32_t* mrope_pos) {
  const int32_t hd = kv.head_dim(), n_kv = kv.n_kv_heads();
  if (w.q_norm) rms_norm(q, w.q_norm, q, n * o.n_head, hd, o.eps);
  if (w.k_norm) rms_norm(k, w.k_norm, k, n * n_kv, hd, o.eps);
  if (mrope_pos) {
    rope_multi(q, n, o.n_head, hd, mrope_pos, o.rope);
    rope_multi(k, n, n_kv, hd, mrope_pos, o.rope);
  } else {
    rope(q, n, o.n_head, hd, pos0, o.rope);
    rope(k, n, n_kv, hd, pos0, o.rope);
  }
  if (o.q_scale != 1.f)
    for (int64_t i = 0; i < n * o.n_head * hd; ++i) q[i] *= o.q_scale;
  kv.append(k, v, int32_t(n));
  attention(q, kv, n, pos0, {o.n_head, o.scale, o.window, o.non_causal, o.sinks}, attn, pool);
}

void attention_block(const AttnWeights& w, const AttnOptions& o, size_t il, SeqSpan seqs, const float* xn, int64_t n,
                     float* out, ThreadPool& pool) {
  const int64_t nq = int64_t(o.n_head) * seqs[0].memory<KvStore>(il).head_dim();
  const int64_t nkv = seqs[0].memory<KvStore>(il).row_size();
  std::vector<float> q(size_t(n * nq)), attn(size_t(n * nq));  // [n][n_head][hd] queries, attention output
  std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd] new keys, values
  linear(w.wq, w.bq, xn, n, q.data(), pool);
  linear(w.wk, w.bk, xn, n, k.data(), pool);
  linear(w.wv, w.bv, xn, n, v.data(), pool);
  for (const SeqRows& s : seqs) {
    AttnOptions so = o;
    so.non_causal = s.batch->non_causal;
    attend(w, so, s.memory<KvStore>(il), q.data() + s.row0 * nq, k.data() + s.row0 * nkv, v.data() + s.row0 * nkv,
           s.n, s.pos0, attn.data() + s.row0 * nq, pool, s.batch->positions);
  }
  linear(w.wo, w.bo, attn.data(), n, out, pool);
}

void add_bias(float* y, const float* b, int64_t n, int64_t d) {
  if (!b) return;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) y[t * d + i] += b[i];
}

void linear(const Matrix& w, const float* b, const float* x, int64_t n, float* y, ThreadPool& pool) {
  matmul(w, x, n, y, pool);
  add_bias(y, b, n, w.rows);
}

const float* optional_vector_f32(const gguf::File& f, const std::string& name, int64_t n) {
  return optional_tensor(f, name) ? vector_f32(f, name, n) : nullptr;
}

const gguf::TensorInfo* optional_tensor(const gguf::File& f, const std::string& name) {
  return f.find_tensor(name);
}

Matrix matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows) {
  const auto& t = f.require_tensor(name);
  if (t.ne.size() != 2 || t.ne[0] != cols || t.ne[1] != rows)
    f.fail("tensor '" + name + "' has shape [" + std::to_string(t.ne[0]) +
           (t.ne.size() > 1 ? ", " + std::to_string(t.ne[1]) : "") + (t.ne.size() > 2 ? ", ..." : "") +
           "], expected [" + std::to_string(cols) + ", " + std::to_string(rows) + "]");
  if (!traits(t.type).supported)
    f.fail("tensor '" + name + "' has type " + dtype_name(t.type) + ", which warmstart cannot compute with yet");
  Matrix m = pack_for_cpu(Matrix{t.type, rows, cols, t.data}, &f.packed_arena());
  // The kernels read the repacked copy, so let the mapped original's pages go; only a
  // forced scalar run, or get_row of a Q8_0/F16 matrix (a tied embedding), reads them
  // again (K-quant rows are read back from the packed copy).
  if (m.packed) f.release_pages(t.data, t.nbytes);
  return m;
}

const float* vector_f32(const gguf::File& f, const std::string& name, int64_t n) {
  const auto& t = f.require_tensor(name);
  if (t.n_elements() != n)
    f.fail("tensor '" + name + "' has " + std::to_string(t.n_elements()) + " elements, expected " + std::to_string(n));
  if (t.type != DType::f32) f.fail("tensor '" + name + "' must be F32, found " + dtype_name(t.type));
  // GGUF data offsets are aligned (>= 32 bytes), so the f32 view is aligned.
  return reinterpret_cast<const float*>(t.data);
}

}  // namespace ws::ops
