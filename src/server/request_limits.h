// Bounds on what one request may make the server compute or allocate before it is known
// to fit: prompt text far too long for the context is refused without tokenizing it, and
// images are decoded under a per-request pixel budget with a bound on concurrent decodes.
#pragma once
#include <cstdint>
#include <mutex>
#include <condition_variable>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "vision/image.h"

namespace ws::server {

// A prompt is refused for length before tokenizing when its text alone proves it cannot
// fit. Why this is a proof: each token stands for at most B bytes of the input that are not
// whitespace, where B is the most non-whitespace bytes any vocabulary piece decodes to (at
// least 4: an unknown character, up to 4 bytes of UTF-8, may become one <unk> or byte
// token). Whitespace is left out of both sides because some tokenizers drop it (phi-3
// strips whitespace after special tokens). So tokens >= non_ws_bytes / B, and text with
// more than n_ctx * B such bytes needs more than n_ctx tokens. The bound is loose for
// ordinary text (it only stops what cannot possibly fit), but it is exact in direction: it
// never refuses a prompt that would have fitted.
class PromptLengthGuard {
 public:
  explicit PromptLengthGuard(const Tokenizer& tok);
  // Throws ApiError 400 (context_length_exceeded, naming n_ctx) when `text` cannot fit.
  void check(std::string_view text, int32_t n_ctx, const char* param) const;
  int64_t max_bytes_per_token() const { return max_bytes_per_token_; }

 private:
  int64_t max_bytes_per_token_ = 4;
};

// At most `limit` image decodes at once in the whole server: a decode holds width x height
// x 3 bytes, so this and the per-request pixel budget bound decode memory by configuration.
class ImageDecodeGate {
 public:
  explicit ImageDecodeGate(int limit) : limit_(limit < 1 ? 1 : limit) {}
  ImageDecodeGate(const ImageDecodeGate&) = delete;
  ImageDecodeGate& operator=(const ImageDecodeGate&) = delete;
  void enter();
  void leave();
  int active() const;

 private:
  const int limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;
};

// A decoder for one request's images: each is decoded under the gate, with what is left
// of the request's pixel budget (`max_pixels` over all its images). Over budget:
// vision::ImageTooLargeError, thrown from the image header before pixel memory is taken.
vision::ImageDecoder request_image_decoder(ImageDecodeGate& gate, int64_t max_pixels);

// Makes glibc give large freed buffers back to the system (call once at server start).
// By default it raises its mmap threshold to the largest buffer freed so far (up to 32 MiB)
// and never trims the top of a thread's arena below twice that, so every connection thread
// that once read a large body keeps tens of MiB that even malloc_trim cannot release. With
// fixed thresholds, buffers of 8 MiB and more are mapped and unmapped on their own, and an
// arena whose free top exceeds 16 MiB shrinks at once.
void bound_allocator_retention();

}  // namespace ws::server
