// Weights of the vision tower and projectors (internal to src/vision).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/kernels.h"
#include "vision/clip.h"

namespace ws::vision {

struct VisionModel::Tower {
  std::vector<uint16_t> patch_f16;   // [E][3][P][P] f16 bits: ggml's conv rounds the kernel to f16
  Matrix patch;                      // F16 view of patch_f16: [E rows][3*P*P cols]
  const float* patch_bias = nullptr; // [E]
  const float* pos = nullptr;        // [pos_side * pos_side][E], row = py * pos_side + px
  int32_t pos_side = 0;
  struct Layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;  // [E]
    Matrix q, k, v, o;                           // [E][E]
    const float *bq, *bk, *bv, *bo;              // [E]
    Matrix up;                                   // [F][E]
    Matrix down;                                 // [E][F]
    const float *bup, *bdown;                    // [F], [E]
  };
  std::vector<Layer> layers;
  const float* post_w = nullptr;  // [E] final LayerNorm (optional)
  const float* post_b = nullptr;
};

struct VisionModel::Projector {
  Matrix fc;                                  // idefics3: [T][s*s*E], no bias
  const float* in_w = nullptr;                // lfm2: [s*s*E] LayerNorm (optional)
  const float* in_b = nullptr;
  Matrix mm1, mm2;                            // lfm2: [H][s*s*E], [T][H]
  const float *b1 = nullptr, *b2 = nullptr;   // lfm2: [H], [T]
  const float* soft_norm = nullptr;           // gemma3: [E] RMSNorm weight
  std::vector<uint8_t> proj_t;                // gemma3: mm.input_projection transposed, [T][E] in its dtype
  Matrix proj;                                // gemma3: view of proj_t
};

// The tower + projector of one of the newer families (qwen3vl_merger, gemma4v), each in its
// own file; the SigLIP-style families use VisionModel's Tower and Projector.
struct VisionEncoder {
  virtual ~VisionEncoder() = default;
  // One entry -> [n_tokens][projection_dim] f32, filling `trace` (if given) in the golden's order.
  virtual std::vector<float> encode(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace) const = 0;
};
std::unique_ptr<VisionEncoder> make_qwen3vl_encoder(const gguf::File& f, const VisionHParams& hp);
std::unique_ptr<VisionEncoder> make_gemma4v_encoder(const gguf::File& f, const VisionHParams& hp);

// LayerNorm as ggml computes it (double sums, biased variance); w, b may be null.
// x, y: [n][d] (may alias).
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t d, float eps);
// Position-embedding grid side x side -> ny x nx (bilinear, antialiased when shrinking).
std::vector<float> resize_position_grid(const float* pos, int32_t side, int32_t E, int32_t nx, int32_t ny);
// A patch-embedding kernel {P, P, 3, E} kept as f16 bits in `store` ([E][3*P*P], the rounding
// ggml's im2col convolution applies), viewed as an F16 Matrix [E rows][3*P*P cols].
Matrix load_patch_kernel(const gguf::File& f, const std::string& name, int64_t E, int64_t K,
                         std::vector<uint16_t>& store);
// The patch convolution as ggml-cpu computes it on the goldens' AVX-512 build: im2col and kernel
// in f16, products accumulated in f32 the way its F16 GEMM (llamafile tinyBLAS, 16 lanes) sums
// them; ~1e-6 from llama.cpp instead of the ~1e-5 a plain F16 matmul gives. kernel: F16
// [E][K]; patches: [n][K]; y: [n][E].
void patch_conv(const Matrix& kernel, const float* patches, int64_t n, float* y, ThreadPool& pool);
// im2col of an entry's planar pixels: [ny*nx][3*P*P] f32 with row p = py * nx + px and columns in
// the kernel's [in][ky][kx] order. Throws unless the entry is a whole number of P-pixel patches.
std::vector<float> im2col(const PixelEntry& e, int32_t P);
// Bidirectional multi-head attention over n rows: heads of d contiguous in q, k, v, out: [n][H*d];
// scores q.k * scale, softmax over all rows (double sum, as ggml).
void vit_attention(const float* q, const float* k, const float* v, int64_t n, int32_t n_head, int32_t d, float scale,
                   float* out, ThreadPool& pool);
// The tower's FFN activation in place: tanh GELU (clip.use_gelu) or quick GELU x*sigmoid(1.702x),
// each through ggml-cpu's fp16 table.
void vit_activation(float* x, int64_t n, bool gelu_quick);
// x * sigmoid(1.702 x) as ggml-cpu evaluates it: the fp16 table at fp16(x), no cut-offs.
float gelu_quick_ggml(float x);
// transformers' smart_resize as mtmd computes it (calc_size_preserved_ratio): sides rounded to
// multiples of a (at least a), the area brought into [min_px, max_px]. Returns {w, h}.
std::pair<int32_t, int32_t> dyn_target_size(int32_t w, int32_t h, int32_t a, int64_t min_px, int64_t max_px);

}  // namespace ws::vision
