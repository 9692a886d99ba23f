// Chat turns with images: the rendered text (one kMediaMarker per image) and the image
// bytes -> a TurnRequest. The prompt is built by engine/media_prompt.h (the same builder
// `warmstart run/logits --mmproj` use); this adds the HTTP errors, the context check and
// the serialised encodes.
#pragma once
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "chat/prompt.h"
#include "engine/media_prompt.h"
#include "engine/turn.h"
#include "server/openai_request.h"
#include "vision/context.h"

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

}  // namespace ws::server
