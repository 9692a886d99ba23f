// GGUF reader tests: every fixture file, hand-built files covering each value type and
// version, one test per structural error, and mass corruption (every prefix, truncated and
// bit-flipped copies of a real model) that must end in GgufError and nothing else.
#include "gguf/gguf.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ws::gguf {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

const fs::path kFixtures = fs::path(WS_SHARED_DIR) / "fixtures";

// ---------------------------------------------------------------------------------------
// A tiny GGUF writer. Each call appends the little-endian encoding GGUF specifies, so a
// test can spell out a file field by field, including wrong ones.
class Builder {
 public:
  Builder& magic(std::string_view m = "GGUF") { return raw(m); }
  Builder& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    magic();
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  template <class T>
  Builder& put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
    return *this;
  }
  Builder& u8(uint8_t v) { return put(v); }
  Builder& u32(uint32_t v) { return put(v); }
  Builder& u64(uint64_t v) { return put(v); }
  Builder& i64(int64_t v) { return put(v); }
  Builder& raw(std::string_view s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Builder& str(std::string_view s) { return u64(s.size()).raw(s); }
  Builder& type(ValueType t) { return u32(uint32_t(t)); }
  // Key and type tag of a metadata entry; the caller appends the value.
  Builder& key(std::string_view k, ValueType t) { return str(k).type(t); }
  Builder& kv_u32(std::string_view k, uint32_t v) { return key(k, ValueType::u32).u32(v); }
  Builder& kv_str(std::string_view k, std::string_view v) { return key(k, ValueType::string).str(v); }
  Builder& array_head(ValueType elem, uint64_t n) { return type(elem).u64(n); }
  Builder& tensor(std::string_view name, std::vector<int64_t> ne, uint32_t dtype, uint64_t offset) {
    str(name).u32(uint32_t(ne.size()));
    for (auto d : ne) i64(d);
    return u32(dtype).u64(offset);
  }
  Builder& pad_to(size_t alignment) {
    while (b_.size() % alignment) b_.push_back(0);
    return *this;
  }
  Builder& fill(size_t n, uint8_t v) {
    b_.insert(b_.end(), n, v);
    return *this;
  }
  size_t size() const { return b_.size(); }
  Bytes bytes() const { return b_; }

 private:
  Bytes b_;
};

// A small valid v3 file holding every scalar type, nested arrays and two F32 tensors,
// ending exactly at the last tensor byte (so every proper prefix is invalid).
Bytes all_types_file(uint32_t version = 3) {
  Builder b;
  b.header(version, 2, 17);
  b.key("t.u8", ValueType::u8).u8(200);
  b.key("t.i8", ValueType::i8).put<int8_t>(-5);
  b.key("t.u16", ValueType::u16).put<uint16_t>(60000);
  b.key("t.i16", ValueType::i16).put<int16_t>(-30000);
  b.kv_u32("t.u32", 4000000000u);
  b.key("t.i32", ValueType::i32).put<int32_t>(-2000000000);
  b.key("t.f32", ValueType::f32).put<float>(1.5f);
  b.key("t.bool", ValueType::boolean).u8(1);
  b.kv_str("t.string", "h\xC3\xA9llo");
  b.key("t.u64", ValueType::u64).u64(uint64_t(1) << 63);
  b.key("t.i64", ValueType::i64).i64(-(int64_t(1) << 40));
  b.key("t.f64", ValueType::f64).put<double>(-2.25);
  b.key("t.ints", ValueType::array).array_head(ValueType::i32, 3).put<int32_t>(1).put<int32_t>(-2).put<int32_t>(3);
  b.key("t.strings", ValueType::array).array_head(ValueType::string, 2).str("a").str("");
  b.key("t.nested", ValueType::array).array_head(ValueType::array, 2);
  b.array_head(ValueType::u8, 2).u8(7).u8(8);
  b.array_head(ValueType::u8, 0);
  b.key("t.empty", ValueType::array).array_head(ValueType::f32, 0);
  b.kv_str("general.architecture", "toy");
  b.tensor("a.weight", {4, 2}, 0, 0);  // 32 bytes at 0
  b.tensor("b.weight", {8}, 0, 32);    // 32 bytes at 32
  b.pad_to(32);
  b.fill(64, 0x3f);
  return b.bytes();
}

// Runs `f` and returns the GgufError message; fails the test on success or another type.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const GgufError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected GgufError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected GgufError, parse succeeded";
  return {};
}
std::string parse_error(const Bytes& b) {
  return error_of([&] { File::from_bytes(b, "t.gguf"); });
}
#define EXPECT_CONTAINS(hay, needle) \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos) << "message: " << (hay)

// Temporary directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/ws_gguf_test_XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path write(const std::string& name, const Bytes& b, size_t n) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(n));
    return p;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

Bytes read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Touches everything a successful parse exposes, so ASan/UBSan and the bounds checks
// below see every pointer the reader handed out.
void walk_value(const Value& v) {
  switch (v.type) {
    case ValueType::array:
      for (const auto& it : v.as_array().items) walk_value(it);
      break;
    case ValueType::string: (void)v.as_string().size(); break;
    case ValueType::boolean: (void)v.as_bool(); break;
    case ValueType::f32:
    case ValueType::f64: (void)v.as_float(); break;
    default: EXPECT_TRUE(v.is_integer()) << value_type_name(v.type);
  }
}
void walk(const File& f) {
  for (const auto& kv : f.metadata()) walk_value(kv.second);
  const uint8_t* lo = f.bytes().data();
  const uint8_t* hi = lo + f.file_size();
  for (const auto& t : f.tensors()) {
    ASSERT_GE(t.data, lo + f.data_offset()) << t.name;
    ASSERT_LE(t.data + t.nbytes, hi) << t.name;
    if (t.nbytes) {
      volatile uint8_t sink = t.data[0] ^ t.data[t.nbytes - 1];
      (void)sink;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Fixtures

std::vector<fs::path> fixture_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kFixtures / dir))
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void check_fixture(const fs::path& p, bool is_model) {
  SCOPED_TRACE(p.string());
  const File f = File::open(p.string());
  EXPECT_TRUE(f.version() == 2 || f.version() == 3) << f.version();
  EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
  if (is_model) {
    EXPECT_GT(f.tensors().size(), 0u);
  }
  walk(f);
  const Value& arch = f.require("general.architecture");
  EXPECT_EQ(arch.type, ValueType::string);
  EXPECT_FALSE(arch.as_string().empty());
  // mmproj files carry no tokenizer; every language model and vocab file does.
  if (p.filename().string().rfind("mmproj-", 0) != 0) {
    const Value& toks = f.require("tokenizer.ggml.tokens");
    ASSERT_EQ(toks.type, ValueType::array);
    EXPECT_EQ(toks.as_array().elem_type, ValueType::string);
    EXPECT_GT(toks.as_array().items.size(), 100u);
    EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens").size(), toks.as_array().items.size());
  }
  const uint8_t* base = f.bytes().data();
  for (const auto& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    const auto tr = dtype_traits(uint32_t(t.type));
    ASSERT_TRUE(tr.has_value());
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ(t.n_elements() % tr->block_elems, 0);
    EXPECT_EQ(t.nbytes, uint64_t(t.n_elements() / tr->block_elems) * tr->block_bytes);
    EXPECT_EQ(t.data, base + f.data_offset() + t.offset);
    EXPECT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size());
    EXPECT_EQ(f.find_tensor(t.name), &t);
  }
}

TEST(GgufFixtures, EveryModelParses) {
  const auto files = fixture_files("models");
  ASSERT_GE(files.size(), 9u) << "fixtures missing under " << kFixtures;
  for (const auto& p : files) check_fixture(p, true);
}

TEST(GgufFixtures, EveryVocabParses) {
  const auto files = fixture_files("vocab");
  ASSERT_GE(files.size(), 5u) << "fixtures missing under " << kFixtures;
  for (const auto& p : files) check_fixture(p, false);
}

TEST(GgufFixtures, LlamaTinyMatchesItsDocumentedShape) {
  const File f = File::open((kFixtures / "models/llama-tiny-f32.gguf").string());
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length", -1), 64);
  EXPECT_EQ(f.get_int("llama.block_count", -1), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count", -1), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv", -1), 2);
  EXPECT_EQ(f.get_int("llama.feed_forward_length", -1), 192);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens").size(), 8003u);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.merges").size(), 7744u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id", -1), 8000);
  const TensorInfo& emb = f.require_tensor("token_embd.weight");
  EXPECT_EQ(emb.ne, (std::vector<int64_t>{64, 8003}));
  EXPECT_EQ(emb.type, DType::f32);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(f.file_size(), 3100000u);
}

TEST(GgufFixtures, QuantizedTensorSizes) {
  const File f = File::open((kFixtures / "models/llama-q256-q8_0.gguf").string());
  int q8 = 0;
  for (const auto& t : f.tensors())
    if (t.type == DType::q8_0) {
      ++q8;
      EXPECT_EQ(t.nbytes, uint64_t(t.n_elements() / 32 * 34)) << t.name;
    }
  EXPECT_EQ(q8, 15);  // README: 15 x Q8_0, 5 x F32
  EXPECT_EQ(f.tensors().size(), 20u);
}

TEST(GgufFixtures, OpenAndFromBytesAgree) {
  const fs::path p = kFixtures / "models/qwen3-tiny-f32.gguf";
  const File a = File::open(p.string());
  const File b = File::from_bytes(read_all(p), p.string());
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) EXPECT_EQ(a.metadata()[i].first, b.metadata()[i].first);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& ta = a.tensors()[i];
    const auto& tb = b.tensors()[i];
    EXPECT_EQ(ta.name, tb.name);
    EXPECT_EQ(ta.ne, tb.ne);
    ASSERT_EQ(ta.nbytes, tb.nbytes);
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0) << ta.name;
  }
}

TEST(GgufFixtures, MovedFileKeepsValidTensorPointers) {
  File a = File::from_bytes(all_types_file());
  File b = std::move(a);
  const TensorInfo& t = b.require_tensor("b.weight");
  EXPECT_EQ(t.data, b.bytes().data() + b.data_offset() + 32);
  EXPECT_EQ(t.data[0], 0x3f);
}

// ---------------------------------------------------------------------------------------
// Hand-built files: value types, versions, alignment

TEST(GgufBuilt, EveryValueTypeRoundTrips) {
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(version);
    const File f = File::from_bytes(all_types_file(version));
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.metadata().size(), 17u);
    EXPECT_EQ(f.require("t.u8").type, ValueType::u8);
    EXPECT_EQ(f.get_int("t.u8", 0), 200);
    EXPECT_EQ(f.get_int("t.i8", 0), -5);
    EXPECT_EQ(f.get_int("t.u16", 0), 60000);
    EXPECT_EQ(f.get_int("t.i16", 0), -30000);
    EXPECT_EQ(f.get_int("t.u32", 0), 4000000000ll);
    EXPECT_EQ(f.get_int("t.i32", 0), -2000000000);
    EXPECT_EQ(f.require("t.f32").type, ValueType::f32);
    EXPECT_DOUBLE_EQ(f.get_float("t.f32", 0), 1.5);
    EXPECT_TRUE(f.get_bool("t.bool", false));
    EXPECT_EQ(f.get_string("t.string"), "h\xC3\xA9llo");
    EXPECT_EQ(f.get_int("t.i64", 0), -(int64_t(1) << 40));
    EXPECT_DOUBLE_EQ(f.get_float("t.f64", 0), -2.25);
    // 2^63 does not fit an int64: the accessor must say so rather than wrap.
    EXPECT_CONTAINS(error_of([&] { f.get_int("t.u64", 0); }), "out of range");
    EXPECT_DOUBLE_EQ(f.get_float("t.u64", 0), 9223372036854775808.0);
    EXPECT_EQ(f.get_ints("t.ints"), (std::vector<int64_t>{1, -2, 3}));
    EXPECT_EQ(f.get_floats("t.ints"), (std::vector<double>{1, -2, 3}));
    EXPECT_EQ(f.get_strings("t.strings"), (std::vector<std::string>{"a", ""}));
    const Array& nested = f.require("t.nested").as_array();
    ASSERT_EQ(nested.elem_type, ValueType::array);
    ASSERT_EQ(nested.items.size(), 2u);
    EXPECT_EQ(nested.items[0].as_array().elem_type, ValueType::u8);
    EXPECT_EQ(nested.items[0].as_array().items[1].as_int(), 8);
    EXPECT_TRUE(nested.items[1].as_array().items.empty());
    EXPECT_TRUE(f.require("t.empty").as_array().items.empty());
    ASSERT_EQ(f.tensors().size(), 2u);
    EXPECT_EQ(f.tensors()[1].ne, (std::vector<int64_t>{8}));
    EXPECT_EQ(f.data_offset() % 32, 0u);
    walk(f);
  }
}

TEST(GgufBuilt, TypedAccessorsNameTheKeyOnMismatch) {
  const File f = File::from_bytes(all_types_file(), "toy.gguf");
  const std::string e1 = error_of([&] { f.get_string("t.u8"); });
  EXPECT_CONTAINS(e1, "toy.gguf: key 't.u8': expected a string, found u8");
  EXPECT_CONTAINS(error_of([&] { f.get_int("t.string", 0); }), "expected an integer, found string");
  EXPECT_CONTAINS(error_of([&] { f.get_strings("t.ints"); }), "expected a string, found i32");
  EXPECT_CONTAINS(error_of([&] { (void)f.require("t.i8").as_uint(); }), "non-negative");
  EXPECT_EQ(f.get_int("absent", 42), 42);
  EXPECT_EQ(f.get_string("absent", "dflt"), "dflt");
  EXPECT_TRUE(f.get_strings("absent").empty());
}

TEST(GgufBuilt, MissingRequiredKeyAndTensor) {
  const File f = File::from_bytes(all_types_file(), "toy.gguf");
  EXPECT_EQ(error_of([&] { f.require("llama.block_count"); }), "toy.gguf: missing required key 'llama.block_count'");
  EXPECT_EQ(error_of([&] { f.require_tensor("output.weight"); }), "toy.gguf: missing required tensor 'output.weight'");
}

Bytes aligned_file(uint32_t alignment, uint64_t offset) {
  Builder b;
  b.header(3, 1, 1).kv_u32("general.alignment", alignment);
  b.tensor("w", {16}, 0, offset);
  b.pad_to(alignment);
  b.fill(offset + 64, 1);
  return b.bytes();
}

TEST(GgufBuilt, CustomAlignment) {
  const File f = File::from_bytes(aligned_file(64, 64));
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_GT(f.data_offset(), 32u);  // the header is > 32 bytes, so 64-alignment moved it
  EXPECT_EQ(f.tensors()[0].data, f.bytes().data() + f.data_offset() + 64);
  // An offset aligned to the default 32 but not to the file's own 64 is rejected.
  EXPECT_CONTAINS(parse_error(aligned_file(64, 32)), "tensor 'w': offset 32 is not aligned");
  EXPECT_CONTAINS(parse_error(aligned_file(48, 0)), "general.alignment 48 is not a power of two");
  Builder zero;
  zero.header(3, 0, 1).kv_u32("general.alignment", 0);
  EXPECT_CONTAINS(parse_error(zero.bytes()), "general.alignment 0 is not a power of two");
  Builder s;
  s.header(3, 0, 1).kv_str("general.alignment", "32");
  EXPECT_CONTAINS(parse_error(s.bytes()), "general.alignment: expected an integer, found string");
}

TEST(GgufBuilt, NoTensorsNoData) {
  Builder b;
  b.header(2, 0, 1).kv_str("general.architecture", "x");
  const File f = File::from_bytes(b.bytes());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("general.architecture"), "x");
}

// ---------------------------------------------------------------------------------------
// Structural errors, one by one, with the message a user would see

TEST(GgufErrors, EmptyFile) {
  EXPECT_EQ(parse_error({}), "t.gguf: bad magic: not a GGUF file");
  TempDir dir;
  const fs::path p = dir.write("empty.gguf", {}, 0);
  EXPECT_EQ(error_of([&] { File::open(p.string()); }), p.string() + ": empty file, not a GGUF model");
}

TEST(GgufErrors, OpenProblemsNameThePath) {
  TempDir dir;
  const std::string missing = (dir.path() / "nope.gguf").string();
  EXPECT_CONTAINS(error_of([&] { File::open(missing); }), missing + ": cannot open: No such file");
  EXPECT_CONTAINS(error_of([&] { File::open(dir.path().string()); }), "not a regular file");
}

TEST(GgufErrors, BadMagic) {
  Builder b;
  b.magic("GGML").u32(3).u64(0).u64(0);
  EXPECT_EQ(parse_error(b.bytes()), "t.gguf: bad magic: not a GGUF file");
  EXPECT_EQ(parse_error(Bytes{'G', 'G'}), "t.gguf: bad magic: not a GGUF file");
}

TEST(GgufErrors, UnsupportedVersion) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    Builder b;
    b.header(v, 0, 0);
    EXPECT_EQ(parse_error(b.bytes()),
              "t.gguf: unsupported GGUF version " + std::to_string(v) + " (2 and 3 are supported)");
  }
}

TEST(GgufErrors, AbsurdCounts) {
  Builder t;
  t.header(3, uint64_t(1) << 60, 0).fill(100, 0);
  EXPECT_CONTAINS(parse_error(t.bytes()), "tensor count 1152921504606846976 exceeds the file size");
  Builder k;
  k.header(3, 0, uint64_t(1) << 60).fill(100, 0);
  EXPECT_CONTAINS(parse_error(k.bytes()), "metadata count 1152921504606846976 exceeds the file size");
  Builder a;
  a.header(3, 0, 1).key("arr", ValueType::array).array_head(ValueType::u64, uint64_t(1) << 60).fill(64, 0);
  EXPECT_CONTAINS(parse_error(a.bytes()), "array length 1152921504606846976 is absurd (limit 16777216)");
  Builder a2;  // plausible length, but 1000 u64 cannot fit in 64 bytes
  a2.header(3, 0, 1).key("arr", ValueType::array).array_head(ValueType::u64, 1000).fill(64, 0);
  EXPECT_CONTAINS(parse_error(a2.bytes()), "array length 1000 exceeds the file size");
  Builder s;
  s.header(3, 0, 1).key("s", ValueType::string).u64(uint64_t(1) << 40).fill(64, 0);
  EXPECT_CONTAINS(parse_error(s.bytes()), "string value: string length 1099511627776 is absurd");
  Builder s2;
  s2.header(3, 0, 1).key("s", ValueType::string).u64(1000).raw("short");
  EXPECT_CONTAINS(parse_error(s2.bytes()), "truncated file: string value needs 1000 bytes, 5 left");
}

Bytes one_tensor(std::vector<int64_t> ne, uint32_t dtype, uint64_t offset, size_t data_bytes) {
  Builder b;
  b.header(3, 1, 0).tensor("w", std::move(ne), dtype, offset).pad_to(32).fill(data_bytes, 0);
  return b.bytes();
}

TEST(GgufErrors, BadTensorShapes) {
  EXPECT_CONTAINS(parse_error(one_tensor({int64_t(1) << 50}, 0, 0, 64)), "tensor 'w': absurd dimension 1125899906842624");
  EXPECT_CONTAINS(parse_error(one_tensor({0}, 0, 0, 64)), "tensor 'w': absurd dimension 0");
  EXPECT_CONTAINS(parse_error(one_tensor({-4}, 0, 0, 64)), "tensor 'w': absurd dimension -4");
  EXPECT_CONTAINS(parse_error(one_tensor({1 << 30, 1 << 30}, 0, 0, 64)), "tensor 'w': element count overflows");
  EXPECT_CONTAINS(parse_error(one_tensor({}, 0, 0, 64)), "tensor 'w': 0 dimensions (1..4 allowed)");
  EXPECT_CONTAINS(parse_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 64)), "tensor 'w': 5 dimensions (1..4 allowed)");
  // Q8_0 rows must hold whole 32-element blocks.
  EXPECT_CONTAINS(parse_error(one_tensor({33}, 8, 0, 64)), "row of 33 elements is not a multiple of the Q8_0 block size 32");
  // A valid Q8_0 tensor for contrast: 64 elements = 2 blocks of 34 bytes.
  EXPECT_EQ(File::from_bytes(one_tensor({64}, 8, 0, 68)).tensors()[0].nbytes, 68u);
}

TEST(GgufErrors, UnknownDtype) {
  EXPECT_CONTAINS(parse_error(one_tensor({4}, 99, 0, 64)), "tensor 'w': unknown dtype id 99");
  EXPECT_CONTAINS(parse_error(one_tensor({4}, 4, 0, 64)), "unknown dtype id 4");  // removed Q4_2
}

TEST(GgufErrors, DataPastTheEnd) {
  // 16 f32 = 64 bytes but only 60 present.
  EXPECT_CONTAINS(parse_error(one_tensor({16}, 0, 0, 60)),
                  "truncated file: tensor 'w' (64 bytes at data offset 0) extends past the end of the file (60 data bytes)");
  // Offset far past the end, and an offset whose sum with the size would overflow.
  EXPECT_CONTAINS(parse_error(one_tensor({16}, 0, uint64_t(1) << 40, 64)), "extends past the end");
  EXPECT_CONTAINS(parse_error(one_tensor({16}, 0, ~uint64_t(31), 64)), "extends past the end");
  // Tensor infos present but the file stops before the (aligned) data section begins.
  Builder b;
  b.header(3, 1, 0).tensor("w", {1}, 0, 0);
  if (b.size() % 32 == 0) b.u8(0);  // make sure padding would be needed
  EXPECT_CONTAINS(parse_error(b.bytes()), "truncated file");
}

TEST(GgufErrors, MisalignedOffset) {
  EXPECT_CONTAINS(parse_error(one_tensor({4}, 0, 4, 64)), "tensor 'w': offset 4 is not aligned");
}

TEST(GgufErrors, Duplicates) {
  Builder k;
  k.header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2);
  EXPECT_CONTAINS(parse_error(k.bytes()), "duplicate metadata key 'a'");
  Builder t;
  t.header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad_to(32).fill(64, 0);
  EXPECT_CONTAINS(parse_error(t.bytes()), "duplicate tensor name 'w'");
}

TEST(GgufErrors, BadValueEncodings) {
  Builder vt;
  vt.header(3, 0, 1).str("k").u32(13).u32(0);
  EXPECT_CONTAINS(parse_error(vt.bytes()), "key 'k': unknown value type 13");
  Builder et;
  et.header(3, 0, 1).key("k", ValueType::array).array_head(ValueType(77), 1).u64(0);
  EXPECT_CONTAINS(parse_error(et.bytes()), "unknown array element type 77");
  Builder bo;
  bo.header(3, 0, 1).key("k", ValueType::boolean).u8(2);
  EXPECT_CONTAINS(parse_error(bo.bytes()), "bool value 2 is neither 0 nor 1");
  // Arrays of arrays nested 5 deep exceed the reader's limit of 4.
  Builder deep;
  deep.header(3, 0, 1).key("k", ValueType::array);
  for (int i = 0; i < 5; ++i) deep.array_head(ValueType::array, 1);
  deep.array_head(ValueType::u8, 0).fill(64, 0);
  EXPECT_CONTAINS(parse_error(deep.bytes()), "arrays nested deeper than 4");
}

TEST(GgufErrors, ErrorsCarryAByteOffset) {
  Builder b;
  b.header(3, 0, 1).key("k", ValueType::boolean).u8(9);
  // header 24 + key 8+1 + type 4 = 37; the bool has been consumed when the check runs.
  EXPECT_CONTAINS(parse_error(b.bytes()), "(at byte offset 38)");
}

// ---------------------------------------------------------------------------------------
// Mass corruption

TEST(GgufCorruption, EveryPrefixOfASmallFileThrows) {
  const Bytes full = all_types_file();
  ASSERT_NO_THROW(File::from_bytes(full));
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    const std::string e = parse_error(Bytes(full.begin(), full.begin() + ptrdiff_t(n)));
    if (n < 4) {
      EXPECT_CONTAINS(e, "bad magic");
    } else {
      // Either the cursor ran out, or a count was checked against the bytes left.
      EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("exceeds the file size") != std::string::npos)
          << e;
    }
  }
}

// Parses a fixture cut at ~200 positions, more of them inside the header where the parser
// has work to do; cuts inside the tensor data must report truncation.
TEST(GgufCorruption, TruncatedFixtureCopies) {
  const fs::path p = kFixtures / "models/llama-tiny-f32.gguf";
  const Bytes full = read_all(p);
  const uint64_t data_off = File::from_bytes(full).data_offset();
  ASSERT_LT(data_off, full.size());
  std::vector<size_t> cuts;
  for (size_t i = 0; i < 100; ++i) cuts.push_back(size_t(data_off * i / 100));
  for (size_t i = 0; i < 100; ++i) cuts.push_back(size_t(data_off + (full.size() - data_off) * i / 100));
  cuts.push_back(full.size() - 1);
  TempDir dir;
  int via_file = 0;
  for (size_t c : cuts) {
    SCOPED_TRACE(c);
    const std::string e = parse_error(Bytes(full.begin(), full.begin() + ptrdiff_t(c)));
    if (c >= data_off) {
      EXPECT_CONTAINS(e, "truncated");
    }
    if (c % 7 == 0 || c == full.size() - 1) {  // a sample also goes through mmap
      const fs::path tp = dir.write("cut.gguf", full, c);
      const std::string e2 = error_of([&] { File::open(tp.string()); });
      if (c >= data_off) {
        EXPECT_CONTAINS(e2, "truncated");
      }
      ++via_file;
    }
  }
  EXPECT_GT(via_file, 10);
}

TEST(GgufCorruption, BitFlippedFixtureCopies) {
  const fs::path p = kFixtures / "models/llama-tiny-f32.gguf";
  const Bytes full = read_all(p);
  const uint64_t header = File::from_bytes(full).data_offset();
  uint64_t state = 0x5eed;  // splitmix64: fixed seed, same flips on every machine
  auto rnd = [&] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    Bytes b = full;
    const int flips = 1 + int(rnd() % 3);
    for (int k = 0; k < flips; ++k) {
      // Mostly inside the header (where flips can matter); sometimes near the start,
      // where the counts live, and sometimes anywhere.
      const uint64_t r = rnd();
      const size_t where = (r & 3) == 0 ? size_t(rnd() % 64) : (r & 3) == 1 ? size_t(rnd() % b.size()) : size_t(rnd() % header);
      b[where] ^= uint8_t(1u << (rnd() % 8));
    }
    std::optional<File> f;
    try {
      f.emplace(File::from_bytes(std::move(b), "flipped"));
    } catch (const GgufError&) {
      ++rejected;
      continue;
    } catch (const std::exception& e) {
      FAIL() << "copy " << i << ": non-GgufError exception: " << e.what();
    }
    walk(*f);  // outside the try: a throw while walking a parsed file is a test failure
    ++parsed;
  }
  // Both outcomes must occur, or the flips did not reach what the parser checks.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace ws::gguf
