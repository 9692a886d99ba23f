// libFuzzer target for PNG/JPEG decoding (vision/image): any input must either decode to
// an image whose buffer matches its size, or throw ImageError; the pixel limit is small so
// that a header declaring a huge image must be refused before its memory is taken. The
// decoded image then goes through the resize and crop paths the projectors use.
// Built and run by tests/fuzz.sh with ASan + UBSan.
#include <cstdlib>

#include "vision/image.h"

namespace {
// Small enough for libFuzzer's memory limit; the refusal path is the same as the server's.
constexpr int64_t kFuzzMaxPixels = int64_t(1) << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ws::vision;
  RgbImage img;
  try {
    img = decode_image({data, size}, kFuzzMaxPixels);
  } catch (const ImageError&) {
    return 0;  // refused: the expected outcome for most inputs
  }
  if (img.width <= 0 || img.height <= 0 || int64_t(img.width) * img.height > kFuzzMaxPixels) std::abort();
  if (img.rgb.size() != size_t(img.width) * size_t(img.height) * 3) std::abort();
  const RgbImage small = resize(img, 7, 5, size % 2 ? ResizeAlgo::bicubic : ResizeAlgo::bilinear, size % 3 == 0);
  if (small.rgb.size() != 7 * 5 * 3) std::abort();
  const RgbImage c = crop(img, img.width / 2, img.height / 2, img.width - img.width / 2, img.height - img.height / 2);
  volatile uint8_t sink = c.rgb.empty() ? 0 : c.rgb.back();
  (void)sink;
  return 0;
}
