// Scalar reference attention kernels and the ISA dispatch.
#include "tensor/attn_kernels.h"

#include <cmath>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

namespace ws {
namespace {

inline float load(const KvRows& r, size_t i) {
  return r.f16 ? f16_to_f32(static_cast<const f16_bits*>(r.data)[i]) : static_cast<const float*>(r.data)[i];
}

}  // namespace

void attn_scores(const float* q, const KvRows& k, int32_t hd, float scale, float* scores, Isa isa) {
  if (isa == Isa::avx2) return detail::attn_scores_avx2(q, k, hd, scale, scores);
  for (int32_t j = 0; j < k.n; ++j) {
    const size_t base = size_t(j) * k.stride;
    float dot = 0.f;
    for (int32_t d = 0; d < hd; ++d) dot += q[d] * load(k, base + size_t(d));
    scores[j] = dot * scale;
  }
}

void attn_accumulate(const float* p, const KvRows& v, int32_t hd, float* out, Isa isa) {
  if (isa == Isa::avx2) return detail::attn_accumulate_avx2(p, v, hd, out);
  for (int32_t j = 0; j < v.n; ++j) {
    const size_t base = size_t(j) * v.stride;
    for (int32_t d = 0; d < hd; ++d) out[d] += p[j] * load(v, base + size_t(d));
  }
}

float softmax_exp(float* x, int32_t n, float max, Isa isa, const float* sink) {
  if (isa == Isa::avx2) return detail::softmax_exp_avx2(x, n, max, sink);
  float sum = 0.f;
  for (int32_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  if (sink) sum += std::exp(*sink - max);
  return sum;
}

float ssm_row_update(float* s, const float* b, const float* c, float decay, float x, int64_t n, Isa isa) {
  if (isa == Isa::avx2) return detail::ssm_row_update_avx2(s, b, c, decay, x, n);
  float acc = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    s[i] = s[i] * decay + b[i] * x;
    acc += s[i] * c[i];
  }
  return acc;
}

// Same CPU choice as the matmuls (WARMSTART_ISA=scalar keeps the per-query kernels).
// The AVX2 and AVX-512 group kernels compute the same float sequence, so which one runs
// changes no bit.
bool attn_group_supported(int32_t hd) {
  return detected_isa() == Isa::avx2 && hd % 16 == 0 && hd <= kMaxGroupHeadDim;
}

void attn_group_scores(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s) {
  if (detail::cpu_has_vnni()) detail::attn_group_scores_avx512(qt, nq, k, hd, scale, s);
  else detail::attn_group_scores_avx2(qt, nq, k, hd, scale, s);
}

void attn_group_softmax(float* s, int32_t n, const int32_t* lo, const int32_t* hi, const float* sink) {
  if (detail::cpu_has_vnni()) detail::attn_group_softmax_avx512(s, n, lo, hi, sink);
  else detail::attn_group_softmax_avx2(s, n, lo, hi, sink);
}

void attn_group_accumulate(const float* p, int nq, const KvRows& v, int32_t hd, float* const* out) {
  if (detail::cpu_has_vnni()) detail::attn_group_accumulate_avx512(p, nq, v, hd, out);
  else detail::attn_group_accumulate_avx2(p, nq, v, hd, out);
}

}  // namespace ws
