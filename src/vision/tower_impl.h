// Weights of the vision tower and projectors (internal to src/vision).
#pragma once
#include <cstdint>
#include <vector>

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

// LayerNorm as ggml computes it (double sums, biased variance); w, b may be null.
// x, y: [n][d] (may alias).
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t d, float eps);
// Position-embedding grid side x side -> ny x nx (bilinear, antialiased when shrinking).
std::vector<float> resize_position_grid(const float* pos, int32_t side, int32_t E, int32_t nx, int32_t ny);

}  // namespace ws::vision
