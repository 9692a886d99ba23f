// Quantization formats, the GGUF writer and `warmstart quantize`, checked against the
// llama.cpp-made fixtures (fixtures/models/*-q256-*.gguf were written by llama-quantize
// from the *-q256-f16.gguf files).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "tensor/quant.h"
#include "tensor/quantize_policy.h"

namespace fs = std::filesystem;
using ws::DType;

namespace {

const fs::path kModels = fs::path(WS_SHARED_DIR) / "fixtures" / "models";

struct QuantFixture {
  std::string base;       // e.g. "llama-q256"
  std::string suffix;     // e.g. "q4_k_m"
  fs::path f16, quantized;
};

// Every <base>-q256-<type>.gguf that has a <base>-q256-f16.gguf next to it.
std::vector<QuantFixture> quant_fixtures() {
  std::vector<QuantFixture> out;
  for (const auto& e : fs::directory_iterator(kModels)) {
    const std::string name = e.path().filename().string();
    const auto pos = name.find("-q256-");
    if (pos == std::string::npos || e.path().extension() != ".gguf") continue;
    const std::string base = name.substr(0, pos + 5);
    const std::string suffix = name.substr(pos + 6, name.size() - pos - 6 - 5);
    if (suffix == "f16" || suffix == "bf16") continue;  // bf16: Bf16IsTheF16WeightsRounded
    const fs::path f16 = kModels / (base + "-f16.gguf");
    if (fs::exists(f16)) out.push_back({base, suffix, f16, e.path()});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.quantized < b.quantized; });
  return out;
}

std::vector<float> dequantize_tensor(const ws::gguf::TensorInfo& t) {
  std::vector<float> out(size_t(t.n_elements()));  // [n_elements] f32
  const int64_t n = t.ne[0];
  const size_t rb = ws::row_bytes(t.type, n);
  for (int64_t r = 0; r < t.rows(); ++r)
    ws::dequantize_row(t.type, t.data + size_t(r) * rb, out.data() + size_t(r * n), n);
  return out;
}

double rel_rms(const std::vector<float>& approx, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += double(approx[i] - ref[i]) * (approx[i] - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(err / norm);
}

// Relative RMS error bounds per format on Gaussian-like weights. Measured (fixtures and
// random data agree, printed by the tests): Q8_0 0.0054, Q6_K 0.0178, Q5_K 0.036,
// Q4_K 0.072, Q4_0 0.087, BF16 0.0017, F16 0.0002. The bounds leave ~1.4x headroom: a
// wrong scale, nibble order or sign shows up as errors of order 1.
double error_bound(DType t) {
  switch (t) {
    case DType::q8_0: return 0.008;
    case DType::q6_k: return 0.025;
    case DType::q5_k: return 0.05;
    case DType::q4_k: return 0.1;
    case DType::q4_0: return 0.12;
    case DType::bf16: return 0.004;
    case DType::f16: return 0.0006;
    default: return 0;
  }
}

bool is_quantized(DType t) { return ws::traits(t).block_elems > 1; }

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ws_quant_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

int run_binary(const std::string& args, const fs::path& log) {
  const std::string cmd = std::string("\"") + WS_BINARY + "\" " + args + " >\"" + log.string() + "\" 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const fs::path& p) {
  const auto b = read_file(p);
  return {b.begin(), b.end()};
}

}  // namespace

TEST(QuantFixtures, FixturesAreDiscovered) {
  // 2 models x 4 quantized variants at the time of writing; at least the two kinds we
  // byte-compare must be present or the other tests would silently check nothing.
  const auto fx = quant_fixtures();
  int q8 = 0, q4 = 0;
  for (const auto& f : fx) {
    q8 += f.suffix == "q8_0";
    q4 += f.suffix == "q4_0";
  }
  EXPECT_GE(q8, 1);
  EXPECT_GE(q4, 1);
}

// (a) Dequantized llama.cpp tensors are close to the F16 originals, within each format's
// error; unquantized tensors are bit-identical.
TEST(QuantFixtures, DequantizedCloseToF16) {
  for (const auto& fx : quant_fixtures()) {
    const auto f16 = ws::gguf::File::open(fx.f16.string());
    const auto q = ws::gguf::File::open(fx.quantized.string());
    std::map<DType, double> worst;
    for (const auto& t : q.tensors()) {
      SCOPED_TRACE(fx.quantized.filename().string() + ": " + t.name);
      const auto& ref_t = f16.require_tensor(t.name);
      ASSERT_EQ(ref_t.ne, t.ne);
      const auto ref = dequantize_tensor(ref_t);
      const auto got = dequantize_tensor(t);
      if (!is_quantized(t.type)) {
        EXPECT_EQ(ref, got);
        continue;
      }
      const double e = rel_rms(got, ref);
      EXPECT_LT(e, error_bound(t.type)) << ws::dtype_name(t.type);
      worst[t.type] = std::max(worst[t.type], e);
    }
    for (const auto& [type, e] : worst)
      std::printf("  %-26s %-5s worst rel. RMS error %.5f\n", fx.quantized.filename().c_str(),
                  ws::dtype_name(type), e);
  }
}

// BF16 copies made by llama-quantize from the F16 files: every F16 tensor is its values
// rounded to BF16 (nearest, ties to even), the others are unchanged.
TEST(QuantFixtures, Bf16IsTheF16WeightsRounded) {
  int checked = 0;
  for (const auto& e : fs::directory_iterator(kModels)) {
    const std::string name = e.path().filename().string();
    const auto pos = name.find("-q256-bf16.gguf");
    if (pos == std::string::npos) continue;
    const fs::path f16_path = kModels / (name.substr(0, pos) + "-q256-f16.gguf");
    if (!fs::exists(f16_path)) continue;
    const auto f16 = ws::gguf::File::open(f16_path.string());
    const auto bf = ws::gguf::File::open(e.path().string());
    for (const auto& t : bf.tensors()) {
      SCOPED_TRACE(name + ": " + t.name);
      const auto& ref_t = f16.require_tensor(t.name);
      ASSERT_EQ(ref_t.ne, t.ne);
      auto ref = dequantize_tensor(ref_t);
      if (ref_t.type == DType::f16) {
        ASSERT_EQ(t.type, DType::bf16);
        for (float& v : ref) v = ws::bf16_to_f32(ws::f32_to_bf16(v));
        ++checked;
      }
      EXPECT_EQ(dequantize_tensor(t), ref);
    }
  }
  EXPECT_GT(checked, 0) << "no <base>-q256-bf16.gguf beside its F16 original";
}

// (b) quantize_row on the F16 weights reproduces llama-quantize's bytes exactly, for
// every quantized tensor of every fixture (Q8_0, Q4_0, Q4_K, Q6_K).
TEST(QuantFixtures, QuantizeRowIsByteIdenticalToLlamaCpp) {
  std::map<DType, int> checked;
  for (const auto& fx : quant_fixtures()) {
    const auto f16 = ws::gguf::File::open(fx.f16.string());
    const auto q = ws::gguf::File::open(fx.quantized.string());
    for (const auto& t : q.tensors()) {
      if (!is_quantized(t.type)) continue;
      SCOPED_TRACE(fx.quantized.filename().string() + ": " + t.name + " " + ws::dtype_name(t.type));
      const auto src = dequantize_tensor(f16.require_tensor(t.name));
      const int64_t n = t.ne[0];
      const size_t rb = ws::row_bytes(t.type, n);
      std::vector<uint8_t> mine(size_t(t.nbytes));  // [nbytes] u8: our quantization
      for (int64_t r = 0; r < t.rows(); ++r)
        ws::quantize_row(t.type, src.data() + size_t(r * n), mine.data() + size_t(r) * rb, n);
      size_t first_diff = mine.size();
      for (size_t i = 0; i < mine.size(); ++i)
        if (mine[i] != t.data[i]) {
          first_diff = i;
          break;
        }
      EXPECT_EQ(first_diff, mine.size()) << "first differing byte " << first_diff << " (block "
                                         << first_diff / ws::traits(t.type).block_bytes << ")";
      ++checked[t.type];
    }
  }
  EXPECT_GT(checked[DType::q8_0], 0);
  EXPECT_GT(checked[DType::q4_0], 0);
  for (const auto& [type, n] : checked) std::printf("  %-5s %d tensors byte-identical\n", ws::dtype_name(type), n);
}

// (c) The real binary: `warmstart quantize` writes the same tensor types and bytes as
// llama-quantize (and, since metadata order and layout follow ggml, the same file).
TEST(QuantizeCli, OutputMatchesLlamaQuantize) {
  TempDir dir;
  int compared = 0;
  for (const auto& fx : quant_fixtures()) {
    SCOPED_TRACE(fx.quantized.filename().string());
    const fs::path out = dir.path() / (fx.base + "-" + fx.suffix + ".gguf");
    const fs::path log = dir.path() / "log.txt";
    ASSERT_EQ(run_binary("quantize \"" + fx.f16.string() + "\" \"" + out.string() + "\" " + fx.suffix + " -t 2", log), 0)
        << slurp(log);
    const auto mine = ws::gguf::File::open(out.string());
    const auto ref = ws::gguf::File::open(fx.quantized.string());
    ASSERT_EQ(mine.tensors().size(), ref.tensors().size());
    for (size_t i = 0; i < ref.tensors().size(); ++i) {
      const auto& a = mine.tensors()[i];
      const auto& b = ref.tensors()[i];
      EXPECT_EQ(a.name, b.name) << "tensor order differs at " << i;
      EXPECT_EQ(a.type, b.type) << b.name;
      EXPECT_EQ(a.ne, b.ne) << b.name;
      EXPECT_EQ(a.offset, b.offset) << b.name;
      if (a.nbytes == b.nbytes) EXPECT_EQ(0, std::memcmp(a.data, b.data, a.nbytes)) << b.name;
      else ADD_FAILURE() << b.name << " size " << a.nbytes << " vs " << b.nbytes;
    }
    EXPECT_EQ(mine.get_int("general.file_type", -1), ref.get_int("general.file_type", -2));
    EXPECT_EQ(mine.get_int("general.quantization_version", -1), 2);
    // Whole file, metadata order included.
    EXPECT_TRUE(read_file(out) == read_file(fx.quantized)) << "files differ";
    ++compared;
  }
  EXPECT_GE(compared, 2);
}

TEST(QuantizeCli, ClearErrors) {
  TempDir dir;
  const fs::path log = dir.path() / "log.txt";
  const auto fx = quant_fixtures();
  ASSERT_FALSE(fx.empty());
  const std::string in = "\"" + fx[0].f16.string() + "\"";
  const std::string out = "\"" + (dir.path() / "o.gguf").string() + "\"";
  EXPECT_NE(run_binary("quantize " + in + " " + out + " Q3_XYZ", log), 0);
  EXPECT_NE(slurp(log).find("unknown quantization type 'Q3_XYZ'"), std::string::npos) << slurp(log);
  EXPECT_NE(run_binary("quantize \"" + (dir.path() / "missing.gguf").string() + "\" " + out + " q8_0", log), 0);
  EXPECT_NE(slurp(log).find("missing.gguf"), std::string::npos) << slurp(log);
  // Requantizing an already quantized model is refused, as llama-quantize does.
  EXPECT_NE(run_binary("quantize \"" + fx[0].quantized.string() + "\" " + out + " F16", log), 0);
  EXPECT_NE(slurp(log).find("requantize"), std::string::npos) << slurp(log);
}

// Per-tensor type policy on a model whose row length (64) is not a multiple of 256: the
// K-quant fallback and the tied token_embd rule (Q6_K -> Q8_0), as llama.cpp does.
TEST(QuantizePolicy, FallbackForShortRows) {
  const std::vector<ws::TensorDesc> t = {
      {"token_embd.weight", {64, 100}, DType::f32},
      {"blk.0.attn_norm.weight", {64}, DType::f32},
      {"blk.0.attn_v.weight", {64, 32}, DType::f32},
      {"blk.0.shortconv.conv.weight", {3, 64}, DType::f32},
      {"blk.0.ffn_down.weight", {192, 64}, DType::f32},
  };
  ws::ModelFacts facts{"llama", 1, 0, 4, 2};
  const auto q4km = ws::plan_tensor_types(t, *ws::parse_quant_target("q4_k_m"), facts);
  EXPECT_EQ(q4km[0].type, DType::q8_0);  // output/tied embd: 64 % 256 != 0 -> Q8_0
  EXPECT_EQ(q4km[1].type, DType::f32);   // 1-D norm untouched
  EXPECT_EQ(q4km[2].type, DType::q8_0);  // Q6_K (use_more_bits) does not fit -> Q8_0
  EXPECT_TRUE(q4km[2].fallback);
  EXPECT_EQ(q4km[3].type, DType::f32);   // conv kernel untouched
  const auto q40 = ws::plan_tensor_types(t, *ws::parse_quant_target("Q4_0"), facts);
  EXPECT_EQ(q40[0].type, DType::q8_0);   // tied embd wants Q6_K, falls back to Q8_0
  EXPECT_EQ(q40[2].type, DType::q4_0);
  EXPECT_EQ(q40[4].type, DType::q4_0);
  EXPECT_FALSE(ws::parse_quant_target("Q4_K_X").has_value());
}

// (d) Formats without a llama.cpp fixture: round trips on random data.
namespace {
std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);  // [n] f32
  for (auto& x : v) x = nd(rng);
  return v;
}
std::vector<float> round_trip(DType t, const std::vector<float>& x, int64_t n_per_row) {
  std::vector<uint8_t> q(ws::row_bytes(t, n_per_row) * (x.size() / n_per_row));  // [bytes] u8
  std::vector<float> y(x.size());                                                 // [n] f32
  const size_t rb = ws::row_bytes(t, n_per_row);
  for (size_t r = 0; r < x.size() / n_per_row; ++r) {
    ws::quantize_row(t, x.data() + r * n_per_row, q.data() + r * rb, n_per_row);
    ws::dequantize_row(t, q.data() + r * rb, y.data() + r * n_per_row, n_per_row);
  }
  return y;
}
}  // namespace

TEST(QuantRoundTrip, AllFormatsWithinBounds) {
  const auto x = gaussian(64 * 1024, 7, 0.05f);
  for (DType t : {DType::q8_0, DType::q6_k, DType::q5_k, DType::q4_k, DType::q4_0, DType::bf16, DType::f16}) {
    const double e = rel_rms(round_trip(t, x, 1024), x);
    std::printf("  random N(0,1): %-5s rel. RMS error %.5f\n", ws::dtype_name(t), e);
    EXPECT_LT(e, error_bound(t)) << ws::dtype_name(t);
  }
}

// Requantizing Q5_K-representable data must (nearly) reproduce it. The scale search is not
// exactly idempotent (llama.cpp's is the same algorithm): measured 11204/11264 bytes
// unchanged and a 2.2e-3 relative change, far below the format's 0.036 error.
TEST(QuantRoundTrip, Q5KRequantizationIsStable) {
  const auto x = gaussian(256 * 64, 11);
  std::vector<uint8_t> q1(ws::row_bytes(DType::q5_k, int64_t(x.size())));  // [bytes] u8: Q5_K of x
  std::vector<uint8_t> q2(q1.size());  // [bytes] u8: Q5_K of deq(q1)
  std::vector<float> y(x.size());      // [n] f32: dequantized q1
  std::vector<float> z(x.size());      // [n] f32: dequantized q2
  ws::quantize_row(DType::q5_k, x.data(), q1.data(), int64_t(x.size()));
  ws::dequantize_row(DType::q5_k, q1.data(), y.data(), int64_t(x.size()));
  ws::quantize_row(DType::q5_k, y.data(), q2.data(), int64_t(x.size()));
  ws::dequantize_row(DType::q5_k, q2.data(), z.data(), int64_t(x.size()));
  size_t same = 0;
  for (size_t i = 0; i < q1.size(); ++i) same += q1[i] == q2[i];
  const double change = rel_rms(z, y);
  std::printf("  Q5_K requantization: %zu / %zu bytes unchanged, rel. change %.2e\n", same, q1.size(), change);
  EXPECT_GT(double(same), 0.98 * double(q1.size()));
  EXPECT_LT(change, 0.005);
}

TEST(QuantRoundTrip, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values (1 and 1 + 2^-7): ties go to even (1.0);
  // just above the tie rounds up.
  const std::vector<float> x = {1.0f + 1.0f / 256, std::nextafter(1.0f + 1.0f / 256, 2.0f), -3.5f};
  uint16_t h[3];
  ws::quantize_row(DType::bf16, x.data(), h, 3);
  EXPECT_EQ(h[0], 0x3f80);
  EXPECT_EQ(h[1], 0x3f81);
  EXPECT_EQ(h[2], 0xc060);
}

TEST(QuantActivations, Q8KAndQ8_0) {
  const auto x = gaussian(1024, 3);
  std::vector<ws::block_q8_k> qk(1024 / ws::QK_K);  // [4] q8_K blocks
  ws::quantize_row_q8_k(x.data(), qk.data(), 1024);
  std::vector<float> y(1024);  // [1024] f32
  for (size_t b = 0; b < qk.size(); ++b) {
    int maxabs = 0;
    for (int j = 0; j < ws::QK_K; ++j) {
      y[b * ws::QK_K + j] = qk[b].d * qk[b].qs[j];
      maxabs = std::max(maxabs, std::abs(int(qk[b].qs[j])));
    }
    EXPECT_EQ(maxabs, 127);  // the extreme value maps to +-127
    for (int g = 0; g < ws::QK_K / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += qk[b].qs[g * 16 + j];
      EXPECT_EQ(qk[b].bsums[g], s);
    }
  }
  EXPECT_LT(rel_rms(y, x), 0.01);  // measured 0.0069 (one scale per 256)
  std::vector<ws::block_q8_0> q0(1024 / ws::QK8_0);  // [32] q8_0 blocks
  ws::quantize_row_q8_0(x.data(), q0.data(), 1024);
  for (size_t b = 0; b < q0.size(); ++b)
    for (int j = 0; j < ws::QK8_0; ++j) y[b * ws::QK8_0 + j] = ws::f16_to_f32(q0[b].d) * q0[b].qs[j];
  EXPECT_LT(rel_rms(y, x), 0.008);
}

// Writer: metadata of every type survives a write + read, in order.
TEST(GgufWriter, RoundTripsEveryValueType) {
  using ws::gguf::Value;
  using ws::gguf::ValueType;
  ws::gguf::Writer w;
  auto val = [](ValueType t, auto v) {
    Value x;
    x.type = t;
    x.v = v;
    return x;
  };
  w.set("u8", val(ValueType::u8, uint64_t(200)));
  w.set("i8", val(ValueType::i8, int64_t(-100)));
  w.set("u16", val(ValueType::u16, uint64_t(60000)));
  w.set("i16", val(ValueType::i16, int64_t(-30000)));
  w.set("u32", val(ValueType::u32, uint64_t(4000000000u)));
  w.set("i32", val(ValueType::i32, int64_t(-2000000000)));
  w.set("u64", val(ValueType::u64, uint64_t(1) << 40));
  w.set("i64", val(ValueType::i64, -(int64_t(1) << 40)));
  w.set("f32", val(ValueType::f32, 0.25));
  w.set("f64", val(ValueType::f64, 1e-300));
  w.set("b", val(ValueType::boolean, true));
  w.set("s", val(ValueType::string, std::string("héllo")));
  auto arr = std::make_shared<ws::gguf::Array>();
  arr->elem_type = ValueType::string;
  arr->items = {val(ValueType::string, std::string("a")), val(ValueType::string, std::string(""))};
  w.set("arr", val(ValueType::array, arr));
  w.set_u32("u8", 5);  // replaced keys move to the end, like gguf_set_val_*
  w.add_tensor("t", {32, 2}, DType::q8_0);
  TempDir dir;
  const auto path = (dir.path() / "m.gguf").string();
  w.open(path);
  std::vector<uint8_t> data(68, 0x11);  // [2 rows x 34] u8: two q8_0 blocks
  w.write_tensor(data);
  w.finish();
  const auto f = ws::gguf::File::open(path);
  ASSERT_EQ(f.metadata().size(), 13u);
  EXPECT_EQ(f.metadata().back().first, "u8");
  EXPECT_EQ(f.metadata().back().second.type, ValueType::u32);
  EXPECT_EQ(f.get_int("i8", 0), -100);
  EXPECT_EQ(f.get_int("u32", 0), 4000000000ll);
  EXPECT_EQ(f.get_int("i64", 0), -(int64_t(1) << 40));
  EXPECT_EQ(f.get_float("f32", 0), 0.25);
  EXPECT_EQ(f.get_float("f64", 0), 1e-300);
  EXPECT_EQ(f.get_string("s"), "héllo");
  EXPECT_EQ(f.get_strings("arr"), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(f.find("i16")->type, ValueType::i16);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].type, DType::q8_0);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(0, std::memcmp(f.tensors()[0].data, data.data(), data.size()));
}
