#include "vision/image.h"

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ws::vision {
namespace {

void check_size(int64_t w, int64_t h, const char* what) {
  if (w <= 0 || h <= 0) throw ImageError(std::string(what) + " image has no pixels");
  if (w * h > kMaxImagePixels)
    throw ImageError(std::string(what) + " image is too large: " + std::to_string(w) + " x " + std::to_string(h) +
                     " pixels (at most " + std::to_string(kMaxImagePixels) + ")");
}

// Refuses a header that declares more pixels than allowed, before any pixel memory is taken.
void check_budget(int64_t w, int64_t h, int64_t max_pixels, const char* format) {
  if (w > 0 && h > 0 && w * h > std::min(max_pixels, kMaxImagePixels))
    throw ImageTooLargeError(std::string(format) + " image is " + std::to_string(w) + " x " + std::to_string(h) + " = " +
                             std::to_string(w * h) + " pixels, more than the " +
                             std::to_string(std::min(max_pixels, kMaxImagePixels)) + " allowed");
}

// ---- PNG (libpng; errors come back through setjmp, so this frame holds the buffers) ----

struct PngSource {
  const uint8_t* data;
  size_t size, offset;
  char message[256];  // libpng's error text
};

void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->size - src->offset < n) png_error(png, "truncated PNG data");
  std::memcpy(out, src->data + src->offset, n);
  src->offset += n;
}

void png_on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof(src->message), "%s", msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

RgbImage decode_png(std::span<const uint8_t> bytes, int64_t max_pixels) {
  PngSource src{bytes.data(), bytes.size(), 0, "corrupt PNG"};
  RgbImage img;                       // created before setjmp: a longjmp back here skips no destructor
  std::vector<png_bytep> rows;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
  if (!png) throw ImageError("cannot initialise the PNG decoder");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    throw ImageError(std::string("cannot decode PNG: ") + src.message);
  }
  png_set_read_fn(png, &src, png_read_mem);
  png_set_user_limits(png, 1u << 20, 1u << 20);
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  try {
    check_budget(w, h, max_pixels, "PNG");  // thrown here, outside libpng's callbacks
  } catch (const ImageTooLargeError&) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw;
  }
  if (w <= 0 || h <= 0 || w * h > kMaxImagePixels) png_error(png, "image too large (or empty)");
  // Whatever the stored format: 8-bit RGB, no alpha.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(w) * 3) png_error(png, "unexpected row layout after conversion");
  img.width = int32_t(w);
  img.height = int32_t(h);
  img.rgb.resize(size_t(w * h * 3));
  rows.resize(size_t(h));
  for (int64_t y = 0; y < h; ++y) rows[size_t(y)] = img.rgb.data() + y * w * 3;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return img;
}

// ---- JPEG (libjpeg-turbo, same setjmp discipline) ----

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
void jpeg_on_message(j_common_ptr, int) {}  // warnings (e.g. premature end) are not fatal

RgbImage decode_jpeg(std::span<const uint8_t> bytes, int64_t max_pixels) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  RgbImage img;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  std::snprintf(err.message, sizeof(err.message), "corrupt JPEG");
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw ImageError(std::string("cannot decode JPEG: ") + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK)
    ERREXIT1(&cinfo, JERR_CONVERSION_NOTIMPL, 0);  // CMYK is not supported
  cinfo.out_color_space = JCS_RGB;
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  try {
    check_budget(w, h, max_pixels, "JPEG");  // thrown here, outside libjpeg's callbacks
  } catch (const ImageTooLargeError&) {
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  if (w <= 0 || h <= 0 || w * h > kMaxImagePixels) ERREXIT(&cinfo, JERR_IMAGE_TOO_BIG);
  jpeg_start_decompress(&cinfo);
  img.width = int32_t(cinfo.output_width);
  img.height = int32_t(cinfo.output_height);
  img.rgb.resize(size_t(img.width) * size_t(img.height) * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = img.rgb.data() + size_t(cinfo.output_scanline) * size_t(img.width) * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return img;
}

float lerp(float a, float b, float t) { return a + (b - a) * t; }

RgbImage resize_bilinear(const RgbImage& src, int32_t w, int32_t h) {
  RgbImage dst{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  // Corners aligned: target x maps to source x * (w_src - 1) / (w_dst - 1).
  const float xr = w > 1 ? float(src.width - 1) / float(w - 1) : 0.f;
  const float yr = h > 1 ? float(src.height - 1) / float(h - 1) : 0.f;
  for (int32_t y = 0; y < h; ++y) {
    const float py = float(y) * yr;
    const int32_t y0 = std::min(int32_t(py), src.height - 1), y1 = std::min(y0 + 1, src.height - 1);
    const float yf = py - float(y0);
    for (int32_t x = 0; x < w; ++x) {
      const float px = float(x) * xr;
      const int32_t x0 = std::min(int32_t(px), src.width - 1), x1 = std::min(x0 + 1, src.width - 1);
      const float xf = px - float(x0);
      for (int c = 0; c < 3; ++c) {
        const float top = lerp(src.pixel(x0, y0)[c], src.pixel(x1, y0)[c], xf);
        const float bottom = lerp(src.pixel(x0, y1)[c], src.pixel(x1, y1)[c], xf);
        dst.pixel(x, y)[c] = uint8_t(lerp(top, bottom, yf));  // truncated, as llama.cpp does
      }
    }
  }
  return dst;
}

// One cubic through 4 samples at -1, 0, 1, 2, evaluated at t in [0, 1).
float cubic(float p_m1, float p0, float p1, float p2, float t) {
  const float d0 = p_m1 - p0, d2 = p1 - p0, d3 = p2 - p0;
  const float a1 = float(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3);
  const float a2 = float(1.0 / 2 * d0 + 1.0 / 2 * d2);
  const float a3 = float(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3);
  return p0 + a1 * t + a2 * t * t + a3 * t * t * t;
}

// llama.cpp's own bicubic (source x = x_dst * w_src / w_dst, edges clamped, rounded).
RgbImage resize_bicubic(const RgbImage& src, int32_t w, int32_t h) {
  RgbImage dst{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  const float tx = float(src.width) / float(w), ty = float(src.height) / float(h);
  auto at = [&](int32_t x, int32_t y, int c) {
    return float(src.pixel(std::clamp(x, 0, src.width - 1), std::clamp(y, 0, src.height - 1))[c]);
  };
  for (int32_t i = 0; i < h; ++i) {
    for (int32_t j = 0; j < w; ++j) {
      const int32_t x = int32_t(tx * float(j)), y = int32_t(ty * float(i));
      const float dx = tx * float(j) - float(x), dy = ty * float(i) - float(y);
      for (int c = 0; c < 3; ++c) {
        float col[4];  // the 4 rows around y, each interpolated along x
        for (int r = 0; r < 4; ++r)
          col[r] = cubic(at(x - 1, y - 1 + r, c), at(x, y - 1 + r, c), at(x + 1, y - 1 + r, c),
                         at(x + 2, y - 1 + r, c), dx);
        const float v = cubic(col[0], col[1], col[2], col[3], dy);
        dst.pixel(j, i)[c] = uint8_t(std::min(std::max(std::round(v), 0.0f), 255.0f));
      }
    }
  }
  return dst;
}

}  // namespace

RgbImage decode_image(std::span<const uint8_t> bytes, int64_t max_pixels) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (bytes.size() >= 8 && std::equal(kPng, kPng + 8, bytes.begin())) return decode_png(bytes, max_pixels);
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
    return decode_jpeg(bytes, max_pixels);
  if (bytes.empty()) throw ImageError("the image is empty (0 bytes)");
  throw ImageError("unsupported image format (PNG and JPEG are supported)");
}

RgbImage decode_image_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImageError("cannot open image file '" + path + "'");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return decode_image(bytes);
  } catch (const ImageError& e) {
    throw ImageError(path + ": " + e.what());
  }
}

void write_png(const std::string& path, const RgbImage& img) {
  check_size(img.width, img.height, "the");
  png_image pi;
  std::memset(&pi, 0, sizeof(pi));
  pi.version = PNG_IMAGE_VERSION;
  pi.width = png_uint_32(img.width);
  pi.height = png_uint_32(img.height);
  pi.format = PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&pi, path.c_str(), 0, img.rgb.data(), 0, nullptr))
    throw std::runtime_error("cannot write PNG '" + path + "': " + pi.message);
}

uint64_t hash_bytes(std::span<const uint8_t> bytes) {
  // FNV-1a over the bytes, then a splitmix64 finaliser; the length is mixed in too.
  uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t(bytes.size()) * 0x9e3779b97f4a7c15ull);
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

RgbImage resize(const RgbImage& src, int32_t w, int32_t h, ResizeAlgo algo, bool pad) {
  check_size(src.width, src.height, "the source");
  check_size(w, h, "the target");
  if (src.width == w && src.height == h) return src;
  auto run = [&](int32_t rw, int32_t rh) {
    return algo == ResizeAlgo::bilinear ? resize_bilinear(src, rw, rh) : resize_bicubic(src, rw, rh);
  };
  if (!pad) return run(w, h);
  const float scale = std::min(float(w) / float(src.width), float(h) / float(src.height));
  const int32_t nw = std::min(int32_t(std::ceil(float(src.width) * scale)), w);
  const int32_t nh = std::min(int32_t(std::ceil(float(src.height) * scale)), h);
  const RgbImage inner = run(std::max(nw, 1), std::max(nh, 1));
  RgbImage dst{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3, 0)};
  const int32_t ox = (w - inner.width) / 2, oy = (h - inner.height) / 2;
  for (int32_t y = 0; y < inner.height; ++y)
    std::copy_n(inner.pixel(0, y), size_t(inner.width) * 3, dst.pixel(ox, oy + y));
  return dst;
}

RgbImage crop(const RgbImage& src, int32_t x, int32_t y, int32_t w, int32_t h) {
  if (x < 0 || y < 0 || w <= 0 || h <= 0 || x + w > src.width || y + h > src.height)
    throw std::invalid_argument("crop outside the image");
  RgbImage dst{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  for (int32_t r = 0; r < h; ++r) std::copy_n(src.pixel(x, y + r), size_t(w) * 3, dst.pixel(0, r));
  return dst;
}

std::vector<float> normalize_planar(const RgbImage& img, const float mean[3], const float std_[3]) {
  const size_t plane = size_t(img.width) * size_t(img.height);
  std::vector<float> out(3 * plane);  // [3][H][W] f32
  for (size_t i = 0; i < plane; ++i)
    for (int c = 0; c < 3; ++c) {
      const float v = float(img.rgb[i * 3 + size_t(c)]) / 255.0f;
      out[size_t(c) * plane + i] = (v - mean[c]) / std_[c];
    }
  return out;
}

}  // namespace ws::vision
