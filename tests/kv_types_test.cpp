// KV cache types (--cache-type-k / --cache-type-v): q8_0 and q4_0 pages hold exactly what
// llama.cpp's quantizer writes, every cut, fork and snapshot keeps them, attention reads
// them as their dequantized values, and a model run with them keeps the contract (batch
// split, snapshot, restore and fork bit-identical) and stays near llama.cpp's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "memory/state.h"
#include "model_fixtures.h"
#include "not_supported.h"
#include "tensor/hadamard.h"
#include "tensor/quant.h"

using namespace ws;
using namespace ws::test;

namespace {

constexpr int32_t kHeads = 3, kDim = 64, kPage = 8;

std::vector<float> random_rows(int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(size_t(n) * kHeads * kDim);  // [n][kHeads][kDim] f32
  for (auto& x : v) x = dist(rng);
  return v;
}

// x after a trip through type t, rotated first in blocks of `rotation` (0: none): the values
// a KV store holds.
std::vector<float> through(KvType t, std::vector<float> x, int32_t rotation) {
  if (rotation > 0) hadamard_rotate(x.data(), int64_t(x.size()) / rotation, rotation);
  std::vector<uint8_t> q(row_bytes(kv_dtype(t), int64_t(x.size())));
  quantize_row(kv_dtype(t), x.data(), q.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  dequantize_row(kv_dtype(t), q.data(), y.data(), int64_t(x.size()));
  return y;
}

// Head h of positions [b, e) of rows [n][kHeads][kDim].
std::vector<float> head_of(const std::vector<float>& rows, int32_t h, int32_t b, int32_t e) {
  std::vector<float> out;
  for (int32_t p = b; p < e; ++p) {
    const float* r = rows.data() + (size_t(p) * kHeads + size_t(h)) * kDim;
    out.insert(out.end(), r, r + kDim);
  }
  return out;
}

void expect_reads(const KvStore& kv, const std::vector<float>& k, const std::vector<float>& v, int32_t b, int32_t e) {
  const auto kq = through(kv.types().k, k, kv.rotation(true)), vq = through(kv.types().v, v, kv.rotation(false));
  std::vector<float> got(size_t(e - b) * kDim);  // [e - b][kDim] f32
  for (int32_t h = 0; h < kHeads; ++h) {
    kv.read_keys(h, b, e, got.data());
    EXPECT_EQ(got, head_of(kq, h, b, e)) << "keys of head " << h;
    kv.read_values(h, b, e, got.data());
    EXPECT_EQ(got, head_of(vq, h, b, e)) << "values of head " << h;
  }
}

const KvTypes kPairs[] = {{KvType::q8_0, KvType::q8_0}, {KvType::q4_0, KvType::q4_0}, {KvType::q8_0, KvType::f16},
                          {KvType::f16, KvType::q4_0}, {KvType::q4_0, KvType::f32}};

std::string pair_name(KvTypes t) { return std::string(kv_type_name(t.k)) + "/" + kv_type_name(t.v); }

TEST(KvTypes, PagesHoldTheQuantizersBytesThroughCutsForksAndSnapshots) {
  const int32_t n = 5 * kPage + 3;
  const auto k = random_rows(n, 1), v = random_rows(n, 2);
  for (const KvTypes t : kPairs) {
    SCOPED_TRACE(pair_name(t));
    FullKvState kv(kHeads, kDim, t, kPage);
    kv.append(k.data(), v.data(), 7);  // a partial page, then across page boundaries
    kv.append(k.data() + size_t(7) * kHeads * kDim, v.data() + size_t(7) * kHeads * kDim, n - 7);
    expect_reads(kv, k, v, 0, n);
    EXPECT_EQ(kv.bytes(), size_t(n) * kHeads * (row_bytes(kv_dtype(t.k), kDim) + row_bytes(kv_dtype(t.v), kDim)));
    const LayerSnapshot snap = kv.snapshot();
    const auto fork = kv.fork();
    kv.truncate(2 * kPage + 5);  // inside a sealed page
    expect_reads(kv, k, v, 0, 2 * kPage + 5);
    kv.append(k.data() + size_t(2 * kPage + 5) * kHeads * kDim, v.data() + size_t(2 * kPage + 5) * kHeads * kDim,
              n - (2 * kPage + 5));
    expect_reads(kv, k, v, 0, n);
    expect_reads(static_cast<const KvStore&>(*fork), k, v, 0, n);
    FullKvState fresh(kHeads, kDim, t, kPage);
    fresh.restore(snap);
    expect_reads(fresh, k, v, 0, n);
    FullKvState other_types(kHeads, kDim, {t.v, t.k}, kPage);
    if (t.k != t.v) {
      EXPECT_THROW(other_types.restore(snap), std::runtime_error);
    }
  }
}

TEST(KvTypes, SlidingWindowCellsTooWithMixedTypes) {
  const int32_t n = 40, window = 6;
  const auto k = random_rows(n, 3), v = random_rows(n, 4);
  for (const KvTypes t : kPairs) {
    SCOPED_TRACE(pair_name(t));
    SlidingKvState kv(kHeads, kDim, t, window, 3);
    for (int32_t p = 0; p < n; p += 5)
      kv.append(k.data() + size_t(p) * kHeads * kDim, v.data() + size_t(p) * kHeads * kDim, 5);
    expect_reads(kv, k, v, kv.first_position(), n);
    const LayerSnapshot snap = kv.snapshot();
    SlidingKvState fresh(kHeads, kDim, t, window, 3);
    fresh.restore(snap);
    expect_reads(fresh, k, v, fresh.first_position(), n);
    kv.truncate(kv.truncate_floor());
    expect_reads(kv, k, v, kv.first_position(), kv.position());
  }
}

// llama.cpp's matrix (ggml_gen_hadamard): entry (0, 0) = 1/sqrt(n), each doubling copies the
// block right and down and negates it diagonally. The fast transform applies exactly it.
TEST(KvTypes, RotationIsLlamaCppsHadamardMatrix) {
  for (int32_t n : {64, 128, 256}) {
    std::vector<double> h(size_t(n) * n, 0.0);  // [n][n]
    h[0] = 1.0 / std::sqrt(double(n));
    for (int32_t s = 1; s < n; s *= 2)
      for (int32_t i = 0; i < s; ++i)
        for (int32_t j = 0; j < s; ++j) {
          const double v = h[size_t(i) * n + j];
          h[size_t(i + s) * n + j] = v, h[size_t(i) * n + j + s] = v, h[size_t(i + s) * n + j + s] = -v;
        }
    std::mt19937 rng{uint32_t(n)};
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<float> x(size_t(2 * n));  // two blocks
    for (auto& e : x) e = dist(rng);
    std::vector<float> y = x;
    hadamard_rotate(y.data(), 2, n);
    for (int32_t b = 0; b < 2; ++b)
      for (int32_t i = 0; i < n; ++i) {
        double want = 0;
        for (int32_t j = 0; j < n; ++j) want += h[size_t(i) * n + j] * double(x[size_t(b * n + j)]);
        EXPECT_NEAR(y[size_t(b * n + i)], want, 1e-5) << "n " << n << " row " << i;
      }
    hadamard_rotate(y.data(), 2, n);  // H H = I
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
  }
  // llama.cpp's blocks: K the largest power of two >= 64 dividing head_dim, V 64; none
  // below 64, for unquantized types, or when turned off.
  EXPECT_EQ(FullKvState(2, 256, {KvType::q4_0, KvType::q4_0}, kPage).rotation(true), 256);
  EXPECT_EQ(FullKvState(2, 192, {KvType::q8_0, KvType::q8_0}, kPage).rotation(true), 64);
  EXPECT_EQ(FullKvState(2, 256, {KvType::q4_0, KvType::q4_0}, kPage).rotation(false), 64);
  EXPECT_EQ(FullKvState(2, 96, {KvType::q8_0, KvType::q8_0}, kPage).rotation(true), 0);
  EXPECT_EQ(FullKvState(2, 128, {KvType::f16, KvType::q8_0}, kPage).rotation(true), 0);
  EXPECT_EQ(FullKvState(2, 128, {KvType::q8_0, KvType::q8_0, false}, kPage).rotation(true), 0);
}

TEST(KvTypes, BlockTypesNeedHeadDimInWholeBlocks) {
  try {
    FullKvState kv(2, 48, {KvType::f16, KvType::q4_0}, kPage);
    FAIL() << "head_dim 48 accepted for q4_0";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim is 48"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(FullKvState(2, 48, {KvType::f16, KvType::f32}, kPage));
  for (const char* name : {"f32", "f16", "q8_0", "q4_0"}) EXPECT_EQ(kv_type_name(*parse_kv_type(name)), std::string(name));
  EXPECT_FALSE(parse_kv_type("q5_1"));
}

// One golden fixture per architecture with attention whose head_dim (every layer's) is
// whole q8_0/q4_0 blocks.
int64_t head_dim_of(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  const auto* heads = f.find(arch + ".attention.head_count");
  if (!heads || !heads->is_integer() || heads->as_int() <= 0) return 0;  // none, or per layer: not covered here
  if (const auto* swa = f.find(arch + ".attention.key_length_swa"); swa && swa->as_int() % 32 != 0) return 0;
  if (const auto* kl = f.find(arch + ".attention.key_length")) return kl->as_int();
  return f.get_int(arch + ".embedding_length", 0) / heads->as_int();
}

std::vector<GoldenFixture> block_fixtures() {
  std::vector<GoldenFixture> out;
  for (const auto& g : golden_fixtures()) {
    bool seen = false;
    for (const auto& o : out) seen = seen || o.arch == g.arch;
    if (seen) continue;
    const auto f = gguf::File::open(g.model);
    const int64_t hd = head_dim_of(f);
    if (hd > 0 && hd % 32 == 0 && !test::needs_unsupported(f)) out.push_back(g);
  }
  return out;
}

class KvTypesModel : public ::testing::TestWithParam<GoldenFixture> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(GetParam().model));
    model_ = load_model(*file_);
    probes_ = read_golden(GetParam().golden);
  }
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<LogitProbe> probes_;
  ThreadPool pool_{2};
};

TEST_P(KvTypesModel, ContractHoldsWithQuantizedPages) {
  const auto& tokens = probes_.at(1).tokens;  // the random probe
  for (const KvTypes t : {KvTypes{KvType::q8_0, KvType::q8_0}, KvTypes{KvType::q4_0, KvType::q8_0}}) {
    SCOPED_TRACE(pair_name(t));
    MemoryOptions mem;
    mem.n_ctx = int32_t(tokens.size()) + 64;
    mem.kv_types = t;
    expect_batch_split_invariant(*model_, tokens, mem, pool_);
    expect_snapshot_restore_fork_exact(*model_, tokens, mem, pool_);
  }
}

// The golden's llama.cpp ran with an F32 cache: q8_0 pages stay within the quantized
// models' tolerance of it (golden_test.cpp); q4_0's figures are printed.
TEST_P(KvTypesModel, NearTheGoldenWithQuantizedPages) {
  const auto& gold = probes_.at(1);
  for (const KvType t : {KvType::q8_0, KvType::q4_0}) {
    MemoryOptions mem;
    mem.n_ctx = int32_t(gold.tokens.size());
    mem.kv_types = {t, t};
    SeqState state = model_->make_state(mem);
    std::vector<float> logits;  // [n][n_vocab] f32
    eval_tokens(*model_, state, gold.tokens, 512, LogitsMode::all, logits, pool_);
    const auto ours = make_probe(gold.name, gold.tokens, logits, model_->config().n_vocab, gold.n_ubatch);
    const ProbeComparison c = compare_probes(ours, gold, 0.05);
    std::printf("[figures] %s KV %s: max|dlogit| %.3g mean|dlogit| %.3g |dmeanNLL| %.3g argmax %.4f\n",
                param_name(GetParam().model).c_str(), kv_type_name(t), c.max_abs, c.mean_abs, c.mean_nll_diff,
                c.argmax_agreement);
    if (t != KvType::q8_0) continue;
    EXPECT_LE(c.max_abs, 0.5);
    EXPECT_LE(c.mean_abs, 0.05);
    EXPECT_LE(c.mean_nll_diff, 5e-2);
    EXPECT_GE(c.argmax_agreement, 0.9);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvTypesModel, ::testing::ValuesIn(block_fixtures()),
                         [](const auto& info) { return param_name(info.param.model); });

}  // namespace
