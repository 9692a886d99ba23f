// The orthonormal Walsh-Hadamard rotation llama.cpp applies around a quantized KV cache
// (its PR 21038): H = the Sylvester matrix of order n (a power of two) scaled by
// 1/sqrt(n), so H = H^T = H^-1. Rotating q and k leaves every q.k unchanged, and rotating
// the attention output undoes a rotation of v; what changes is that outliers are spread
// over the block before the 4- or 8-bit rounding.
#pragma once
#include <cstdint>

namespace ws {

// x: [count][n] f32, each run of n values replaced by H times it (fast transform: n log n
// additions, then the scale). Not bit-identical to llama.cpp's matrix product; the
// rounding differs in the last bits only.
void hadamard_rotate(float* x, int64_t count, int32_t n);

}  // namespace ws
