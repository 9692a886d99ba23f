// Vector kernels for attention over K/V rows read in place (f32 or f16 storage), with a
// scalar reference and an AVX2/FMA path chosen by Isa.
//
// Batch invariance: the result for one key (a score) or one output element depends only
// on the inputs and head_dim, never on how many keys are passed per call; keys are
// folded into `out` strictly in the order given. Callers therefore get the same bits for
// a query whatever micro-batch or thread it is computed in.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/kernels.h"

namespace ws {

// A run of n key or value rows: row j starts at data + j * stride elements.
struct KvRows {
  const void* data = nullptr;
  size_t stride = 0;   // elements between consecutive rows
  bool f16 = false;    // element type: f16 if true, else f32
  int32_t n = 0;
};

// scores[j] = scale * dot(q, k_j) for j < k.n; q: [hd] f32.
void attn_scores(const float* q, const KvRows& k, int32_t hd, float scale, float* scores, Isa isa);
// out[d] += p[j] * v_j[d] for j = 0 .. v.n-1 in order; p: [v.n], out: [hd] f32.
void attn_accumulate(const float* p, const KvRows& v, int32_t hd, float* out, Isa isa);
// x[i] = exp(x[i] - max) for i < n, returns their sum (accumulated in a fixed order).
// With a sink logit (attention sinks; max must already include it), exp(*sink - max) is
// added to the sum last: the softmax gets one more entry that attends to nothing.
float softmax_exp(float* x, int32_t n, float max, Isa isa, const float* sink = nullptr);

// One row of a selective-scan state: s[i] = s[i] * decay + b[i] * x for i < n, returns
// sum_i s[i] * c[i] (new state) accumulated in a fixed order that depends only on n.
float ssm_row_update(float* s, const float* b, const float* c, float decay, float x, int64_t n, Isa isa);

// Grouped attention: up to 16 queries reading the same kv head at once, the queries as
// the lanes of one vector (AVX-512, or two AVX2 halves; see attn_kernels_avx512.cpp for
// the float sequence, which depends neither on the group nor on the ISA). Used when
// attn_group_supported(hd).
constexpr int kGroupQueries = 16;
constexpr int32_t kMaxGroupHeadDim = 512;
bool attn_group_supported(int32_t hd);
// s[j][lane] = scale * q_lane . k_j for j < k.n, lanes < nq; qt: [hd][16] f32 (queries
// transposed, unused lanes zero).
void attn_group_scores(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s);
// In place over s: [n][16]: keys outside [lo[lane], hi[lane]] get 0, the rest
// exp(s - max) / sum (per lane, keys in order). sink: [16] per-lane sink logits, or null:
// max starts from the sink and exp(sink - max) joins the sum after the keys.
void attn_group_softmax(float* s, int32_t n, const int32_t* lo /*[16]*/, const int32_t* hi /*[16]*/,
                        const float* sink = nullptr);
// out[i][d] += sum_j p[j][i] * v_j[d] for queries i < nq, keys j < v.n in order;
// p: [v.n][16], out: nq pointers to [hd] f32.
void attn_group_accumulate(const float* p, int nq, const KvRows& v, int32_t hd, float* const* out);

namespace detail {
void attn_group_scores_avx512(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s);
void attn_group_softmax_avx512(float* s, int32_t n, const int32_t* lo, const int32_t* hi, const float* sink);
void attn_group_accumulate_avx512(const float* p, int nq, const KvRows& v, int32_t hd, float* const* out);
void attn_group_scores_avx2(const float* qt, int nq, const KvRows& k, int32_t hd, float scale, float* s);
void attn_group_softmax_avx2(float* s, int32_t n, const int32_t* lo, const int32_t* hi, const float* sink);
void attn_group_accumulate_avx2(const float* p, int nq, const KvRows& v, int32_t hd, float* const* out);
float ssm_row_update_avx2(float* s, const float* b, const float* c, float decay, float x, int64_t n);
void attn_scores_avx2(const float* q, const KvRows& k, int32_t hd, float scale, float* scores);
void attn_accumulate_avx2(const float* p, const KvRows& v, int32_t hd, float* out);
float softmax_exp_avx2(float* x, int32_t n, float max, const float* sink);
}  // namespace detail

}  // namespace ws
