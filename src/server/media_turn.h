// Chat turns with images: the rendered text (one vision::kMediaMarker per image) and the
// image bytes -> prompt tokens, media chunks and checkpoint positions for the engine.
#pragma once
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "chat/prompt.h"
#include "engine/prompt.h"
#include "engine/turn.h"
#include "server/openai_request.h"
#include "vision/media.h"

namespace ws::server {

// What `serve --mmproj` gives the server. The context and pool live as long as the server:
// image embeddings are computed lazily inside Engine::run_turn, long after the request was
// parsed. `encode_mu` serialises encodes, because one ThreadPool serves one caller at a
// time and several slots may need an image at once.
struct VisionSupport {
  vision::VisionContext* context = nullptr;  // null: no --mmproj, image requests are refused
  ThreadPool* pool = nullptr;
  int32_t lm_n_embd = 0;
};

// Builds the media prompt and checks it against the context. Bad images, a marker/image
// count mismatch and a prompt longer than the context are ApiError 400; images over the
// pixel budget `decode` applies are 413. `decode`: empty = vision::decode_image.
TurnRequest make_media_turn_request(const Tokenizer& tok, const VisionSupport& vision, std::mutex& encode_mu,
                                    const chat::RenderedPrompt& prompt, std::span<const std::vector<uint8_t>> images,
                                    const GenerationOptions& gen, int32_t n_ctx,
                                    const vision::ImageDecoder& decode = {});

// Token positions in `mp` of the byte offsets `byte_ends` of `text` (message ends for
// checkpoints). Empty when the layout cannot be matched (no message checkpoints then,
// rather than wrong ones).
std::vector<int32_t> media_message_ends(const Tokenizer& tok, const vision::VisionContext& vis, const std::string& text,
                                        std::span<const size_t> byte_ends, const vision::MediaPrompt& mp);

}  // namespace ws::server
