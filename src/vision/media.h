// Images in prompts: the encoder cache (embeddings by image hash, so an image seen in an
// earlier turn is not encoded again) and the builder that turns text with media markers
// plus image bytes into prompt tokens and media chunks for the engine.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/turn.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "vision/clip.h"

namespace ws::vision {

inline constexpr const char* kMediaMarker = "<__media__>";

// Encoded embeddings by key (image hash + entry), accounted in bytes, least recently
// used evicted first. Thread-safe.
class EncoderCache {
 public:
  using Rows = std::shared_ptr<const std::vector<float>>;  // [n_tokens][n_embd] f32
  explicit EncoderCache(size_t budget_bytes) : budget_(budget_bytes) {}
  Rows find(uint64_t key);
  void put(uint64_t key, Rows rows);
  size_t bytes() const;
  size_t entries() const;

 private:
  struct Slot {
    Rows rows;
    std::list<uint64_t>::iterator lru;
  };
  mutable std::mutex mu_;
  size_t budget_, bytes_ = 0;
  std::list<uint64_t> lru_;  // most recent first
  std::unordered_map<uint64_t, Slot> slots_;
};

// A loaded projector with its encoder cache: one per --mmproj, shared by turns.
class VisionContext {
 public:
  // `file` must outlive the context (weights point into its mapping).
  VisionContext(const gguf::File& file, size_t cache_budget_bytes) : model_(file), cache_(cache_budget_bytes) {}
  const VisionModel& model() const { return model_; }
  EncoderCache& cache() { return cache_; }
  // Embeddings of entry `entry` of the image with hash `image_hash`: cached, or encoded now.
  EncoderCache::Rows embeddings(uint64_t image_hash, int32_t entry, const PixelEntry& e, ThreadPool& pool);
  uint64_t encode_calls() const;  // entries actually run through the tower

 private:
  VisionModel model_;
  EncoderCache cache_;
  mutable std::mutex mu_;
  uint64_t encode_calls_ = 0;
};

// One chunk of a built prompt (text or one image entry's embeddings).
struct PromptChunk {
  bool image = false;
  int32_t pos0 = 0, n = 0;
  int32_t image_index = -1, entry = -1;  // image chunks: which image and which of its entries
  bool non_causal = false;
};

struct MediaPrompt {
  std::vector<Token> tokens;          // [n]; negative placeholders (from the image hash) at image rows
  std::vector<MediaChunk> media;      // for TurnRequest::media (embeddings computed lazily)
  std::vector<int32_t> media_ends;    // checkpoint positions: each image's start and the position after it
  std::vector<PromptChunk> chunks;
  std::vector<uint64_t> image_hashes;  // per image
  std::vector<std::shared_ptr<const PreparedImage>> images;  // per image: entries + layout
};

// Splits `text` at each kMediaMarker, tokenizes the pieces (special tokens parsed, BOS/EOS
// as the model asks on the first piece only) and puts image i's chunk layout at marker i.
// Throws ImageError for undecodable images, std::invalid_argument for a marker/image count
// mismatch, a projector whose output width is not the model's n_embd, or a layout token
// missing from the vocabulary. `vis` and `pool` must outlive the returned media chunks.
// `decode` turns each image's bytes into pixels (the server's applies a per-request pixel
// budget and bounds concurrent decodes); empty: decode_image.
using ImageDecoder = std::function<RgbImage(std::span<const uint8_t>)>;
MediaPrompt build_media_prompt(const Tokenizer& tok, int32_t lm_n_embd, const std::string& text,
                               std::span<const std::vector<uint8_t>> images, VisionContext& vis, ThreadPool& pool,
                               const ImageDecoder& decode = {});

// The placeholder id of row `row` of entry `entry` of an image (always negative).
Token media_placeholder(uint64_t image_hash, int32_t entry, int32_t row);

}  // namespace ws::vision
