// Tests of the matmul kernels and the thread pool.
//
// Correctness: scalar and AVX2 matmuls are compared with a float64 dot product of the
// dequantized weights and the dequantized converted activations (the exact math the
// kernels implement), within a tolerance relative to sum |w*x| that is ~100x float
// rounding but far below any indexing/layout bug (those give O(1) relative errors).
// Batch invariance: outputs must be bit-identical for any batch size, offset of the token
// in the batch, and thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/kernels_impl.h"
#include "tensor/quant.h"

namespace ws {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);  // [n] f32
  for (auto& f : v) f = dist(rng);
  return v;
}

struct Weights {
  std::vector<uint8_t> bytes;  // [rows][row_bytes(type, cols)] quantized rows
  Matrix m;
};

Weights make_weights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  Weights w;
  const auto src = random_floats(size_t(rows * cols), seed);  // [rows][cols] f32
  const size_t stride = row_bytes(t, cols);
  w.bytes.resize(size_t(rows) * stride);
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(t, src.data() + r * cols, w.bytes.data() + r * stride, cols);
  w.m = Matrix{t, rows, cols, w.bytes.data()};
  return w;
}

// The activation row as the kernels see it after conversion to the dot type, in f32.
std::vector<float> converted_activation(DType wtype, const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));  // [n] f32
  switch (wtype) {
    case DType::f32: std::copy(x, x + n, out.begin()); break;
    case DType::f16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(f32_to_f16(x[i]));
      break;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
      break;
    case DType::q8_0: case DType::q4_0: {
      std::vector<block_q8_0> q(size_t(n / QK8_0));  // [n/32] Q8_0 blocks
      quantize_row_q8_0(x, q.data(), n);
      dequantize_row(DType::q8_0, q.data(), out.data(), n);
      break;
    }
    default: {  // K-quants dot with Q8_K; dequantized by hand (not a storage type)
      std::vector<block_q8_k> q(size_t(n / QK_K));  // [n/256] Q8_K blocks
      quantize_row_q8_k(x, q.data(), n);
      for (int64_t i = 0; i < n; ++i) out[i] = q[i / QK_K].d * q[i / QK_K].qs[i % QK_K];
      break;
    }
  }
  return out;
}

struct Reference {
  std::vector<double> y;    // [n_tokens][rows] float64 dot products
  std::vector<double> mag;  // [n_tokens][rows] sum |w*x|, the scale of rounding error
};

Reference reference_matmul(const Matrix& w, const float* x, int64_t n_tokens) {
  Reference ref;
  ref.y.resize(size_t(n_tokens * w.rows));
  ref.mag.resize(ref.y.size());
  std::vector<float> wr(static_cast<size_t>(w.cols));  // [cols] f32 dequantized weight row
  for (int64_t r = 0; r < w.rows; ++r) {
    get_row(w, r, wr.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      const auto xa = converted_activation(w.type, x + t * w.cols, w.cols);
      double s = 0, m = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        s += double(wr[c]) * xa[c];
        m += std::fabs(double(wr[c]) * xa[c]);
      }
      ref.y[t * w.rows + r] = s;
      ref.mag[t * w.rows + r] = m;
    }
  }
  return ref;
}

bool have_avx2() { return detected_isa() == Isa::avx2; }

struct Case {
  DType type;
  int64_t cols;
};

// Row count 37: odd and not a multiple of the 4-row tile. Float types also get a column
// count that is not a multiple of the 8-lane block, to exercise the tail.
const Case kCases[] = {
    {DType::f32, 200},  {DType::f32, 203},  {DType::f16, 200},  {DType::f16, 77},
    {DType::bf16, 200}, {DType::bf16, 13},  {DType::q8_0, 320}, {DType::q4_0, 320},
    {DType::q4_k, 512}, {DType::q5_k, 512}, {DType::q6_k, 512}, {DType::q6_k, 2560},
    {DType::q4_k, 2560}, {DType::q5_k, 2560}, {DType::q8_0, 2560},
};
constexpr int64_t kRows = 37;

class MatmulCase : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulCase, MatchesFloat64Reference) {
  const Case c = GetParam();
  const int64_t n_tokens = 9;
  const Weights w = make_weights(c.type, kRows, c.cols, 1);
  const auto x = random_floats(size_t(n_tokens * c.cols), 2);  // [n_tokens][cols] f32
  const Reference ref = reference_matmul(w.m, x.data(), n_tokens);
  ThreadPool pool(2);
  std::vector<Isa> isas = {Isa::scalar};
  if (have_avx2()) isas.push_back(Isa::avx2);
  std::vector<std::vector<float>> outs;  // per ISA: [n_tokens][rows] f32
  for (Isa isa : isas) {
    std::vector<float> y(size_t(n_tokens * kRows), NAN);  // [n_tokens][rows] f32
    matmul(w.m, x.data(), n_tokens, y.data(), pool, isa);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], ref.y[i], 1e-5 * ref.mag[i] + 1e-30)
          << dtype_name(c.type) << " isa " << int(isa) << " element " << i;
    outs.push_back(std::move(y));
  }
  if (outs.size() == 2) {  // scalar vs AVX2: same integer sums, float summation may differ
    for (size_t i = 0; i < outs[0].size(); ++i)
      ASSERT_NEAR(outs[0][i], outs[1][i], 1e-5 * ref.mag[i] + 1e-30) << i;
  }
}

// Each token's output must be bit-identical whether it is alone, or at any position of a
// batch of 3, 7, 32 or 64 tokens, computed by 1, 2 or 3 threads.
TEST_P(MatmulCase, BatchInvariant) {
  const Case c = GetParam();
  const int64_t max_tokens = 64, offset = 5;
  const Weights w = make_weights(c.type, kRows, c.cols, 3);
  const auto x = random_floats(size_t((max_tokens + offset) * c.cols), 4);  // [69][cols] f32
  std::vector<Isa> isas = {Isa::scalar};
  if (have_avx2()) isas.push_back(Isa::avx2);
  for (Isa isa : isas) {
    ThreadPool one(1);
    std::vector<float> single(size_t((max_tokens + offset) * kRows));  // [69][rows] f32
    for (int64_t t = 0; t < max_tokens + offset; ++t)
      matmul(w.m, x.data() + t * c.cols, 1, single.data() + t * kRows, one, isa);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t n : {1, 3, 7, 32, 64}) {
        for (int64_t off : {int64_t(0), offset}) {
          std::vector<float> y(size_t(n * kRows));  // [n][rows] f32
          matmul(w.m, x.data() + off * c.cols, n, y.data(), pool, isa);
          ASSERT_EQ(0, std::memcmp(y.data(), single.data() + off * kRows, y.size() * 4))
              << dtype_name(c.type) << " isa " << int(isa) << " threads " << threads
              << " n " << n << " offset " << off;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(dtype_name(info.param.type)) + "_" +
                                  std::to_string(info.param.cols);
                         });

// Quantized and F16 types define one float sequence per output (kernels_panel.h,
// kernels_kquant_panel.h, kernels_f16_panel.h), so the scalar reference, the SIMD panels
// (packed per call or once at load) and the few-token path all give the same bits, for
// row counts that are not a multiple of the panel, column counts that are not a multiple
// of the packing chunk (32 Q8_0 blocks, 4 K-quant super-blocks, 256 F16 columns) and token
// counts across token tiles (kTokenTile) that are not a multiple of a pass.
TEST(Matmul, QuantizedTypesBitIdenticalAcrossPaths) {
  if (!have_avx2()) GTEST_SKIP() << "no SIMD path on this CPU";
  const Case cases[] = {{DType::q8_0, 32 * 41}, {DType::q4_0, 32 * 41}, {DType::q4_k, 256 * 5},
                        {DType::q5_k, 256 * 5}, {DType::q6_k, 256 * 5}, {DType::f16, 300}};
  for (const Case& c : cases) {
    for (int64_t rows : {int64_t(5), int64_t(37), int64_t(70), int64_t(150)}) {  // 150: 8-panel decode groups
      const Weights w = make_weights(c.type, rows, c.cols, 11);
      const Matrix packed = pack_for_cpu(w.m);
      EXPECT_EQ(c.type != DType::q4_0, bool(packed.packed)) << dtype_name(c.type);
      for (int64_t n : {int64_t(1), int64_t(3), int64_t(8), int64_t(13), 2 * detail::kTokenTile + 11}) {
        const auto x = random_floats(size_t(n * c.cols), 12);  // [n][cols] f32
        ThreadPool pool(2);
        std::vector<float> ref(size_t(n * rows)), y(size_t(n * rows));  // [n][rows] f32
        matmul(w.m, x.data(), n, ref.data(), pool, Isa::scalar);
        matmul(w.m, x.data(), n, y.data(), pool, Isa::avx2);
        EXPECT_EQ(0, std::memcmp(ref.data(), y.data(), y.size() * 4))
            << dtype_name(c.type) << " rows " << rows << " n " << n;
        matmul(packed, x.data(), n, y.data(), pool, Isa::avx2);
        EXPECT_EQ(0, std::memcmp(ref.data(), y.data(), y.size() * 4))
            << "packed " << dtype_name(c.type) << " rows " << rows << " n " << n;
      }
    }
  }
}

// BF16 follows llama.cpp's lane order (Bf16Order): one lane set where rows % 4 == 0 and
// cols % 32 == 0, else two plus a float64 tail. Every path (scalar, AVX2 or AVX512-BF16
// panels packed per call or at load, decode and prefill tiles, 1 or 3 threads) gives the
// scalar reference's bits, for both orders, a tail, an all-tail row (13 columns) and token
// counts across the tile sizes and kTokenTile.
TEST(Matmul, Bf16BitIdenticalAcrossPathsAndBatches) {
  if (!have_avx2()) GTEST_SKIP() << "no SIMD path on this CPU";
  for (int64_t cols : {int64_t(320), int64_t(96), int64_t(200), int64_t(13)}) {
    for (int64_t rows : {int64_t(5), int64_t(36), int64_t(37), int64_t(100)}) {  // 100: groups of 4 panels
      const Weights w = make_weights(DType::bf16, rows, cols, 17);
      const Matrix packed = pack_for_cpu(w.m);
      const int64_t max_n = 2 * detail::kTokenTile + 11;
      const auto x = random_floats(size_t(max_n * cols), 18);  // [max_n][cols] f32
      ThreadPool one(1);
      std::vector<float> ref(size_t(max_n * rows));  // [max_n][rows] f32, token by token
      for (int64_t t = 0; t < max_n; ++t) matmul(w.m, x.data() + t * cols, 1, ref.data() + t * rows, one, Isa::scalar);
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        for (int64_t n : {int64_t(1), int64_t(3), int64_t(4), int64_t(13), int64_t(16), int64_t(31), max_n}) {
          std::vector<float> y(size_t(n * rows));  // [n][rows] f32
          for (const Matrix* m : {&w.m, &packed}) {
            matmul(*m, x.data(), n, y.data(), pool, Isa::avx2);
            ASSERT_EQ(0, std::memcmp(ref.data(), y.data(), y.size() * 4))
                << "rows " << rows << " cols " << cols << " n " << n << " threads " << threads
                << (m == &packed ? " packed" : "");
          }
        }
      }
    }
  }
}

// VDPBF16PS reads denormal inputs as zero and flushes results below FLT_MIN (after rounding)
// to zero, where the tree and the float64 tail keep them; the scalar reference and the
// SIMD paths must agree there too. Rows and tokens are scaled so that products and lane
// sums fall around FLT_MIN (2^-126) and some BF16 inputs are denormal.
TEST(Matmul, Bf16UnderflowMatchesAcrossPaths) {
  if (!have_avx2()) GTEST_SKIP() << "no SIMD path on this CPU";
  const float row_scale[] = {1.f, 0x1p-60f, 0x1p-63f, 0x1p-64f, 0x1p-66f, 0x1p-130f, 0x1p-62f, 0x1p-61f};
  const float tok_scale[] = {1.f, 0x1p-60f, 0x1p-62f, 0x1p-64f, 0x1p-131f};
  for (int64_t cols : {int64_t(256), int64_t(200)}) {
    const int64_t rows = 8, n = 5;
    auto wf = random_floats(size_t(rows * cols), 19);  // [rows][cols] f32 before rounding to BF16
    auto x = random_floats(size_t(n * cols), 20);      // [n][cols] f32
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) wf[size_t(r * cols + c)] *= row_scale[r];
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < cols; ++c) x[size_t(t * cols + c)] *= tok_scale[t];
    std::vector<uint8_t> bytes(size_t(rows) * row_bytes(DType::bf16, cols));  // [rows][cols] BF16
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(DType::bf16, wf.data() + r * cols, bytes.data() + r * row_bytes(DType::bf16, cols), cols);
    const Matrix w{DType::bf16, rows, cols, bytes.data()};
    ThreadPool pool(2);
    std::vector<float> ref(size_t(n * rows)), y(size_t(n * rows));  // [n][rows] f32
    matmul(w, x.data(), n, ref.data(), pool, Isa::scalar);
    int tiny = 0;  // outputs in the range where flushing matters
    for (float v : ref) tiny += v != 0.f && std::fabs(v) < 0x1p-100f;
    EXPECT_GT(tiny, 0);
    for (const Matrix& m : {w, pack_for_cpu(w)}) {
      matmul(m, x.data(), n, y.data(), pool, Isa::avx2);
      for (size_t i = 0; i < y.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &ref[i], 4);
        std::memcpy(&b, &y[i], 4);
        ASSERT_EQ(a, b) << "cols " << cols << " token " << i / rows << " row " << i % rows << ": " << ref[i]
                        << " vs " << y[i];
      }
    }
  }
}

// The VDPBF16PS step: one rounding of w * x + acc, denormal inputs as zero, results below
// FLT_MIN after rounding to 24 bits flushed (with their sign), including the case gradual
// underflow would round up to FLT_MIN.
TEST(Matmul, Bf16StepFlushesLikeTheInstruction) {
  EXPECT_EQ(detail::bf16_step(1.5f, 2.f, 1.f), 4.f);
  EXPECT_EQ(detail::bf16_step(0x1p-127f, 1.f, 1.f), 1.f);          // denormal w reads as zero
  EXPECT_EQ(detail::bf16_step(0x1p-70f, 0x1p-70f, 0.f), 0.f);      // product below FLT_MIN
  EXPECT_EQ(detail::bf16_step(0x1p-63f, 0x1p-63f, 0.f), 0x1p-126f);  // exactly FLT_MIN stays
  EXPECT_TRUE(std::signbit(detail::bf16_step(-0x1p-70f, 0x1p-70f, 0.f)));
  // acc = FLT_MIN (1 + 2^-22), w * x = -1.1875 * 2^-148: the exact sum FLT_MIN - 0.75 * 2^-150
  // rounds to FLT_MIN with denormals but to FLT_MIN - 2^-150 (tiny, flushed) with 24 bits.
  EXPECT_EQ(detail::bf16_step(-0x1.3p-74f, 0x1p-74f, 0x1.000004p-126f), 0.f);
  // Tiny but exactly FLT_MIN - 2^-151: rounds to FLT_MIN either way (a tie to even).
  EXPECT_EQ(detail::bf16_step(-0x1.2p-74f, 0x1p-74f, 0x1.000004p-126f), 0x1p-126f);
}

// Packed K-quant rows are read back from the packed copy (get_row), unchanged: the
// original's bytes are zeroed here so that reading them would show.
TEST(Matmul, GetRowOfPackedMatrixMatchesOriginal) {
  if (!have_avx2()) GTEST_SKIP() << "no packed layout on this CPU";
  for (DType t : {DType::q4_k, DType::q5_k, DType::q6_k}) {
    const Weights w = make_weights(t, 37, 512, 13);
    Matrix packed = pack_for_cpu(w.m);
    ASSERT_TRUE(packed.packed) << dtype_name(t);
    const std::vector<uint8_t> zeros(w.bytes.size());  // stands in for released pages
    packed.data = zeros.data();
    std::vector<float> got(512), want(512);  // [512] f32
    for (int64_t r : {0, 15, 16, 36}) {
      get_row(packed, r, got.data());
      dequantize_row(t, w.bytes.data() + r * w.m.row_stride(), want.data(), 512);
      EXPECT_EQ(got, want) << dtype_name(t) << " row " << r;
    }
  }
}

// Matrices packed into one arena (as a model loads them) get 64-byte aligned slices, keep
// their memory when the arena is gone, and all compute what the scalar reference computes
// once every one is packed (slices that overlapped would overwrite each other); a matrix
// too large for a chunk gets a buffer of its own.
TEST(Matmul, ArenaPackedMatricesAreExact) {
  if (!have_avx2()) GTEST_SKIP() << "no packed layout on this CPU";
  std::vector<Weights> ws;  // the originals, of mixed types and shapes
  for (int i = 0; i < 6; ++i) ws.push_back(make_weights(i % 2 ? DType::f16 : DType::q8_0, 37 + 16 * i, 256, 20 + i));
  ws.push_back(make_weights(DType::f16, 4096, 2560, 30));  // 20 MiB: more than a quarter of a chunk
  std::vector<Matrix> packed;
  {
    PackedArena arena;
    for (const Weights& w : ws) packed.push_back(pack_for_cpu(w.m, &arena));
  }
  for (const Matrix& m : packed) {
    ASSERT_TRUE(m.packed);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(m.packed->data()) % 64);
  }
  EXPECT_EQ(packed[0].packed->buffer, packed[1].packed->buffer);
  EXPECT_NE(packed.front().packed->buffer, packed.back().packed->buffer);
  ThreadPool pool(2);
  for (size_t i = 0; i < ws.size(); ++i) {
    const Matrix& w = ws[i].m;
    const auto x = random_floats(size_t(3 * w.cols), 31);  // [3][cols] f32
    std::vector<float> ref(size_t(3 * w.rows)), y(size_t(3 * w.rows));  // [3][rows] f32
    matmul(w, x.data(), 3, ref.data(), pool, Isa::scalar);
    matmul(packed[i], x.data(), 3, y.data(), pool, Isa::avx2);
    EXPECT_EQ(0, std::memcmp(ref.data(), y.data(), y.size() * 4)) << "matrix " << i;
  }
}

// Activations in 9 blocks of `block` elements that probe a quantizer's edge cases: rounding
// ties (block 1), equal magnitudes of both signs (2), all-zero blocks (3, 6), NaN (4),
// infinity (5), a subnormal largest magnitude, i.e. an infinite inverse scale (6), and
// magnitudes near 1e30 (8).
namespace {
std::vector<float> quantizer_edge_cases(int block, uint32_t seed) {
  auto x = random_floats(size_t(block * 9), seed);  // [9 blocks][block] f32
  // Block 1: scale 1 (largest element -127), all other products halfway between levels.
  for (int j = 0; j < block; ++j) x[size_t(block + j)] = j == 0 ? -127.f : float(j % 20 - 10) + 0.5f;
  x[size_t(2 * block + 7)] = -5.f;  // two elements of largest magnitude, negative first
  x[size_t(2 * block + 9)] = 5.f;
  std::fill(x.begin() + 3 * block, x.begin() + 4 * block, 0.f);
  std::fill(x.begin() + 6 * block, x.begin() + 7 * block, 0.f);
  x[size_t(4 * block + 3)] = NAN;
  x[size_t(5 * block + 8)] = -INFINITY;
  x[size_t(6 * block + 1)] = 1e-41f;
  for (int j = 0; j < block; ++j) x[size_t(8 * block + j)] *= 1e30f;
  return x;
}
}  // namespace

// The SIMD activation quantizers write the same bytes as quantize_row_q8_k / _q8_0.
TEST(Matmul, SimdQ8KQuantizerMatchesScalar) {
  if (!have_avx2()) GTEST_SKIP() << "no SIMD path on this CPU";
  const auto x = quantizer_edge_cases(QK_K, 14);
  std::vector<block_q8_k> want(9), got(9);  // [9] Q8_K blocks
  quantize_row_q8_k(x.data(), want.data(), 9 * QK_K);
  detail::quantize_row_q8_k_avx2(x.data(), got.data(), 9 * QK_K);
  for (int b = 0; b < 9; ++b)
    EXPECT_EQ(0, std::memcmp(&want[size_t(b)], &got[size_t(b)], sizeof(block_q8_k))) << "block " << b;
}

// F16C's conversion must give f32_to_f16's bits everywhere: rounding ties, the overflow
// threshold, subnormals, signed zeros, infinities and NaN payloads; odd n exercises the tail.
TEST(Dtype, SimdF16ConversionMatchesScalar) {
  if (!have_avx2()) GTEST_SKIP() << "no SIMD path on this CPU";
  std::vector<float> x;  // f32 inputs
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                        0x7fbfffffu, 0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x38800000u, 0x387fe000u,
                        0x33000000u, 0x33000001u, 0x337fffffu, 0x33800000u, 0x00000001u, 0x3f801000u, 0x3f803000u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  std::mt19937 rng(16);
  for (int i = 0; i < 20000; ++i) {  // random bit patterns: every exponent, ties included
    uint32_t bits = uint32_t(rng());
    if (i % 2) bits = (bits & 0xffffe000u) | 0x1000u;  // exactly half way between two halves
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  x.push_back(1.f);  // odd length: the last element goes through the scalar tail
  std::vector<f16_bits> got(x.size());
  f32_to_f16_row(x.data(), got.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    ASSERT_EQ(got[i], f32_to_f16(x[i])) << std::hex << "input 0x" << bits;
  }
}

// The Q8_0 one also writes the per-block scales and offset corrections the panel kernels read.
TEST(Matmul, SimdQ8_0QuantizerMatchesScalar) {
  if (!have_avx2()) GTEST_SKIP() << "no SIMD path on this CPU";
  const auto x = quantizer_edge_cases(QK8_0, 15);
  std::vector<block_q8_0> want(9), got(9);  // [9] Q8_0 blocks
  std::vector<float> scales(9);             // [9] f32
  std::vector<int32_t> corr(9);             // [9] int32
  quantize_row_q8_0(x.data(), want.data(), 9 * QK8_0);
  detail::quantize_row_q8_0_avx2(x.data(), got.data(), 9 * QK8_0, scales.data(), corr.data());
  for (int b = 0; b < 9; ++b) {
    EXPECT_EQ(0, std::memcmp(&want[size_t(b)], &got[size_t(b)], sizeof(block_q8_0))) << "block " << b;
    int32_t sum = 0;
    for (int j = 0; j < QK8_0; ++j) sum += want[size_t(b)].qs[j];
    EXPECT_EQ(corr[size_t(b)], -128 * sum) << "block " << b;
    EXPECT_EQ(scales[size_t(b)], f16_to_f32(want[size_t(b)].d)) << "block " << b;
  }
}

TEST(Matmul, ManyRowsSplitAcrossThreadsMatchSingleThread) {
  // Enough rows that every thread gets several tiles, plus a ragged end (1001 = 4*250+1).
  const Weights w = make_weights(DType::q4_0, 1001, 256, 5);
  const auto x = random_floats(size_t(3 * 256), 6);  // [3][256] f32
  ThreadPool one(1), four(4);
  std::vector<float> a(3 * 1001), b(3 * 1001);  // [3][1001] f32
  matmul(w.m, x.data(), 3, a.data(), one);
  matmul(w.m, x.data(), 3, b.data(), four);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

TEST(Matmul, RejectsBadInput) {
  ThreadPool pool(1);
  std::vector<uint8_t> data(1024);  // raw bytes standing in for weights
  float x[64] = {}, y[4] = {};      // [1][64] activations, [1][4] outputs
  EXPECT_THROW(matmul(Matrix{DType::q4_1, 1, 32, data.data()}, x, 1, y, pool),
               std::invalid_argument);
  EXPECT_THROW(matmul(Matrix{DType::q8_0, 1, 48, data.data()}, x, 1, y, pool),
               std::invalid_argument);
  EXPECT_THROW(matmul(Matrix{DType::q4_k, 1, 64, data.data()}, x, 1, y, pool),
               std::invalid_argument);
}

TEST(Matmul, GetRowMatchesDequantize) {
  const Weights w = make_weights(DType::q6_k, 5, 256, 7);
  std::vector<float> got(256), want(256);  // [256] f32
  get_row(w.m, 3, got.data());
  dequantize_row(DType::q6_k, w.bytes.data() + 3 * w.m.row_stride(), want.data(), 256);
  EXPECT_EQ(got, want);
  EXPECT_THROW(get_row(w.m, 5, got.data()), std::out_of_range);
}

TEST(ThreadPool, RunCallsEveryIndexOnce) {
  for (int n : {1, 2, 5}) {
    ThreadPool pool(n);
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));  // [n] calls per thread index
      pool.run([&](int i, int total) {
        EXPECT_EQ(total, n);
        hits[size_t(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, SizeOneRunsInline) {
  ThreadPool pool(1);
  std::thread::id seen;
  pool.run([&](int, int) { seen = std::this_thread::get_id(); });
  EXPECT_EQ(seen, std::this_thread::get_id());
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
    for (int64_t grain : {1, 4, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));  // [n] visits per index
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        EXPECT_LT(b, e);
        for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1) << "n " << n << " grain " << grain;
    }
  }
}

TEST(ThreadPool, ExceptionReachesCallerAndPoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.run([](int i, int) {
    if (i == 2) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  std::atomic<int> count{0};
  pool.run([&](int, int) { count++; });
  EXPECT_EQ(count.load(), 3);
}

TEST(ThreadPool, DestroyWithoutRunning) {
  // Fails by hanging (test timeout) if idle workers are not woken and joined.
  for (int i = 0; i < 20; ++i) ThreadPool pool(4);
}

TEST(ThreadPool, DestroyRightAfterAJobWorkersMissed) {
  // Fails by hanging (test timeout) if a worker that arrives after the caller finished a
  // parallel_for alone takes the destructor's wake-up for a job and sleeps on. More threads
  // than cores so that workers are often late; a stress test of a narrow window, which a
  // 2-core machine hit about once in some thousand `warmstart chat` exits.
  for (int round = 0; round < 1000; ++round) {
    ThreadPool pool(8);
    std::atomic<int64_t> covered{0};
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) { covered += e - b; });
    ASSERT_EQ(covered.load(), 64);
  }
}

}  // namespace
}  // namespace ws
