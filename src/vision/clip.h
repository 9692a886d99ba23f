// A vision projector ("mmproj" GGUF, general.architecture = clip): the vision tower (SigLIP-style,
// Qwen3-VL's or Gemma 4's), the projector that maps its output to language-model embeddings, and
// the preprocessing + chunk layout each projector type expects (README section 8).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/kernels.h"
#include "tensor/threadpool.h"
#include "vision/image.h"

namespace ws::vision {

enum class ProjectorType { idefics3, lfm2, gemma3, qwen3vl_merger, gemma4v };
const char* projector_name(ProjectorType t);

struct VisionHParams {
  ProjectorType projector = ProjectorType::idefics3;
  int32_t image_size = 0;       // S: tile / input side
  int32_t patch_size = 0;       // P
  int32_t n_embd = 0;           // E: tower width
  int32_t n_ff = 0;             // F
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t projection_dim = 0;   // T: language-model n_embd
  int32_t scale_factor = 0;     // s: pixel shuffle / pooling / merge factor
  int32_t preproc_image_size = 0;  // idefics3: longest edge before tiling
  // Dynamic resolution (qwen3vl_merger, gemma4v): the image is resized so that its token count
  // lies in [min_tokens, max_tokens]; image_size is then unused.
  int32_t min_tokens = 0, max_tokens = 0;
  bool gelu_quick = false;      // FFN activation x*sigmoid(1.702x): files without clip.use_gelu
  float eps = 1e-6f;            // tower norm eps
  float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.5f, 0.5f};
};

// One image entry as the tower sees it: planar normalised pixels.
struct PixelEntry {
  int32_t width = 0, height = 0;
  std::vector<float> pixels;  // [3][height][width] f32
};

// Intermediate tensors of one encode (for the golden checks).
struct EncodeTrace {
  std::vector<float> patch_embd_plus_pos;  // [n_patches][E]
  std::vector<float> vit_out;              // [n_patches][E]
};

// A piece of an image's chunk layout: marker text, a marker token looked up by its
// piece, or the embeddings of entry `entry`.
struct LayoutItem {
  enum Kind { kText, kPiece, kEmbeddings } kind = kText;
  std::string text;   // text (tokenized with special tokens) or the piece to look up
  int32_t entry = -1;
  bool non_causal = false;  // embeddings: the LM attends bidirectionally inside the chunk
};

// What one image becomes: entries for the tower and the layout around their embeddings.
struct VisionEncoder;  // tower_impl.h: the newer families' tower + projector

struct PreparedImage {
  std::vector<PixelEntry> entries;
  std::vector<LayoutItem> layout;
};

class VisionModel {
 public:
  // Reads hyper-parameters and weights; throws naming the file for anything unsupported
  // (another architecture, projector type, missing or misshapen tensors).
  explicit VisionModel(const gguf::File& f);
  ~VisionModel();
  VisionModel(const VisionModel&) = delete;
  VisionModel& operator=(const VisionModel&) = delete;

  const VisionHParams& hparams() const { return hp_; }
  // Resize / tile / normalise an image and lay out its chunks, as llama.cpp's mtmd does.
  PreparedImage prepare(const RgbImage& img) const;
  // Tower + projector for one entry -> [n_tokens][projection_dim] f32.
  std::vector<float> encode(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace = nullptr) const;
  // Embedding rows an entry of this size produces.
  int64_t tokens_for(const PixelEntry& e) const;
  // The grid those rows lie on, {columns, rows}, as mtmd reports it (M-RoPE image positions):
  // qwen3vl_merger's merged patch grid, else one row of tokens_for(e).
  std::pair<int32_t, int32_t> token_grid(const PixelEntry& e) const;

  struct Tower;
  struct Projector;

 private:
  std::vector<float> run_tower(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace) const;
  std::vector<float> project(const std::vector<float>& vit_out, int32_t nx, int32_t ny, ThreadPool& pool) const;
  void load_siglip(const gguf::File& f);
  void load_projector(const gguf::File& f);

  VisionHParams hp_;
  std::unique_ptr<Tower> tower_;          // SigLIP-style families
  std::unique_ptr<Projector> proj_;
  std::unique_ptr<VisionEncoder> encoder_;  // qwen3vl_merger, gemma4v
};

}  // namespace ws::vision
