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
void eval_tokens(const Model& model, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                 LogitsMode mode, std::vector<float>& logits, ThreadPool& pool);

}  // namespace ws
