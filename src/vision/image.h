// Decoded images and the uint8 resize / crop operations of llama.cpp's mtmd
// preprocessing (shared/fixtures/README.md 8.4): every resize happens on 8-bit RGB.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ws::vision {

// Bad image input (corrupt, truncated, unsupported, too large): the server maps it to 400.
class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RgbImage {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3] uint8, row-major from the top-left
  uint8_t* pixel(int32_t x, int32_t y) { return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
  const uint8_t* pixel(int32_t x, int32_t y) const {
    return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3;
  }
};

// An image whose header declares more pixels than the decoder may allocate. Thrown after
// reading the header only, before any pixel memory is taken (the server answers 413).
class ImageTooLargeError : public ImageError {
 public:
  using ImageError::ImageError;
};

// Largest image accepted by the decoders (width * height): a guard against decompression bombs.
inline constexpr int64_t kMaxImagePixels = int64_t(8192) * 8192;

// Decodes PNG or JPEG bytes (detected by signature) to 8-bit RGB: alpha dropped, gray
// expanded, 16-bit samples cut to their high byte (what stb_image gives llama.cpp).
// Throws ImageTooLargeError when width * height exceeds max_pixels (checked from the header,
// so a decompression bomb costs no memory), ImageError with a clear message for anything else.
RgbImage decode_image(std::span<const uint8_t> bytes, int64_t max_pixels = kMaxImagePixels);
RgbImage decode_image_file(const std::string& path);  // reads, then decode_image
// A decoder the media prompt builder calls per image (the server's applies a per-request
// pixel budget and bounds concurrent decodes); empty: decode_image.
using ImageDecoder = std::function<RgbImage(std::span<const uint8_t>)>;
// Writes 8-bit RGB PNG (tests and tools).
void write_png(const std::string& path, const RgbImage& img);

// 64-bit identity of an image's encoded bytes (the encoder cache and prefix-tree key).
uint64_t hash_bytes(std::span<const uint8_t> bytes);

enum class ResizeAlgo { bilinear, bicubic };
// Resizes to w x h. `pad`: keep the aspect ratio (scale to fit, sides rounded up, centered
// on black), else stretch. Same size -> plain copy.
RgbImage resize(const RgbImage& src, int32_t w, int32_t h, ResizeAlgo algo, bool pad);
RgbImage crop(const RgbImage& src, int32_t x, int32_t y, int32_t w, int32_t h);

// uint8 RGB -> planar f32 [3][H][W]: v = u8 / 255, then (v - mean[c]) / std[c], f32 ops in that order.
std::vector<float> normalize_planar(const RgbImage& img, const float mean[3], const float std_[3]);

}  // namespace ws::vision
