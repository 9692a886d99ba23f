// Matmul driver (activation conversion, thread split, ISA dispatch) and the scalar
// reference dot products.
//
// The scalar dots follow ggml's generic algorithms: integer products within a block,
// then one float multiply-add per block with the product of the two block scales. They
// read quant values straight from the block layouts (not via bsums) so that they check
// the activation quantizer's bsums independently of the SIMD paths, which use them.
// Quantized types run the same float sequence as the SIMD panels (std::fma), so all
// paths give bit-identical results.
#include "tensor/kernels.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/kernels_impl.h"
#include "tensor/kernels_kquant_layout.h"
#include "tensor/quant.h"

namespace ws {
namespace {

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return has;
}

// ---- scalar dot products: n elements of one weight row and one activation row ----

float dot_f32(const float* w, const float* x, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += w[i] * x[i];
  return s;
}

float dot_f16(const f16_bits* w, const f16_bits* x, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s = std::fma(f16_to_f32(w[i]), f16_to_f32(x[i]), s);
  return s;
}

// BF16 in llama.cpp's order (kernels_impl.h, Bf16Order): lane j of G takes the column
// pairs p = G * c + j, c = 0, 1, ..., odd column first.
float dot_bf16(const bf16_bits* w, const bf16_bits* x, const detail::Bf16Order& o) {
  float lanes[32] = {};  // [G] lane sums
  const int64_t pairs = o.lanes * o.chunks;
  for (int64_t p = 0; p < pairs; ++p) {
    float& l = lanes[p % o.lanes];
    l = detail::bf16_step(bf16_to_f32(w[2 * p + 1]), bf16_to_f32(x[2 * p + 1]), l);
    l = detail::bf16_step(bf16_to_f32(w[2 * p]), bf16_to_f32(x[2 * p]), l);
  }
  const float r1 = detail::bf16_lane_tree(lanes);
  if (o.sets == 1) return r1;
  return detail::bf16_vec_dot_end(r1, detail::bf16_lane_tree(lanes + 16), w + 2 * pairs, x + 2 * pairs, o.tail);
}

float dot_q8_0(const block_q8_0* w, const block_q8_0* x, int64_t nb) {
  float s = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sumi = 0;
    for (int j = 0; j < QK8_0; ++j) sumi += int32_t(w[b].qs[j]) * x[b].qs[j];
    s = std::fma(float(sumi), f16_to_f32(w[b].d) * f16_to_f32(x[b].d), s);
  }
  return s;
}

float dot_q4_0(const block_q4_0* w, const block_q8_0* x, int64_t nb) {
  float s = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sumi = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = (w[b].qs[j] & 0x0F) - 8;  // element j
      const int hi = (w[b].qs[j] >> 4) - 8;    // element j + 16
      sumi += lo * x[b].qs[j] + hi * x[b].qs[j + QK4_0 / 2];
    }
    s = std::fma(float(sumi), f16_to_f32(w[b].d) * f16_to_f32(x[b].d), s);
  }
  return s;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K share everything but the high bit; qh == nullptr means Q4_K.
// Returns (sum of sc*q*xq, sum of m*xq) for one super-block.
void k4_block_sums(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                   const int8_t* xq, int32_t* sum_q, int32_t* sum_m) {
  *sum_q = 0;
  *sum_m = 0;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    scale_min_k4(j, scales, &sc, &m);
    const int chunk = j / 2;         // 64-element chunk sharing 32 qs bytes
    const int shift = (j % 2) * 4;   // low nibbles first, then high nibbles
    int32_t isum = 0, xsum = 0;
    for (int l = 0; l < 32; ++l) {
      int q = (qs[32 * chunk + l] >> shift) & 0x0F;
      if (qh) q += ((qh[l] >> j) & 1) << 4;
      isum += q * xq[32 * j + l];
      xsum += xq[32 * j + l];
    }
    *sum_q += sc * isum;
    *sum_m += m * xsum;
  }
}

// Q4_K / Q5_K / Q6_K: one integer sum per super-block (two with mins), then the float
// sequence of kernels_kquant_panel.h.
float dot_q4_k(const block_q4_k* w, const block_q8_k* x, int64_t nb) {
  float s = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum_q = 0, sum_m = 0;
    k4_block_sums(w[b].scales, w[b].qs, nullptr, x[b].qs, &sum_q, &sum_m);
    s = std::fma(float(sum_q), f16_to_f32(w[b].d) * x[b].d, s);
    s = std::fma(-float(sum_m), f16_to_f32(w[b].dmin) * x[b].d, s);
  }
  return s;
}

float dot_q5_k(const block_q5_k* w, const block_q8_k* x, int64_t nb) {
  float s = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum_q = 0, sum_m = 0;
    k4_block_sums(w[b].scales, w[b].qs, w[b].qh, x[b].qs, &sum_q, &sum_m);
    s = std::fma(float(sum_q), f16_to_f32(w[b].d) * x[b].d, s);
    s = std::fma(-float(sum_m), f16_to_f32(w[b].dmin) * x[b].d, s);
  }
  return s;
}

float dot_q6_k(const block_q6_k* w, const block_q8_k* x, int64_t nb) {
  float s = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sumi = 0;
    for (int i = 0; i < QK_K; ++i) {
      // Element i: half h (128 each), quarter q within the half, lane l.
      const int h = i / 128, q = (i % 128) / 32, l = i % 32;
      const uint8_t lo = w[b].ql[64 * h + 32 * (q & 1) + l];
      const int low4 = (q < 2) ? (lo & 0x0F) : (lo >> 4);
      const int high2 = (w[b].qh[32 * h + l] >> (2 * q)) & 3;
      const int v = (low4 | (high2 << 4)) - 32;
      sumi += int32_t(w[b].scales[i / 16]) * v * x[b].qs[i];
    }
    s = std::fma(float(sumi), f16_to_f32(w[b].d) * x[b].d, s);
  }
  return s;
}

float dot_row(DType t, const uint8_t* w, const uint8_t* x, int64_t n) {
  switch (t) {
    case DType::f32: return dot_f32((const float*)w, (const float*)x, n);
    case DType::f16: return dot_f16((const f16_bits*)w, (const f16_bits*)x, n);
    case DType::q8_0: return dot_q8_0((const block_q8_0*)w, (const block_q8_0*)x, n / QK8_0);
    case DType::q4_0: return dot_q4_0((const block_q4_0*)w, (const block_q8_0*)x, n / QK4_0);
    case DType::q4_k: return dot_q4_k((const block_q4_k*)w, (const block_q8_k*)x, n / QK_K);
    case DType::q5_k: return dot_q5_k((const block_q5_k*)w, (const block_q8_k*)x, n / QK_K);
    case DType::q6_k: return dot_q6_k((const block_q6_k*)w, (const block_q8_k*)x, n / QK_K);
    default: throw std::invalid_argument("matmul: unsupported weight type");
  }
}

// Converts one activation row to the dot type; deterministic per row, so the converted
// activations of a token never depend on the batch it came in.
void convert_row(DType dt, const float* x, uint8_t* dst, int64_t n) {
  switch (dt) {
    case DType::f32: std::memcpy(dst, x, size_t(n) * sizeof(float)); break;
    case DType::f16: f32_to_f16_row(x, (f16_bits*)dst, n); break;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) ((bf16_bits*)dst)[i] = f32_to_bf16(x[i]);
      break;
    case DType::q8_0: quantize_row_q8_0(x, (block_q8_0*)dst, n); break;
    case DType::q8_k: quantize_row_q8_k(x, (block_q8_k*)dst, n); break;
    default: throw std::invalid_argument("matmul: no activation conversion");
  }
}

void check_matmul_args(const Matrix& w, int64_t n_tokens) {
  switch (w.type) {
    case DType::f32: case DType::f16: case DType::bf16: case DType::q8_0: case DType::q4_0:
    case DType::q4_k: case DType::q5_k: case DType::q6_k: break;
    default:
      throw std::invalid_argument(std::string("matmul: unsupported weight type ") +
                                  dtype_name(w.type));
  }
  const int64_t blk = traits(detail::dot_type(w.type)).block_elems;
  if (w.rows < 0 || w.cols < 0 || n_tokens < 0 || w.cols % blk != 0 ||
      w.cols % traits(w.type).block_elems != 0)
    throw std::invalid_argument("matmul: bad shape (cols " + std::to_string(w.cols) +
                                " for " + dtype_name(w.type) + ")");
  if (w.rows > 0 && w.cols > 0 && !w.data)
    throw std::invalid_argument("matmul: null weight data");
}

}  // namespace

namespace detail {

namespace {

// AVX2 with AVX512VL/BW and `feature`, unless WARMSTART_ISA=avx2 keeps the plain AVX2
// tiles and panels (for comparison; same results).
bool avx512_with(bool feature) {
  const char* env = std::getenv("WARMSTART_ISA");
  if (env && std::string(env) == "avx2") return false;
  return feature && cpu_has_avx2() && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

}  // namespace

bool cpu_has_vnni() {
  static const bool has = avx512_with(__builtin_cpu_supports("avx512vnni"));
  return has;
}

bool cpu_has_avx512bf16() {
  static const bool has = avx512_with(__builtin_cpu_supports("avx512bf16"));
  return has;
}

DType dot_type(DType wtype) {
  switch (wtype) {
    case DType::q8_0: case DType::q4_0: return DType::q8_0;
    case DType::q4_k: case DType::q5_k: case DType::q6_k: return DType::q8_k;
    default: return wtype;  // f32, f16, bf16 dot in their own type
  }
}

void matmul_rows_scalar(const MatmulArgs& a, int64_t r0, int64_t r1) {
  // Rows outer, tokens inner: the weight row stays in cache across tokens.
  const Bf16Order bf16 = bf16_order(a.y_stride, a.cols);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* wr = a.w + size_t(r) * a.w_stride;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const uint8_t* xt = a.x + size_t(t) * a.x_stride;
      a.y[t * a.y_stride + r] =
          a.wtype == DType::bf16
              ? dot_bf16(reinterpret_cast<const bf16_bits*>(wr), reinterpret_cast<const bf16_bits*>(xt), bf16)
              : dot_row(a.wtype, wr, xt, a.cols);
    }
  }
}

float bf16_step(float w, float x, float acc) {
  auto daz = [](float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.f, v) : v; };
  w = daz(w);
  x = daz(x);
  // Where the result could be tiny, compute it 2^64 times larger (exact scalings: the
  // smaller factor is below 2^-50), so that gradual underflow cannot round it first.
  if (std::fabs(acc) < 0x1p-100f && std::fabs(w) * std::fabs(x) < 0x1p-100f) {
    (std::fabs(w) < std::fabs(x) ? w : x) *= 0x1p64f;
    const float r = std::fma(w, x, acc * 0x1p64f);
    return std::fabs(r) < 0x1p-62f ? std::copysign(0.f, r) : r * 0x1p-64f;
  }
  const float r = std::fma(w, x, acc);
  return std::fabs(r) < FLT_MIN ? std::copysign(0.f, r) : r;
}

float bf16_lane_tree(const float* l) {
  float a[8], b[4];  // the tree's levels
  for (int i = 0; i < 8; ++i) a[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

float bf16_vec_dot_end(float r1, float r2, const bf16_bits* w, const bf16_bits* x, int64_t n) {
  double s = double(r1) + double(r2);
  for (int64_t i = 0; i < n; ++i) s += double(bf16_to_f32(w[i]) * bf16_to_f32(x[i]));
  return float(s);
}

}  // namespace detail

// WARMSTART_ISA=scalar forces the scalar reference kernels (for debugging and for
// comparing against the SIMD path); any other value, or none, picks the best the CPU
// supports. Read once per process.
void f32_to_f16_row(const float* x, f16_bits* dst, int64_t n) {
  if (detected_isa() == Isa::avx2) return detail::f32_to_f16_avx2(x, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(x[i]);
}

Isa detected_isa() {
  static const Isa isa = [] {
    const char* env = std::getenv("WARMSTART_ISA");
    if (env && std::string(env) == "scalar") return Isa::scalar;
    return cpu_has_avx2() ? Isa::avx2 : Isa::scalar;
  }();
  return isa;
}

namespace {

// Activations converted to the weight's dot type, owned for the duration of one matmul.
struct ConvertedActivations {
  std::vector<uint8_t> rows;     // [n_tokens][x_stride bytes] in the dot type
  std::vector<float> scales;     // [n_tokens][cols / 32] Q8_0 block scales (panel kernels)
  std::vector<int32_t> corr;     // [n_tokens][cols / 32] -128 * block level sums
};

// q8_panels: Q8_0 activations on the SIMD panel path, with per-block scales and (for the
// VNNI kernel, with_corr) offset corrections.
void convert_activations(const Matrix& w, const float* x, detail::MatmulArgs& a, bool q8_panels,
                         bool with_corr, bool simd, ThreadPool& pool, ConvertedActivations& out) {
  const DType dt = detail::dot_type(w.type);
  if (dt == DType::f32) {
    a.x = reinterpret_cast<const uint8_t*>(x);  // no conversion needed
    return;
  }
  out.rows.resize(size_t(a.n_tokens) * a.x_stride);
  const int64_t nb = w.cols / QK8_0;
  if (q8_panels) {
    out.scales.resize(size_t(a.n_tokens * nb));
    if (with_corr) out.corr.resize(size_t(a.n_tokens * nb));
  }
  const int64_t grain = ThreadPool::rows_grain(w.cols);
  pool.parallel_for(a.n_tokens, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      uint8_t* dst = out.rows.data() + size_t(t) * a.x_stride;
      if (q8_panels) {
        detail::quantize_row_q8_0_avx2(x + t * w.cols, reinterpret_cast<block_q8_0*>(dst), w.cols,
                                       out.scales.data() + t * nb,
                                       with_corr ? out.corr.data() + t * nb : nullptr);
      } else if (dt == DType::f16 && a.x_stride == size_t(w.cols) * sizeof(float)) {
        auto* xf = reinterpret_cast<float*>(dst);  // f16-rounded, widened (kernels_f16_panel.h)
        detail::round_to_f16_avx2(x + t * w.cols, xf, w.cols);
      } else if (dt == DType::q8_k && simd) {
        detail::quantize_row_q8_k_avx2(x + t * w.cols, reinterpret_cast<block_q8_k*>(dst), w.cols);
      } else if (dt == DType::bf16 && simd) {
        detail::bf16_lanes_row_avx2(x + t * w.cols, dst, w.cols, detail::bf16_order(w.rows, w.cols),
                                    !detail::cpu_has_avx512bf16());
      } else {
        convert_row(dt, x + t * w.cols, dst, w.cols);
      }
    }
  });
  a.x = out.rows.data();
  a.x_scale = out.scales.data();
  a.x_corr = out.corr.data();
}

}  // namespace

void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Isa isa) {
  check_matmul_args(w, n_tokens);
  if (w.rows == 0 || n_tokens == 0) return;
  if (isa == Isa::avx2 && !cpu_has_avx2())
    throw std::invalid_argument("matmul: AVX2/FMA/F16C requested but not supported by this CPU");
  if (w.cols == 0) {
    std::memset(y, 0, size_t(n_tokens * w.rows) * sizeof(float));
    return;
  }
  const DType dt = detail::dot_type(w.type);
  detail::MatmulArgs a;
  a.wtype = w.type;
  a.w = w.data;
  a.w_stride = w.row_stride();
  a.cols = w.cols;
  a.n_tokens = n_tokens;
  a.y = y;
  a.y_stride = w.rows;
  // The SIMD F16 kernel takes its f16-rounded activations widened back to f32 (the same
  // values; it saves a conversion per use), see kernels_f16_panel.h.
  const bool f16_as_f32 = isa == Isa::avx2 && w.type == DType::f16;
  a.x_stride = f16_as_f32 ? size_t(w.cols) * sizeof(float) : row_bytes(dt, w.cols);
  // The SIMD BF16 kernels take each activation row with its column pairs in lane order,
  // widened to f32 pairs for AVX2 (kernels_bf16_panel.h, bf16_lanes_row_avx2).
  const bool bf16_panels = isa == Isa::avx2 && w.type == DType::bf16;
  const bool bf16_512 = bf16_panels && detail::cpu_has_avx512bf16();
  if (bf16_panels && !bf16_512) a.x_stride += size_t(w.cols - detail::bf16_order(w.rows, w.cols).tail) * 2;
  // Quantized and F16 weights run on row panels (kernels_panel.h, kernels_kquant_panel.h,
  // kernels_f16_panel.h) on the SIMD paths; Q8_0 panels also take per-block activation
  // sums and scales.
  const bool q8_panels = isa == Isa::avx2 && dt == DType::q8_0;
  const bool panels = q8_panels || f16_as_f32 || bf16_panels || (isa == Isa::avx2 && dt == DType::q8_k);
  const bool vnni = panels && !bf16_panels && detail::cpu_has_vnni();
  ConvertedActivations conv;
  convert_activations(w, x, a, q8_panels, vnni, isa == Isa::avx2, pool, conv);
  // Split rows in whole tiles (panels); a chunk should hold enough multiply-adds (~64K)
  // to be worth a thread wake-up.
  const int64_t tile = !panels           ? detail::kRowTile
                       : vnni || bf16_512 ? detail::kPanelRowsVnni
                                          : detail::kPanelRowsAvx2;
  if (panels && w.packed && w.packed->panel_rows == tile) a.packed = w.packed->data();
  const int64_t n_tiles = (w.rows + tile - 1) / tile;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, tile * w.cols * n_tokens));
  auto rows_fn = isa == Isa::avx2 ? detail::matmul_rows_avx2 : detail::matmul_rows_scalar;
  if (vnni) rows_fn = detail::matmul_panels_vnni;
  if (bf16_512) rows_fn = detail::matmul_panels_bf16;
  pool.parallel_for(n_tiles, grain, [&](int64_t b, int64_t e) {
    rows_fn(a, b * tile, std::min(w.rows, e * tile));
  });
}

namespace {

// Bytes of one packed panel of p rows (PackedRows), or 0 for types kept as they are.
size_t packed_panel_bytes(DType t, int64_t rows, int64_t cols, int64_t p) {
  switch (t) {
    case DType::f16: return size_t(p * cols) * 2;
    case DType::bf16: return size_t(detail::bf16_panel_words(detail::bf16_order(rows, cols), int(p))) * 4;
    case DType::q8_0: return size_t(p * (cols / QK8_0)) * 9 * 4;
    case DType::q4_k: return size_t(p * (cols / QK_K)) * detail::KQ4::kVectors * 4;
    case DType::q5_k: return size_t(p * (cols / QK_K)) * detail::KQ5::kVectors * 4;
    case DType::q6_k: return size_t(p * (cols / QK_K)) * detail::KQ6::kVectors * 4;
    default: return 0;
  }
}

}  // namespace

PackedBuffer::PackedBuffer(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  mapped_ = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  const size_t slack = mapped_ >= kHuge ? kHuge : 0;  // to start on a huge-page boundary
  void* p = mmap(nullptr, mapped_ + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<uint8_t*>(p);
  data_ = base;
  if (slack == 0) return;
  data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHuge - 1) / kHuge * kHuge);
  if (data_ > base) munmap(base, size_t(data_ - base));
  munmap(data_ + mapped_, size_t(base + slack - data_));
  madvise(data_, mapped_, MADV_HUGEPAGE);  // advice only: without THP it still works, page by page
}

PackedBuffer::~PackedBuffer() { munmap(data_, mapped_); }

PackedArena::Slice PackedArena::own(size_t bytes) {
  auto buffer = std::make_shared<const PackedBuffer>(bytes);
  return {buffer, buffer->data()};
}

PackedArena::Slice PackedArena::take(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  // A large matrix gets a buffer of its own (whole huge pages from its start). The part of
  // a chunk never handed out is never touched, so it takes no memory.
  if (bytes > kChunkBytes / 4) return own(bytes);
  std::lock_guard lock(mutex_);
  if (!chunk_ || used_ + bytes > kChunkBytes) {
    chunk_ = std::make_shared<const PackedBuffer>(kChunkBytes);
    used_ = 0;
  }
  Slice slice{chunk_, chunk_->data() + used_};
  used_ += bytes;
  return slice;
}

std::vector<Matrix> pack_for_cpu(const std::vector<Matrix>& same_shape, PackedArena* arena) {
  if (same_shape.empty()) return {};
  const Matrix& w = same_shape.front();
  if (w.rows == 0 || w.cols == 0 || !w.data || detected_isa() != Isa::avx2 ||
      packed_panel_bytes(w.type, w.rows, w.cols, 1) == 0)
    return same_shape;
  check_matmul_args(w, 1);
  const bool bf16 = w.type == DType::bf16;
  const bool wide = bf16 ? detail::cpu_has_avx512bf16() : detail::cpu_has_vnni();  // 16-row panels
  const int64_t panel_rows = wide ? detail::kPanelRowsVnni : detail::kPanelRowsAvx2;
  const int64_t n_panels = (w.rows + panel_rows - 1) / panel_rows;
  // Each matrix's panels from a 64-byte boundary.
  const size_t bytes = (size_t(n_panels) * packed_panel_bytes(w.type, w.rows, w.cols, panel_rows) + 63) / 64 * 64;
  const PackedArena::Slice slice = arena ? arena->take(bytes * same_shape.size()) : PackedArena::own(bytes * same_shape.size());
  auto pack_fn = wide ? detail::pack_panels_vnni : detail::pack_panels_avx2;
  if (bf16 && wide) pack_fn = detail::pack_panels_bf16;
  std::vector<Matrix> out;
  for (size_t i = 0; i < same_shape.size(); ++i) {
    const Matrix& m = same_shape[i];
    if (m.type != w.type || m.rows != w.rows || m.cols != w.cols || !m.data)
      throw std::invalid_argument("pack_for_cpu: matrices of one call must share type and shape");
    detail::MatmulArgs a;
    a.wtype = m.type;
    a.w = m.data;
    a.w_stride = m.row_stride();
    a.cols = m.cols;
    a.y_stride = m.rows;
    uint8_t* dst = slice.data + i * bytes;
    pack_fn(a, 0, n_panels, dst);
    out.push_back(m);
    out.back().packed = std::make_shared<PackedRows>(PackedRows{slice.buffer, dst, panel_rows});
  }
  return out;
}

Matrix pack_for_cpu(const Matrix& w, PackedArena* arena) { return pack_for_cpu(std::vector<Matrix>{w}, arena).front(); }

void get_row(const Matrix& w, int64_t row, float* dst) {
  if (row < 0 || row >= w.rows) throw std::out_of_range("get_row: row out of range");
  const uint8_t* src = w.data + size_t(row) * w.row_stride();
  // A packed K-quant row is read back from the packed copy: the loader let the original's
  // pages go, and embedding lookups would otherwise fault them back in (resident twice).
  std::vector<uint8_t> unpacked;  // [row_stride] the row's GGUF blocks
  if (w.packed && detail::dot_type(w.type) == DType::q8_k) {
    unpacked.resize(w.row_stride());
    const uint8_t* p = w.packed->data();
    const int rows = int(w.packed->panel_rows);
    const int64_t nsb = w.cols / QK_K;
    switch (w.type) {
      case DType::q4_k: detail::unpack_kq_row<detail::KQ4>(p, rows, nsb, row, unpacked.data()); break;
      case DType::q5_k: detail::unpack_kq_row<detail::KQ5>(p, rows, nsb, row, unpacked.data()); break;
      default: detail::unpack_kq_row<detail::KQ6>(p, rows, nsb, row, unpacked.data()); break;
    }
    src = unpacked.data();
  }
  dequantize_row(w.type, src, dst, w.cols);
}

}  // namespace ws
