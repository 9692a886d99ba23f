// Matmul and vector kernels. Each kernel has a scalar reference and an AVX2/FMA path
// chosen at run time. Results for one token never depend on how many tokens are in the
// batch or how rows are split across threads (batch invariance: every output element is
// one dot product computed by one fixed code path).
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/threadpool.h"

namespace ws {

// A read-only weight matrix as stored in GGUF: `rows` rows of `cols` elements each,
// type `type`, rows contiguous (row stride = row_bytes(type, cols)). y = W x.
struct Matrix {
  DType type = DType::f32;
  int64_t rows = 0;  // output features (ggml ne[1])
  int64_t cols = 0;  // input features (ggml ne[0])
  const uint8_t* data = nullptr;
  size_t row_stride() const { return row_bytes(type, cols); }
};

enum class Isa { scalar, avx2 };
Isa detected_isa();  // what this CPU supports (AVX2+FMA+F16C -> avx2)

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens.
//   x: [n_tokens][w.cols] f32, y: [n_tokens][w.rows] f32.
// The activations are first converted to the weight's dot-product type, as GGUF
// runtimes do: F16 weights -> F16 activations, Q8_0/Q4_0 -> Q8_0, K-quants -> Q8_K,
// BF16 -> BF16, F32 -> F32.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Isa isa = detected_isa());

// Copies row `row` of w dequantized to f32: dst[w.cols].
void get_row(const Matrix& w, int64_t row, float* dst);

}  // namespace ws
