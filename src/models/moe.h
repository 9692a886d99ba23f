// The mixture-of-experts FFN (llama.cpp's build_moe_ffn) shared by qwen3moe, lfm2moe,
// granitehybrid MoE, nemotron_h_moe, qwen35moe and gpt-oss. Per token:
//   l = router x (+ router bias);  p = gating(l)
//   experts e_0..e_{k-1}: the k largest p + selection_bias, best first
//   w_j = p[e_j] (gpt-oss: softmax over the chosen logits); normalised and scaled as the
//   architecture says;  y = sum_j w_j * expert_{e_j}(x), in rank order;  + shared expert.
// Prefill groups the batch's tokens by expert, so each expert's weights stream once per
// batch; a token's result is a fixed sequence of operations on its own row (the matmuls
// are batch-invariant), so it never depends on the other tokens of the batch. The active
// experts (and the shared one) run side by side on the pool's threads, each expert's
// matmuls on one thread. Expert weights are repacked at load like the dense ones (all
// experts of a tensor in one buffer) and the mapped original let go, so RSS holds one
// copy; decode reads only the chosen experts' panels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/kernels.h"

namespace ws {

enum class MoeGating {
  softmax,           // p = softmax(l) over all experts
  sigmoid,           // p = sigmoid(l) elementwise
  softmax_selected,  // select by l; weights = softmax over the k chosen logits (gpt-oss)
};
enum class ExpertAct {
  swiglu,       // down(silu(gate x) * up x)
  relu2,        // down(relu(up x)^2), no gate tensor
  swiglu_oai,   // gpt-oss: g = min(gate x, 7), u = clamp(up x, -7, 7), down(g sigmoid(1.702 g) (u + 1))
};

struct MoeOptions {
  int32_t n_used = 0;          // k: experts per token
  MoeGating gating = MoeGating::softmax;
  ExpertAct act = ExpertAct::swiglu;     // of the routed experts and the shared one
  bool normalize = true;       // w_j /= max(sum_j w_j, 2^-14)
  float scale = 1.f;           // w_j *= scale (unless 0 or 1)
};

// One FFN's weights: one matrix per expert.
struct ExpertMatrices {
  std::vector<Matrix> m;     // [n_expert] each [rows, cols]
  const float* bias = nullptr;  // [n_expert][rows] f32, or null
};
struct MoeWeights {
  Matrix router;                          // [n_expert, n_embd] ffn_gate_inp
  const float* router_bias = nullptr;     // [n_expert] or null (gpt-oss)
  const float* selection_bias = nullptr;  // [n_expert] exp_probs_b, or null
  ExpertMatrices gate, up;                // [n_ff_exp, n_embd] each (gate empty for relu2)
  ExpertMatrices down;                    // [n_embd, n_ff_exp] each
  // Shared expert, dense, same activation as the routed ones (empty when absent).
  Matrix sh_gate, sh_up;                  // [n_ff_shared, n_embd]
  Matrix sh_down;                         // [n_embd, n_ff_shared]
  const float* sh_gate_inp = nullptr;     // [n_embd]: shared output *= sigmoid(sh_gate_inp . x), or null
  int64_t n_expert() const { return int64_t(up.m.size()); }
};

// Loads "{prefix}ffn_*" of one MoE layer: n_expert experts of width n_ff_exp, and a
// shared expert of width n_ff_shared when it is > 0. Names the tensor and the expected
// shape when one is missing or misshapen.
MoeWeights load_moe(const gguf::File& f, const std::string& prefix, int64_t n_embd, int64_t n_expert,
                    int64_t n_ff_exp, int64_t n_ff_shared, ExpertAct act);

// out = MoE(xn) (+ shared expert). xn, out: [n][n_embd].
void moe_ffn(const MoeWeights& w, const MoeOptions& o, const float* xn, int64_t n, float* out, ThreadPool& pool);

}  // namespace ws
