// Element-wise and attention operations shared by the architecture files.
// All work on f32 rows; each output row depends only on its own inputs (batch invariance).
#pragma once
#include <cstdint>

#include "memory/state.h"
#include "models/model.h"
#include "tensor/kernels.h"

namespace ws::ops {

// y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w, for n rows of d. x, y: [n][d]; w: [d] (may be null).
void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps);
// x[i] = silu(g[i]) * x[i] for i < n (SwiGLU gate applied in place on the up projection).
void swiglu(const float* g, float* x, int64_t n);
// a[i] += b[i] * scale.
void add_scaled(float* a, const float* b, int64_t n, float scale = 1.f);
// Rotates the first n_rot dims of each head of x: [n_tokens][n_heads][head_dim],
// token t at position pos0 + t.
void rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos0,
          float base, RopeType type);

struct AttentionParams {
  int32_t n_head = 0;
  float scale = 1.f;    // multiplies q.k before the softmax
  int32_t window = 0;   // sliding window: a query at p sees keys p0 with p - p0 < window; 0 = all
};
// Causal attention of n_tokens queries at positions pos0.. against kv, which already holds
// the new tokens (kv.position() == pos0 + n_tokens).
//   q: [n_tokens][n_head][head_dim], out: [n_tokens][n_head][head_dim].
// GQA: query head h reads kv head h / (n_head / n_kv_heads).
void attention(const float* q, const KvStore& kv, int64_t n_tokens, int32_t pos0, const AttentionParams& p,
               float* out, ThreadPool& pool);

// Dense-weight helpers that turn a GGUF tensor into a Matrix / norm vector, checking
// shape and type with errors that name the tensor.
Matrix matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows);
const float* vector_f32(const gguf::File& f, const std::string& name, int64_t n);
const gguf::TensorInfo* optional_tensor(const gguf::File& f, const std::string& name);

}  // namespace ws::ops
