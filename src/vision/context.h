// A loaded projector with its encoder cache (embeddings by image hash, so an image seen in
// an earlier turn is not encoded again). Turning text with media markers into prompt
// tokens is the engine's (engine/media_prompt.h); this layer only encodes images.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"
#include "vision/clip.h"

namespace ws::vision {

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

// The cache key of entry `entry` of the image with hash `image_hash`, and the identity of
// row `row` of its embeddings (the seed of that row's placeholder token in a media prompt).
uint64_t entry_key(uint64_t image_hash, int32_t entry);
uint64_t entry_row_key(uint64_t image_hash, int32_t entry, int32_t row);

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

}  // namespace ws::vision
