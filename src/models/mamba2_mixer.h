// The Mamba-2 mixer shared by mamba2, granitehybrid and nemotron_h: in_proj split into
// [z, xBC, dt], causal depthwise conv carried across calls, SiLU, selective scan token
// by token, D skip, SiLU(z) gate, grouped RMSNorm, out_proj. Its per-sequence memory is
// one RecurrentState with two buffers (conv tail, SSM state).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/model.h"
#include "models/ops.h"
#include "tensor/kernels.h"

namespace ws {

struct Mamba2Dims {
  int32_t n_embd = 0;
  int32_t d_inner = 0;   // ssm.inner_size
  int32_t d_state = 0;   // N, ssm.state_size
  int32_t n_heads = 0;   // H, ssm.time_step_rank
  int32_t n_groups = 1;  // G, ssm.group_count; head h uses group h / (H/G)
  int32_t d_conv = 0;    // ssm.conv_kernel
  int32_t head_dim() const { return d_inner / n_heads; }                 // P
  int32_t conv_channels() const { return d_inner + 2 * n_groups * d_state; }  // xBC width
  int32_t in_rows() const { return 2 * d_inner + 2 * n_groups * d_state + n_heads; }
};
// Reads and validates the `{arch}.ssm.*` keys.
Mamba2Dims read_mamba2_dims(const gguf::File& f, const std::string& arch, int32_t n_embd);

struct Mamba2Weights {
  Matrix in_proj;            // [in_rows, n_embd]
  Matrix out_proj;           // [n_embd, d_inner]
  const float* conv_w;       // [conv_channels][d_conv] f32, tap d_conv-1 multiplies the current token
  const float* conv_b;       // [conv_channels] f32 or null
  const float* dt_bias;      // [H] f32
  const float* a;            // [H] f32, A = -exp(A_log) (already negated)
  const float* d;            // [H] f32 skip
  const float* norm;         // [G][d_inner/G] f32 grouped RMSNorm weight
};
// Loads the mixer tensors of one layer; `prefix` is "blk.N.".
Mamba2Weights load_mamba2_weights(const gguf::File& f, const std::string& prefix, const Mamba2Dims& d);

// Element counts of the two RecurrentState buffers: conv tail [d_conv-1][conv_channels]
// and SSM state [H][P][N].
std::vector<size_t> mamba2_state_sizes(const Mamba2Dims& d);

// Runs the mixer of layer il on the n rows of `seqs`. xn: [n][n_embd] normed input, out:
// [n][n_embd] branch output. Each sequence updates its state buffers (its RecurrentState of
// layer il) token by token and advances it by its rows.
void mamba2_mixer(const Mamba2Weights& w, const Mamba2Dims& d, size_t il, SeqSpan seqs, const float* xn, int64_t n,
                  float* out, float eps, ThreadPool& pool);

// Factories of the three files (registry.cpp reaches them through make_mamba2_family).
std::unique_ptr<Model> make_mamba2(const gguf::File& f, const std::string& arch);          // mamba2.cpp
std::unique_ptr<Model> make_granite_hybrid(const gguf::File& f, const std::string& arch);  // granite_hybrid.cpp
std::unique_ptr<Model> make_nemotron_h(const gguf::File& f, const std::string& arch);      // nemotron_h.cpp

}  // namespace ws
