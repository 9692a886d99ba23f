// Evaluating a multimodal prompt straight through (no cache) and writing the
// llama-golden-vision-v1 report (shared/fixtures/README.md 8.7) for `warmstart logits
// --mmproj`: the vision counterpart of logit_report.h, on the same media prompt the
// server's turns use (media_prompt.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/media_prompt.h"
#include "models/model.h"

namespace ws {

struct VisionEval {
  MediaPrompt prompt;
  std::vector<vision::EncodeTrace> traces;               // per image chunk, in prompt order
  std::vector<std::vector<float>> embeddings;    // per image chunk: [n_tokens][n_embd]
  std::vector<float> logits;                     // [n_positions][n_vocab]
};

// Builds the prompt, encodes every image chunk (with intermediate tensors) and evaluates
// all chunks in order on a fresh state, logits at every position.
VisionEval evaluate_multimodal(const Model& model, const Tokenizer& tok, vision::VisionContext& vis,
                               const std::string& text, std::span<const std::vector<uint8_t>> images,
                               int32_t n_ubatch, ThreadPool& pool);

struct ReportFiles {
  std::string model_file, mmproj_file, image_file;
  int32_t image_width = 0, image_height = 0;
};
// Writes PREFIX.json + PREFIX.f32; full logit rows at `positions` (default: the README's set).
void write_vision_report(const std::string& prefix, const VisionEval& ev, const vision::VisionContext& vis,
                         const ModelConfig& cfg, const ReportFiles& files, std::vector<int32_t> positions);

}  // namespace ws
