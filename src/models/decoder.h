// The forward frame every architecture shares: empty-batch and room checks, the
// embedding, the layer loop, advancing the state and the output logits live here once;
// an architecture file declares its weights, the memory of each layer and its block.
//
//   x = embed(batch) [* embed_scale_ for token rows]
//   for each layer il: layer_forward(il, x, pass)     <- the architecture's block
//   logits = finish_logits(output(RMSNorm(x)))          <- softcap / logit scale hooks
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/ops.h"

namespace ws {

// The rows of one or more sequences on their way through the layers (SeqRows).
struct LayerPass {
  SeqSpan seqs;       // in row order, covering rows [0, n)
  int64_t n = 0;      // rows of all sequences
  ThreadPool& pool;
  std::vector<float> xn;   // [n][n_embd] f32: normed input of a branch
  std::vector<float> out;  // [n][n_embd] f32: branch output
  // Per-pass inputs an architecture computes once in begin_batch and its layers read;
  // empty unless it fills it. gemma4: [n][n_layer][P] f32 per-layer embedding inputs.
  std::vector<float> extra = {};
};

class Decoder : public Model {
 public:
  const ModelConfig& config() const final { return cfg_; }
  SeqState make_state(const MemoryOptions& opts) const final;
  void forward_many(std::span<SeqStep> steps, ThreadPool& pool) const final;

 protected:
  explicit Decoder(ModelConfig cfg) : cfg_(std::move(cfg)) {}

  // The memory of layer il (its kind and shape).
  virtual std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const = 0;
  // Layer il's update of the residual stream x: [n][n_embd].
  virtual void layer_forward(size_t il, float* x, LayerPass& p) const = 0;
  // Called once per pass after the embedding, before the layers (per-pass inputs).
  virtual void begin_batch(const float* /*x*/, LayerPass& /*p*/) const {}
  // Post-processing of `rows` logit rows: [rows][n_vocab] (softcapping, logit scale).
  virtual void finish_logits(float* /*logits*/, int64_t /*rows*/) const {}

  // x += scale * branch(RMSNorm(x, norm)): the pre-norm block of every family. The
  // branch reads p.xn and writes p.out ([n][n_embd]).
  template <class Branch>
  void pre_norm(float* x, const float* norm, LayerPass& p, Branch&& branch, float scale = 1.f) const {
    ops::rms_norm(x, norm, p.xn.data(), p.n, cfg_.n_embd, cfg_.rms_eps);
    branch(p.xn.data(), p.out.data());
    ops::add_scaled(x, p.out.data(), p.n * cfg_.n_embd, scale);
  }

  ModelConfig cfg_;
  ops::Embeddings emb_;
  float embed_scale_ = 1.f;     // multiplies token embeddings (not input embeddings)
  bool non_causal_ok_ = false;  // attention layers can take a bidirectional batch (image chunks)
};

// Layer memories, one line each in an architecture's layer_memory().
std::unique_ptr<LayerState> full_kv_memory(int32_t n_kv, int32_t head_dim, const MemoryOptions& opts);
std::unique_ptr<LayerState> sliding_kv_memory(int32_t n_kv, int32_t head_dim, int32_t window,
                                              const MemoryOptions& opts);
std::unique_ptr<LayerState> recurrent_memory(std::vector<size_t> buffer_sizes);

// "blk.N." for layer il.
std::string layer_prefix(int64_t il);

}  // namespace ws
