// Feeding a token sequence through a model in micro-batches.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"

namespace ws {

// Evaluates `tokens` on top of `state` in micro-batches of n_ubatch. With
// LogitsMode::all, `logits` receives [tokens.size()][n_vocab]; with last, [n_vocab] of
// the final token; with none, it is left alone.
// `positions`: M-RoPE position components of every token ([tokens.size()][4], Batch::positions),
// or null.
void eval_tokens(const Model& model, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                 LogitsMode mode, std::vector<float>& logits, ThreadPool& pool, const int32_t* positions = nullptr);

// Evaluates n_rows input-embedding rows (e.g. an image chunk: [n_rows][n_embd] f32) on top
// of `state`, in micro-batches of n_ubatch, except that a non-causal chunk goes in one
// batch (its rows attend to each other). Logits as for eval_tokens.
void eval_embeddings(const Model& model, SeqState& state, const float* embeddings, int64_t n_rows, bool non_causal,
                     int32_t n_ubatch, LogitsMode mode, std::vector<float>& logits, ThreadPool& pool,
                     const int32_t* positions = nullptr);

}  // namespace ws
