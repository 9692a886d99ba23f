// Matmul and vector kernels. Each kernel has a scalar reference and an AVX2/FMA path
// chosen at run time. Results for one token never depend on how many tokens are in the
// batch or how rows are split across threads (batch invariance: every output element is
// one dot product computed by one fixed code path).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/threadpool.h"

namespace ws {

// Rows of a Q8_0, Q4_K, Q5_K, Q6_K or F16 matrix repacked once at load for this CPU's
// panel kernels: panels of P rows; Q8_0 (kernels_panel.h): per 32-element block, one
// vector of P f32 scales and 8 vectors of P x 4 levels; K-quants (kernels_kquant_layout.h):
// per super-block, the block's bytes 4-byte transposed (same size as the original, Q6_K
// +1%); F16 (kernels_f16_panel.h): [cols][P] f16.
// Anonymous memory for repacked weights, from a 2 MiB boundary and advised for
// transparent huge pages when it spans one: a repacked model is most of RSS, and filling
// it 4 KiB page fault by page fault (after zeroing it, as a std::vector would) cost more
// than the repacking itself.
class PackedBuffer {
 public:
  explicit PackedBuffer(size_t bytes);
  ~PackedBuffer();
  PackedBuffer(const PackedBuffer&) = delete;
  PackedBuffer& operator=(const PackedBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_ = nullptr;  // [bytes] u8
  size_t mapped_ = 0;        // bytes mapped (rounded up to whole pages)
};

// Memory for the repacked matrices of one model: 64-byte aligned slices of large mappings
// (chunks, huge-page advised), so that matrices smaller than a huge page sit on huge pages
// too. Decode streams every weight once per token, and on 4 KiB pages (a TLB miss every
// 4 KiB, and hardware prefetchers stop at page ends) it ran at three quarters of the
// speed: llama bench, 1 thread, BF16 on the AVX2 path 23.7 -> 32.1 tok/s, F16 32.9 -> 43.4
// (bench/kernels_bench --copies shows it per matrix). Thread-safe.
class PackedArena {
 public:
  struct Slice {
    std::shared_ptr<const PackedBuffer> buffer;  // the chunk, kept alive by every slice of it
    uint8_t* data = nullptr;                     // [bytes] u8
  };
  Slice take(size_t bytes);
  // A buffer of its own, outside any arena.
  static Slice own(size_t bytes);

 private:
  static constexpr size_t kChunkBytes = size_t(64) << 20;
  std::mutex mutex_;
  std::shared_ptr<const PackedBuffer> chunk_;  // the one being filled
  size_t used_ = 0;                            // bytes of chunk_ handed out
};

struct PackedRows {
  std::shared_ptr<const PackedBuffer> buffer;  // owns the bytes; one buffer may hold several matrices
  const uint8_t* bytes = nullptr;              // [ceil(rows / P)][panel bytes, see above], inside buffer
  int64_t panel_rows = 0;                      // P: 16 (AVX512-VNNI) or 8 (AVX2)
  const uint8_t* data() const { return bytes; }
};

// A read-only weight matrix as stored in GGUF: `rows` rows of `cols` elements each,
// type `type`, rows contiguous (row stride = row_bytes(type, cols)). y = W x.
struct Matrix {
  Matrix() = default;
  Matrix(DType t, int64_t r, int64_t c, const uint8_t* d) : type(t), rows(r), cols(c), data(d) {}

  DType type = DType::f32;
  int64_t rows = 0;  // output features (ggml ne[1])
  int64_t cols = 0;  // input features (ggml ne[0])
  const uint8_t* data = nullptr;
  // Optional repacked copy (pack_for_cpu); shared by copies of the Matrix, immutable.
  std::shared_ptr<const PackedRows> packed;
  size_t row_stride() const { return row_bytes(type, cols); }
};

// `w` plus a repacked copy of its rows where this CPU's kernels have a packed layout for
// its type (Q8_0, K-quants and F16 with AVX2 or AVX-512); otherwise `w` unchanged.
// Results are bit-identical either way; packing removes the per-call repacking (decode
// speed). get_row reads K-quant rows from the packed copy.
// The packed copy goes to `arena` (a model's, so that its matrices share huge pages), or
// to a buffer of its own without one.
Matrix pack_for_cpu(const Matrix& w, PackedArena* arena = nullptr);
// The same for matrices of one shape and type (the experts of a 3-D tensor), packed into
// one slice.
std::vector<Matrix> pack_for_cpu(const std::vector<Matrix>& same_shape, PackedArena* arena = nullptr);

// scalar: the reference kernels. avx2: the SIMD kernels, which need AVX2+FMA+F16C and also
// take the AVX-512 VNNI / BF16 panel paths where the CPU has them (WARMSTART_ISA=avx2
// keeps them to AVX2).
enum class Isa { scalar, avx2 };
Isa detected_isa();  // what this CPU supports

// y[t][r] = sum_c W[r][c] * x[t][c] for t < n_tokens.
//   x: [n_tokens][w.cols] f32, y: [n_tokens][w.rows] f32.
// The activations are first converted to the weight's dot-product type, as GGUF
// runtimes do: F16 weights -> F16 activations, Q8_0/Q4_0 -> Q8_0, K-quants -> Q8_K,
// BF16 -> BF16, F32 -> F32.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Isa isa = detected_isa());

// dst[i] = f32_to_f16(x[i]) for i < n, bit for bit (F16C where the CPU has AVX2).
void f32_to_f16_row(const float* x, f16_bits* dst, int64_t n);

// Copies row `row` of w dequantized to f32: dst[w.cols].
void get_row(const Matrix& w, int64_t row, float* dst);

}  // namespace ws
