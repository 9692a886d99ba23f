// Element-wise and attention operations shared by the architecture files.
// All work on f32 rows; each output row depends only on its own inputs (batch invariance).
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "memory/state.h"
#include "models/model.h"
#include "tensor/expf_ggml.h"
#include "tensor/kernels.h"

namespace ws {

// The rows of one sequence in a pass over several (continuous batching): rows
// [row0, row0 + n) of every [rows][...] activation of the pass belong to `state`, at
// positions pos0 .. pos0 + n - 1. Row-wise operations (norms, matmuls, FFNs) run on all
// rows at once; operations that mix positions (attention, convolutions, scans) run on each
// sequence's rows against its own layer memory.
struct SeqRows {
  const Batch* batch = nullptr;
  SeqState* state = nullptr;
  int64_t row0 = 0, n = 0;
  int32_t pos0 = 0;
  template <class S>
  S& memory(size_t il) const { return static_cast<S&>(state->layer(il)); }
};
using SeqSpan = std::span<const SeqRows>;

}  // namespace ws

namespace ws::ops {

// Scalar activations, written as the f32 formulas GGUF runtimes use: logits are compared
// with theirs bit for bit, so the expressions must not be "simplified".
// SiLU with ggml's exp (expf_ggml), as llama.cpp's SiLU and SwiGLU compute it.
inline float silu(float x) { return x / (1.0f + expf_ggml(0.0f - x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// Above 20, softplus(x) == x in f32 anyway (same threshold as GGUF runtimes).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// sum of x[i]^2 in double: eight partial sums over i % 8, each in order, then
// ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)); the AVX2 path keeps exactly this order.
double sum_squares(const float* x, int64_t n);
// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, for n rows of d. x, y: [n][d]; w: [d] (may be null).
void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps);
// x[i] = silu(g[i]) * x[i] for i < n (SwiGLU gate applied in place on the up projection);
// on AVX2 CPUs with a polynomial exp (detail::swiglu_avx2), otherwise with std::exp.
void swiglu(const float* g, float* x, int64_t n);
// x = silu(x) over n rows of d, rows split across the pool's threads; AVX2 as swiglu.
void silu_rows(float* x, int64_t n, int64_t d, ThreadPool& pool);
// x[r] /= max(||x[r]||, eps) for each of n rows of d (L2 normalisation, e.g. of delta-net q/k).
void l2_norm(float* x, int64_t n, int64_t d, float eps);
// a[i] += b[i] * scale.
void add_scaled(float* a, const float* b, int64_t n, float scale = 1.f);
// How positions rotate Q and K. Pair i of the n_rot rotated dims turns by
// theta_i = pos * base^(-2i/n_rot) / freq_factors[i], then, with context extension:
// linear: theta * freq_scale; YaRN: a per-pair ramp between theta * freq_scale and theta
// (ggml's rope_yarn: corr dims from beta_fast/beta_slow), cos and sin times
// 1 + 0.1 ln(1/freq_scale).
struct RopeParams {
  RopeType type = RopeType::none;
  int32_t n_rot = 0;                    // rotated dims per head (the rest pass through)
  float base = 10000.f;
  const float* freq_factors = nullptr;  // [n_rot/2] angle divisors (rope_freqs.weight), or null
  float freq_scale = 1.f;               // 1 / rope.scaling.factor (linear and YaRN)
  bool yarn = false;
  int32_t yarn_orig_ctx = 0;            // rope.scaling.original_context_length
  float yarn_beta_fast = 32.f, yarn_beta_slow = 1.f;
  // M-RoPE (rope.dimension_sections): rotated pairs per position component (t, h, w, e);
  // read only by rope_multi.
  std::array<int32_t, 4> sections{};
};
// Reads rope.scaling.{type,factor,original_context_length} and rope_freqs.weight (when
// present) into r; refuses scaling types it does not implement, by name.
void read_rope_scaling(const gguf::File& f, const std::string& arch, RopeParams& r);
// Rotates the first n_rot dims of each head of x: [n_tokens][n_heads][head_dim],
// token t at position pos0 + t.
void rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t pos0, const RopeParams& r);
// Interleaved M-RoPE (Qwen3-VL / Qwen3.5, ggml's IMROPE): NEOX pairs (i, i + n_rot/2) like rope(),
// but each token has four position components pos[t] = {t, h, w, e} (image rows differ in h, w)
// and pair i turns by the component of sector s = i mod sum(sections): h if s % 3 == 1 and
// s < 3 sections[1], w if s % 3 == 2 and s < 3 sections[2], t if s % 3 == 0 and s < 3 sections[0],
// else e. Every component is scaled pair by pair as rope() scales its one position, so with
// t = h = w = e the result equals rope()'s bit for bit. pos: [n_tokens][4].
void rope_multi(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, const int32_t* pos,
                const RopeParams& r);

struct AttentionParams {
  int32_t n_head = 0;
  float scale = 1.f;    // multiplies q.k before the softmax
  int32_t window = 0;   // sliding window: a query at p sees keys p0 with p - p0 < window; 0 = all
  bool non_causal = false;  // queries also see the later keys of this batch (the window limits only earlier keys)
  // [n_head] per-head sink logit (gpt-oss attn_sinks), or null: one more logit in the softmax's
  // max and sum that attends to nothing, p_j = e^{s_j} / (sum_k e^{s_k} + e^{sink_h}).
  const float* sinks = nullptr;
};
// Causal attention of n_tokens queries at positions pos0.. against kv, which already holds
// the new tokens (kv.position() == pos0 + n_tokens).
//   q: [n_tokens][n_head][head_dim], out: [n_tokens][n_head][head_dim].
// GQA: query head h reads kv head h / (n_head / n_kv_heads). Where kv stores K (V) rotated
// (KvStore::rotation), q is rotated the same way (out rotated back), so out is the
// attention of the vectors given whatever the storage.
void attention(const float* q, const KvStore& kv, int64_t n_tokens, int32_t pos0, const AttentionParams& p,
               float* out, ThreadPool& pool);

// Causal depthwise conv over [tail ; in] for n tokens of ch channels, one k-ordered sum
// per output whatever the batch split, an fma per tap (ggml_ssm_conv as GCC contracts it
// for FMA targets, so that BF16 models agree with llama.cpp to the bit):
//   out[t][c] = sum_k w[c][k] * win[t+k][c] (+ bias[c]),  win = [tail (K-1 rows) ; in (n rows)].
// w: [ch][K] f32, tap K-1 multiplies the current token; bias: [ch] or null; tail:
// [K-1][ch] oldest first, replaced by the last K-1 inputs; in: [n][in_stride] (channels
// at columns 0..ch-1); out: [n][ch]. out may alias in when in_stride == ch.
void causal_conv(const float* w, const float* bias, int64_t K, float* tail, const float* in, int64_t in_stride,
                 int64_t n, int64_t ch, float* out, ThreadPool& pool);

// One token of the gated delta rule on one head (Qwen3.5's linear attention), in place:
//   S <- S * decay;  delta = beta * (v - S^T k);  S <- S + k delta^T;  out = scale * S^T q.
// S: [dk][dv] f32; k, q: [dk]; v, out: [dv]. Each element's operations in a fixed order
// (i ascending), so the SIMD path gives the same bits.
void delta_rule_token(float* S, const float* k, const float* q, const float* v, float decay, float beta, float scale,
                      int64_t dk, int64_t dv, float* out);

// The token embedding in, logits out: the same in every architecture.
struct Embeddings {
  Matrix tok_embd;                     // [n_vocab, n_embd]
  Matrix output;                       // [n_vocab, n_embd]: output.weight, or tok_embd when tied
  const float* output_norm = nullptr;  // [n_embd] final RMSNorm weight
};
Embeddings load_embeddings(const gguf::File& f, const ModelConfig& c,
                           const std::string& norm_name = "output_norm.weight");
// x: [tokens.size()][n_embd] rows of tok_embd. Throws on an id outside the vocabulary;
// callers embed before touching any state, so a bad token leaves the state unchanged.
void embed_tokens(const Matrix& tok_embd, std::span<const Token> tokens, float* x);
// x: [batch.size()][n_embd]: the token rows, or a copy of the batch's input embeddings.
// Throws (before any state is touched) on a bad id, or on a non-causal batch when the
// architecture cannot attend bidirectionally (`non_causal_ok` false).
void embed_batch(const Matrix& tok_embd, const Batch& batch, bool non_causal_ok, float* x);

// tanh-approximated GELU as ggml-cpu evaluates it: through a table indexed by the fp16
// bits of x holding fp16(gelu(x)), 0 below -10 and x above 10. Matching the table keeps
// results within float rounding of llama.cpp instead of ~1e-3 away.
float gelu_ggml(float x);
// x[i] = gelu_ggml(g[i]) * x[i] for i < n (AVX2: 8 lanes with a table gather, same bits).
void gelu_gate(const float* g, float* x, int64_t n);
// Final RMSNorm + output projection of the rows `mode` asks for (all n, or the last).
// x: [n][n_embd], logits: [rows][n_vocab].
void output_logits(const Embeddings& e, const float* x, int64_t n, LogitsMode mode, float eps, float* logits,
                   ThreadPool& pool);

// SwiGLU FFN "blk.N.ffn_{gate,up,down}": out = down(silu(gate xn) * up xn).
struct SwigluFfn {
  Matrix gate, up;  // [n_ff, n_embd]
  Matrix down;      // [n_embd, n_ff]
};
SwigluFfn load_swiglu(const gguf::File& f, const std::string& prefix, int64_t n_embd, int64_t n_ff);
// xn, out: [n][n_embd].
void swiglu_ffn(const SwigluFfn& w, const float* xn, int64_t n, float* out, ThreadPool& pool);
// The same weights gated by GELU (Gemma): out = down(gelu_ggml(gate xn) * up xn).
void gelu_ffn(const SwigluFfn& w, const float* xn, int64_t n, float* out, ThreadPool& pool);

// A GQA attention layer "blk.N.attn_*".
struct AttnWeights {
  Matrix wq;                      // [q_factor * n_head * hd, n_embd] (q_factor 2: per head [query, gate])
  Matrix wk, wv;                  // [n_kv * hd, n_embd]
  Matrix wo;                      // [n_embd, n_head * hd]
  const float* q_norm = nullptr;  // [hd] per-head RMSNorm of Q, or null
  const float* k_norm = nullptr;  // [hd] per-head RMSNorm of K, or null
  // Optional biases (Qwen2, gpt-oss), loaded when the file has them, else null.
  const float* bq = nullptr;      // [q_factor * n_head * hd]
  const float* bk = nullptr;      // [n_kv * hd]
  const float* bv = nullptr;      // [n_kv * hd]
  const float* bo = nullptr;      // [n_embd]
};
AttnWeights load_attention(const gguf::File& f, const std::string& prefix, int64_t n_embd, int32_t n_head,
                           int32_t n_kv, int32_t head_dim, bool qk_norm, int64_t q_factor = 1);
// How a layer attends; attention_options() fills it from the config (scale 1/sqrt(hd)).
struct AttnOptions {
  int32_t n_head = 0;
  float eps = 1e-5f;               // of the Q/K norms
  RopeParams rope;
  float scale = 1.f;               // multiplies q.k before the softmax
  float q_scale = 1.f;             // multiplies Q after RoPE (Gemma 3 scales Q, not the scores)
  int32_t window = 0;              // sliding window, 0 = all positions
  bool non_causal = false;         // the batch attends bidirectionally within itself (AttentionParams)
  const float* sinks = nullptr;    // [n_head] attention sink logits, or null (AttentionParams)
};
AttnOptions attention_options(const ModelConfig& c);
// From fresh projections q: [n][n_head][hd], k, v: [n][n_kv][hd] (q, k changed in place):
// Q/K norm, RoPE, append K/V to kv, causal attention -> attn: [n][n_head][hd].
// `mrope_pos` ([n][4], Batch::positions): rope_multi at those positions instead of rope().
void attend(const AttnWeights& w, const AttnOptions& o, KvStore& kv, float* q, float* k, const float* v, int64_t n,
            int32_t pos0, float* attn, ThreadPool& pool, const int32_t* mrope_pos = nullptr);
// The whole block over the rows of every sequence: out = wo(attend(wq xn, wk xn, wv xn)),
// each sequence attending over the KV store of layer il in its own state (its batch's
// non_causal and M-RoPE positions). xn, out: [n][n_embd], n = the rows of all sequences.
void attention_block(const AttnWeights& w, const AttnOptions& o, size_t il, SeqSpan seqs, const float* xn, int64_t n,
                     float* out, ThreadPool& pool);

// y[t][i] += b[i] for n rows of d (no-op when b is null).
void add_bias(float* y, const float* b, int64_t n, int64_t d);
// y = W x (+ b): matmul followed by add_bias.
void linear(const Matrix& w, const float* b, const float* x, int64_t n, float* y, ThreadPool& pool);
// The optional "{name}" F32 vector of n elements, or null when the file does not have it.
const float* optional_vector_f32(const gguf::File& f, const std::string& name, int64_t n);

// Dense-weight helpers that turn a GGUF tensor into a Matrix / norm vector, checking
// shape and type with errors that name the tensor.
Matrix matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows);
const float* vector_f32(const gguf::File& f, const std::string& name, int64_t n);
const gguf::TensorInfo* optional_tensor(const gguf::File& f, const std::string& name);

}  // namespace ws::ops
