#include "server/request_limits.h"

#include <malloc.h>

#include <algorithm>
#include <memory>
#include <string>

#include "server/api_error.h"

namespace ws::server {
namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int64_t non_space_bytes(std::string_view s) {
  return int64_t(std::count_if(s.begin(), s.end(), [](char c) { return !is_space(static_cast<unsigned char>(c)); }));
}

}  // namespace

PromptLengthGuard::PromptLengthGuard(const Tokenizer& tok) {
  // Pieces as the encoder matches them against text: special ones included, since
  // parse_special turns their text into one token.
  for (Token t = 0; t < tok.n_vocab(); ++t)
    max_bytes_per_token_ = std::max(max_bytes_per_token_, non_space_bytes(tok.token_to_piece(t, true)));
}

void PromptLengthGuard::check(std::string_view text, int32_t n_ctx, const char* param) const {
  // Cheap test first: the text cannot be too long if even all of it fits the bound.
  const int64_t limit = int64_t(n_ctx) * max_bytes_per_token_;
  if (int64_t(text.size()) <= limit) return;
  const int64_t counted = non_space_bytes(text);
  if (counted <= limit) return;
  const int64_t at_least = (counted + max_bytes_per_token_ - 1) / max_bytes_per_token_;
  throw context_exceeded("this model's context holds " + std::to_string(n_ctx) + " tokens, but the prompt has at least " +
                             std::to_string(at_least) + " tokens (" + std::to_string(text.size()) +
                             " bytes; refused before tokenizing); shorten it or start the server with a larger -c",
                         param, at_least, n_ctx);
}

void ImageDecodeGate::enter() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return active_ < limit_; });
  ++active_;
}

void ImageDecodeGate::leave() {
  {
    std::lock_guard lock(mu_);
    --active_;
  }
  cv_.notify_one();
}

int ImageDecodeGate::active() const {
  std::lock_guard lock(mu_);
  return active_;
}

vision::ImageDecoder request_image_decoder(ImageDecodeGate& gate, int64_t max_pixels) {
  // Shared by the copies std::function may make; one request decodes its images in order.
  auto left = std::make_shared<int64_t>(max_pixels);
  return [&gate, left, max_pixels](std::span<const uint8_t> bytes) {
    if (*left <= 0)
      throw vision::ImageTooLargeError("the request's images exceed its budget of " + std::to_string(max_pixels) +
                                       " pixels");
    gate.enter();
    struct Leave {
      ImageDecodeGate& g;
      ~Leave() { g.leave(); }
    } leave{gate};
    vision::RgbImage img;
    try {
      img = vision::decode_image(bytes, *left);
    } catch (const vision::ImageTooLargeError& e) {
      throw vision::ImageTooLargeError(std::string(e.what()) + " (the request's budget is " +
                                       std::to_string(max_pixels) + " pixels in all, " + std::to_string(*left) +
                                       " left for this image)");
    }
    *left -= int64_t(img.width) * img.height;
    return img;
  };
}

void bound_allocator_retention() {
  mallopt(M_MMAP_THRESHOLD, 8 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
}

}  // namespace ws::server
