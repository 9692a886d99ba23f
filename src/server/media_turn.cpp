#include "server/media_turn.h"

#include "server/generation.h"

#include <stdexcept>
#include <string>

#include "server/api_error.h"

namespace ws::server {

TurnRequest make_media_turn_request(const Tokenizer& tok, const VisionSupport& vision, std::mutex& encode_mu,
                                    const chat::RenderedPrompt& prompt, std::span<const std::vector<uint8_t>> images,
                                    const GenerationOptions& gen, int32_t n_ctx, const vision::ImageDecoder& decode) {
  if (!vision.context)
    throw bad_request("this server has no vision projector: start it with --mmproj FILE to send images", "messages",
                      "images_not_supported");
  MediaPrompt mp;
  try {
    mp = build_media_prompt(tok, vision.lm_n_embd, prompt.text, images, *vision.context, *vision.pool, decode);
  } catch (const vision::ImageTooLargeError& e) {
    throw ApiError(413, std::string("image too large: ") + e.what() + "; send smaller images or start the server with a "
                   "larger --max-image-pixels", "invalid_request_error", "messages", "image_too_large");
  } catch (const vision::ImageError& e) {
    throw bad_request(std::string("invalid image: ") + e.what(), "messages", "invalid_image");
  } catch (const std::invalid_argument& e) {
    throw bad_request(e.what(), "messages", "invalid_value");
  }
  const int32_t n = int32_t(mp.tokens.size());
  if (n >= n_ctx)
    throw bad_request("this model's context holds " + std::to_string(n_ctx) + " tokens, but the prompt has " +
                          std::to_string(n) + " tokens (images included); shorten it, send fewer or smaller images, "
                          "or start the server with a larger -c",
                      "messages", "context_length_exceeded");
  TurnRequest r;
  r.message_ends = media_message_ends(mp, prompt.message_ends);
  r.prompt = std::move(mp.tokens);
  r.media = std::move(mp.media);
  for (MediaChunk& c : r.media)
    c.embeddings = [inner = std::move(c.embeddings), &encode_mu] {
      std::lock_guard lock(encode_mu);
      return inner();
    };
  r.media_ends = std::move(mp.media_ends);
  r.max_tokens = gen.max_tokens > 0 ? gen.max_tokens : n_ctx - n;
  apply_generation(tok, gen, r);
  return r;
}

}  // namespace ws::server
