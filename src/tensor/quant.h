// Row-wise dequantization and reference quantizers for the GGUF block formats.
// Byte layouts follow ggml exactly (see dtype.h); the quantizers reproduce
// llama.cpp's reference (no importance matrix) results byte for byte where noted.
#pragma once
#include <cstdint>

#include "tensor/dtype.h"

namespace ws {

// dst[n] (f32) <- src (n elements of type t). t must be traits(t).supported.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// dst (n elements of type t) <- src[n] (f32). Supported t: F32, F16, BF16, Q8_0, Q4_0,
// Q4_K, Q5_K, Q6_K. Q8_0 and Q4_0 are byte-identical to llama.cpp's quantizer.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Activation quantizers used by the matmul kernels (n multiple of 32 / 256).
void quantize_row_q8_0(const float* src, block_q8_0* dst, int64_t n);
void quantize_row_q8_k(const float* src, block_q8_k* dst, int64_t n);

}  // namespace ws
