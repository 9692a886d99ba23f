// Vector kernels for attention over K/V rows read in place (f32 or f16 storage): a scalar
// reference and an AVX2/FMA path that computes the same bits.
//
// The float sequence is llama.cpp's (ggml-cpu built for AVX-512, no flash attention, F32
// K/V), so that logits agree with it to the last bit wherever the rest of the model does:
// BF16 models round every matmul input to 8 bits, and one ulp of difference in an attention
// output flips such roundings and spreads (issue 29). For one query and its visible keys j
// (absolute positions in the sequence):
//   score_j = dot(k_j, q) * scale, dot as ggml_vec_dot_f32 with 16-lane vectors: part[c] =
//     fma over d = c, c + 64, c + 128, ... of q[d] k_j[d] from 0 (c < 64); t[c] = (part[c] +
//     part[c + 32]) + (part[c + 16] + part[c + 48]) (c < 16); s = tree16(t); the dims past the
//     last multiple of 64 follow in order, s = fma(q[d], k_j[d], s).
//   m = max over the visible scores (and the sink logit); the keys in blocks of 16 positions
//     [16b, 16b + 16): e_j = expf_ggml(score_j - m) (tensor/expf_ggml.h), 0 for keys not visible; sum (double) +=
//     tree16(the block's e); then + exp(sink - m); p_j = e_j * (float)(1 / sum).
//   out[d] = tree16(acc[0..15][d]), acc[l][d] = fma over the visible keys j with j % 16 == l,
//     in order, of p_j v_j[d] (llamafile's tinyBLAS over the transposed V).
//   tree16(a): t[i] = a[i] + a[i + 8], then t[i] + t[i + 4], then t[i] + t[i + 2], then t[0] + t[1].
// Each output depends only on the query, its visible keys' positions and values and
// head_dim: never on the batch, the thread, how the keys arrive (KV pages) or the ISA.
//
// That sequence is kept for F32 K and V (the goldens' cache type, where llama.cpp's bits are
// reachable). With any other storage (F16, q8_0, q4_0: attn_online) llama.cpp itself rounds q
// and p to F16, so its bits are out of reach anyway, and the keys go in the online-softmax
// order instead, which needs no array of all the scores and no 16 lane sums per dim:
//   score_j = dot(k_j, q) * scale, the dot one chain per 16-lane: part[c] = fma over d = c,
//     c + 16, c + 32, ... of q[d] k_j[d] from 0 (c < 16); s = tree16(part); the dims past the
//     last multiple of 16 follow in order, s = fma(q[d], k_j[d], s) (15 adds a score where
//     ggml's dot needs 63 at head_dim 64);
//   m = the sink logit (l = 1) or -inf (l = 0), acc[d] = 0;
//   per block of 16 positions [16b, 16b + 16) in order (a block none of whose keys is
//   visible changes nothing): m' = max(m, the block's scores, -FLT_MAX); alpha =
//   expf_ggml(m - m') (1 exactly when the max did not grow, 0 on a first block without a sink);
//   e_j = expf_ggml(score_j - m') (0 for keys not visible: their score is -inf);
//   l = l * alpha + tree16(e); acc[d] = acc[d] * alpha, then acc[d] = fma(e_j, v_j[d], acc[d])
//   over the block's visible keys in order (one chain per dim); m = m'.
//   out[d] = acc[d] * (1 / l).
// The same independence holds: a block is a fixed set of positions, and the keys of a query
// reach its accumulators in position order whoever computes them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/expf_ggml.h"
#include "tensor/kernels.h"

namespace ws {

// A run of n key or value rows: row j starts at data + j * stride elements.
struct KvRows {
  const void* data = nullptr;
  size_t stride = 0;   // elements between consecutive rows
  bool f16 = false;    // element type: f16 if true, else f32
  int32_t n = 0;
};

// For nq queries (query i: q + i * hd, f32; its scores: scores + i * stride):
// scores[j] = scale * dot(k_j, q) for j < k.n, the dot in ggml's order or the online one. On
// AVX-512 each K row is loaded and widened once for all nq (decode: the query heads of one kv
// head).
void attn_scores(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores, size_t stride,
                 bool online, Isa isa);
// Whether K/V stored as k, v are attended in the online-softmax order (above): unless both are f32.
bool attn_online(DType k, DType v);

// x: [n] scores of the keys at positions p0 .. p0 + n - 1, p0 and n multiples of 16, -inf
// where a key is not visible (at least one is), becomes the probabilities p; sink: one
// more logit in the max and the sum (attention sinks), or null.
void attn_softmax(float* x, int32_t n, Isa isa, const float* sink = nullptr);
// One block of 16 keys of one query in the online order: x: [16] f32 the block's scores
// (-inf where not visible), becomes e; m, l: the query's running max and sum, updated.
// Returns alpha, the factor of the query's accumulators before the block's values join.
float attn_online_block(float* x, float& m, float& l, Isa isa);
// For nq queries (query i: probabilities p + i * p_stride, sums acc + i * lanes * hd):
// acc[(lane0 + j) % lanes][d] = fma(p[j], v_j[d], acc[...]) for j < v.n in order, d < hd;
// lanes: 16 (the ggml order; lane0 = the position of the first row mod 16) or 1 (the online
// order: one chain per dim); acc: [nq][lanes][hd] f32. On AVX-512 each V row is loaded and
// widened once for all nq.
void attn_accumulate(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0, int lanes,
                     float* acc, Isa isa);
// out[d] = tree16(acc[0..15][d]) for d < hd; acc: [16][hd], out: [hd] f32.
void attn_lanes_sum(const float* acc, int32_t hd, float* out, Isa isa);

// Queries that read the same kv head, attended together (attn_group).
struct AttnGroup {
  int nq = 0;                       // queries
  const float* const* q = nullptr;  // [nq] pointers to [hd] f32
  const int32_t* first = nullptr;   // [nq] first visible key (position)
  const int32_t* last = nullptr;    // [nq] last visible key (position)
  const float* sinks = nullptr;     // [nq] sink logits, or null
  float* const* out = nullptr;      // [nq] pointers to [hd] f32
  int32_t p0 = 0;                   // position of the first row handed over: a multiple of 16
};
// The queries of g against the rows of positions p0 .. p0 + n - 1 (n a multiple of 16;
// k_rows, v_rows: [n] pointers to rows of hd elements of kt / vt (f32, f16, q8_0 or q4_0),
// null for positions not read; quantized rows count as their dequantized values), the
// queries in the lanes of the vectors (16 with AVX-512, 8 with AVX2) so that every row is
// loaded once for all of them; on AVX-512 in the online order with hd a multiple of 16, the
// keys in the lanes for the scores and the dims for the values (attn_kernels_avx512.cpp:
// group_tiles_online), every row widened once for the whole group. Each query gets exactly
// the bits of the per-query kernels above, in the order attn_online(kt, vt) says. Needs
// attn_group_supported().
bool attn_group_supported();
void attn_group(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                DType vt, int32_t hd, float scale);

// n rows of hd elements of type t (any KV storage type), row i at rows + i * stride bytes,
// widened into out ([n][hd] f32): the values dequantize_row gives, 8 at a time on AVX2 (the
// per-query kernels read quantized K/V this way, a slice of a page at a time).
void widen_rows(DType t, const uint8_t* rows, size_t stride, int32_t n, int32_t hd, float* out, Isa isa);

// One row of a selective-scan state: s[i] = s[i] * decay + b[i] * x for i < n, returns
// sum_i s[i] * c[i] (new state) accumulated in a fixed order that depends only on n.
float ssm_row_update(float* s, const float* b, const float* c, float decay, float x, int64_t n, Isa isa);

namespace detail {
float ssm_row_update_avx2(float* s, const float* b, const float* c, float decay, float x, int64_t n);
void attn_scores_avx2(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores, size_t stride,
                      bool online);
float max_avx2(const float* x, int32_t n);
double softmax_exp_avx2(float* x, int32_t n, float max);
void scale_avx2(float* x, int32_t n, float v);
void attn_accumulate_avx2(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0,
                          int lanes, float* acc);
float attn_online_block_avx2(float* x, float& m, float& l);
void attn_lanes_sum_avx2(const float* acc, int32_t hd, float* out);
void widen_rows_avx2(DType t, const uint8_t* rows, size_t stride, int32_t n, int32_t hd, float* out);
void attn_group_avx2(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                     DType vt, int32_t hd, float scale);
// The AVX-512 parts of the AVX2 per-query kernels, for nq queries as above: scores of whole
// runs of 16 keys (hd a multiple of 64; returns the keys done), values for the dims up to
// hd & ~15 (returned).
int32_t attn_scores16_avx512(const float* q, int nq, const KvRows& k, int32_t hd, float scale, float* scores,
                             size_t stride, bool online);
int32_t attn_accumulate16_avx512(const float* p, size_t p_stride, int nq, const KvRows& v, int32_t hd, int32_t lane0,
                                 int lanes, float* acc);
void attn_group_avx512(const AttnGroup& g, const void* const* k_rows, const void* const* v_rows, int32_t n, DType kt,
                       DType vt, int32_t hd, float scale);
}  // namespace detail

}  // namespace ws
