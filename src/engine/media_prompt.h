// Images in prompts: the one place that splits text with media markers, tokenizes the
// pieces and lays each image's chunks out between them, giving the engine prompt tokens,
// media chunks (embeddings from the vision layer's encoder, computed lazily) and the token
// positions of byte offsets in the text. `warmstart run/logits --mmproj` and the server's
// image turns (server/media_turn.h) both build their prompts here.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/turn.h"
#include "tokenizer/tokenizer.h"
#include "vision/context.h"

namespace ws {

inline constexpr const char* kMediaMarker = "<__media__>";

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
  std::vector<std::shared_ptr<const vision::PreparedImage>> images;  // per image: entries + layout
  // [n] the byte offset in the text each token ends at. An image's layout tokens sit just
  // inside its marker (marker start + 1), so an offset inside a marker lands after them.
  std::vector<size_t> text_ends;
};

// Splits `text` at each kMediaMarker, tokenizes the pieces (special tokens parsed, BOS/EOS
// as the model asks on the first piece only) and puts image i's chunk layout at marker i.
// Throws vision::ImageError for undecodable images, std::invalid_argument for a marker/image
// count mismatch, a projector whose output width is not the model's n_embd, or a layout
// token missing from the vocabulary. `vis` and `pool` must outlive the returned media
// chunks. `decode` turns each image's bytes into pixels; empty: vision::decode_image.
MediaPrompt build_media_prompt(const Tokenizer& tok, int32_t lm_n_embd, const std::string& text,
                               std::span<const std::vector<uint8_t>> images, vision::VisionContext& vis,
                               ThreadPool& pool, const vision::ImageDecoder& decode = {});

// Token positions in `mp` of the byte offsets `byte_ends` of the text it was built from
// (message ends for checkpoints), as tokenize_prompt maps them for text-only prompts.
std::vector<int32_t> media_message_ends(const MediaPrompt& mp, std::span<const size_t> byte_ends);

// The placeholder id of row `row` of entry `entry` of an image (always negative).
Token media_placeholder(uint64_t image_hash, int32_t entry, int32_t row);

}  // namespace ws
