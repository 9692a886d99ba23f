// /v1/embeddings as llama-server serves a generative model: the final hidden state (the
// last norm's output, before the LM head) pooled over the input's tokens (mean, or the
// last token's) and L2-normalised.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"

namespace ws::server {

enum class Pooling { mean, last };
Pooling parse_pooling(const std::string& s);  // throws std::invalid_argument

// [n_embd] f32: the pooled, L2-normalised embedding of `tokens`, computed on a fresh state
// in micro-batches of n_ubatch.
std::vector<float> embed_tokens(const Model& model, const MemoryOptions& memory, std::span<const Token> tokens,
                                Pooling pooling, int32_t n_ubatch, ThreadPool& pool);

// OpenAI's base64 encoding_format: the floats' little-endian bytes.
std::string base64_floats(std::span<const float> v);

}  // namespace ws::server
