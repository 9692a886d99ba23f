// Tensor element types and the GGUF block layouts (byte-compatible with ggml's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace ws {

// Values are ggml's type ids as stored in GGUF tensor infos.
enum class DType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30,
};

struct DTypeTraits {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
  bool supported;       // we can dequantize / compute with it
};

// Traits of a raw type id read from a file; nullopt for ids we do not know at all.
std::optional<DTypeTraits> dtype_traits(uint32_t raw);
const DTypeTraits& traits(DType t);
inline const char* dtype_name(DType t) { return traits(t).name; }
// Parses "q8_0", "Q4_K", "f16", ... (case-insensitive).
std::optional<DType> dtype_from_name(const std::string& s);
// Bytes of one row of n elements; n must be a multiple of block_elems.
size_t row_bytes(DType t, int64_t n);

constexpr int QK4_0 = 32;
constexpr int QK8_0 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

using f16_bits = uint16_t;
using bf16_bits = uint16_t;

#pragma pack(push, 1)
struct block_q4_0 {       // 32 weights: w = d * (q - 8)
  f16_bits d;
  uint8_t qs[QK4_0 / 2];  // low nibbles = elements 0..15, high = 16..31
};
struct block_q8_0 {       // 32 weights: w = d * q
  f16_bits d;
  int8_t qs[QK8_0];
};
struct block_q4_k {       // 256 weights in 8 sub-blocks of 32, 6-bit scales and mins
  f16_bits d;
  f16_bits dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
struct block_q5_k {
  f16_bits d;
  f16_bits dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
struct block_q6_k {       // 256 weights in 16 sub-blocks of 16, 8-bit scales
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  f16_bits d;
};
struct block_q8_k {       // activation format for K-quant dot products (float scale)
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];  // sums of each 16 qs
};
#pragma pack(pop)
static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q4_k) == 144);
static_assert(sizeof(block_q5_k) == 176);
static_assert(sizeof(block_q6_k) == 210);
static_assert(sizeof(block_q8_k) == 292);

// IEEE half / bfloat16 conversions (round to nearest even; NaN kept).
float f16_to_f32(f16_bits h);
f16_bits f32_to_f16(float f);
inline float bf16_to_f32(bf16_bits h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bf16_bits f32_to_bf16(float f);

}  // namespace ws
