// What only some architectures have to show, beyond the generic batch-split and
// snapshot/restore/fork checks of state_exactness_test.cpp (which run on one F32 fixture
// per architecture):
//   * recurrent and hybrid states refuse to be cut back, all or nothing;
//   * each layer declares the memory kind its block needs;
//   * a token outside the vocabulary throws and leaves the state as it was;
//   * every fixture model file loads, the vision ones with their bigger vocabularies;
//   * LFM2's quantized fixtures pass the generic exactness checks too.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "gguf/writer.h"
#include "model_fixtures.h"
#include "not_supported.h"

using namespace ws;
using namespace ws::test;

namespace {

// Architectures with layers that cannot be truncated (recurrent, conv, delta net).
const std::vector<std::string> kRecurrentArchs = {"lfm2",          "lfm2moe",    "qwen35",        "qwen35moe", "mamba",
                                                 "mamba2",        "granitehybrid", "nemotron_h", "nemotron_h_moe"};
const std::vector<std::string> kAllArchs = {"gemma3", "gemma4",   "gpt-oss",    "granitehybrid",  "lfm2",
                                            "lfm2moe", "llama",   "mamba",      "mamba2",         "nemotron_h",
                                            "nemotron_h_moe", "qwen2", "qwen3", "qwen3moe",       "qwen35",
                                            "qwen35moe"};

// A model loaded from the F32 fixture of one architecture, with its longest probe and
// the logits of a straight run over it.
class ArchFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    fixture_ = f32_fixture(GetParam());
    ASSERT_FALSE(fixture_.golden.empty()) << "no F32 golden fixture of architecture " << GetParam();
    file_ = std::make_unique<gguf::File>(gguf::File::open(fixture_.model));
    model_ = load_model(*file_);
    tokens_ = longest_probe(fixture_.golden);
    ASSERT_GT(tokens_.size(), size_t(mem_.kv_page_size) + 8) << "the cut points need a probe longer than a page";
    mem_.n_ctx = int32_t(tokens_.size()) + 64;
    SeqState s = model_->make_state(mem_);
    straight_ = eval_all(*model_, s, tokens_, 512, pool_);
  }
  // Continuing `s` (at position k) with tokens[k:] reproduces the straight run.
  ::testing::AssertionResult continues_straight(SeqState& s, size_t k, int32_t n_ubatch) {
    const auto got = eval_all(*model_, s, std::span<const Token>(tokens_).subspan(k), n_ubatch, pool_);
    const size_t nv = size_t(model_->config().n_vocab);
    if (got.size() != (tokens_.size() - k) * nv) return ::testing::AssertionFailure() << "wrong logits size";
    return same_bits(got.data(), straight_.data() + k * nv, got.size());
  }
  std::span<const Token> head(size_t k) const { return std::span<const Token>(tokens_).first(k); }

  GoldenFixture fixture_;
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<Token> tokens_;    // [n] the golden file's longest probe
  MemoryOptions mem_;
  ThreadPool pool_{2};
  std::vector<float> straight_;  // [n][n_vocab] one micro-batch of 512
};

using RecurrentArch = ArchFixture;
using AnyArch = ArchFixture;

// The embedding is checked before any layer runs: the throw leaves no trace in the state.
TEST_P(AnyArch, BadTokenLeavesTheStateUntouched) {
  SeqState s = model_->make_state(mem_);
  eval_all(*model_, s, head(5), 512, pool_);
  const Token bad[] = {tokens_[5], Token(model_->config().n_vocab)};
  EXPECT_THROW(eval_all(*model_, s, bad, 512, pool_), std::runtime_error);
  EXPECT_EQ(s.position(), 5);
  EXPECT_TRUE(continues_straight(s, 5, 512));
}

// A state with recurrent layers cannot be cut back; a refused cut changes nothing.
TEST_P(RecurrentArch, RefusesTruncationBelowPosition) {
  SeqState s = model_->make_state(mem_);
  const size_t k = size_t(mem_.kv_page_size) + 3;
  eval_all(*model_, s, head(k), 32, pool_);
  EXPECT_EQ(s.truncate_floor(), int32_t(k));
  EXPECT_FALSE(s.try_truncate(int32_t(k) - 1));
  EXPECT_FALSE(s.try_truncate(0));
  EXPECT_EQ(s.position(), int32_t(k));
  EXPECT_TRUE(s.try_truncate(int32_t(k)));  // a cut to where it is is a no-op
  EXPECT_TRUE(continues_straight(s, k, 32));
}

// The memory kind each layer of `arch` should declare, from the file's own keys.
LayerKind expected_kind(const gguf::File& f, const std::string& arch, size_t layer, size_t n_layers) {
  if (arch.rfind("qwen35", 0) == 0) {  // full attention every full_attention_interval layers, delta net otherwise
    const int64_t interval = f.get_int(arch + ".full_attention_interval", 0);
    return interval > 0 && (layer + 1) % size_t(interval) == 0 ? LayerKind::full_kv : LayerKind::recurrent;
  }
  const auto kv = f.get_ints(arch + ".attention.head_count_kv");  // per layer in hybrids
  return kv.size() == n_layers && kv[layer] > 0 ? LayerKind::full_kv : LayerKind::recurrent;
}

// Each layer declares the memory it needs: recurrent for conv / SSM / delta-net blocks,
// full KV for attention, and nemotron_h's MLP layers a zero-byte recurrent state that
// only tracks the position.
TEST_P(RecurrentArch, LayerMemoryKinds) {
  SeqState s = model_->make_state(mem_);
  ASSERT_EQ(s.n_layers(), size_t(model_->config().n_layer));
  const auto ff = file_->get_ints(GetParam() + ".feed_forward_length");
  for (size_t i = 0; i < s.n_layers(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerState& l = s.layer(i);
    EXPECT_EQ(l.kind(), expected_kind(*file_, GetParam(), i, s.n_layers()));
    const bool mlp_only = GetParam().rfind("nemotron_h", 0) == 0 && ff.size() == s.n_layers() && ff[i] > 0;
    if (l.kind() == LayerKind::recurrent) {
      EXPECT_EQ(l.bytes() == 0, mlp_only);
    }
  }
  eval_all(*model_, s, head(9), 4, pool_);
  for (size_t i = 0; i < s.n_layers(); ++i) EXPECT_EQ(s.layer(i).position(), 9) << "layer " << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AnyArch, ::testing::ValuesIn(kAllArchs), [](const auto& i) { return param_name(i.param); });
INSTANTIATE_TEST_SUITE_P(Fixtures, RecurrentArch, ::testing::ValuesIn(kRecurrentArchs),
                         [](const auto& i) { return i.param; });

TEST(ArchFixtures, EveryArchitectureHasAnF32Golden) {
  std::set<std::string> seen;
  for (const auto& g : golden_fixtures())
    if (g.f32) seen.insert(g.arch);
  for (const auto& arch : kAllArchs) EXPECT_TRUE(seen.count(arch)) << arch;
}

// A copy of `src` at `path` without tensor `drop` (if set) and with tensor `grow`'s first
// dimension one larger (its data zero-padded per row), everything else unchanged.
void write_variant(const gguf::File& src, const std::string& path, const std::string& drop, const std::string& grow) {
  gguf::Writer w;
  w.copy_metadata(src);
  std::vector<std::vector<uint8_t>> data;  // [tensors] bytes to write, in add order
  for (const auto& t : src.tensors()) {
    if (t.name == drop) continue;
    std::vector<int64_t> ne = t.ne;
    std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
    if (t.name == grow) {
      const size_t row = size_t(ne[0]) * 4, rows = size_t(t.rows());
      std::vector<uint8_t> wide(rows * (row + 4), 0);
      for (size_t r = 0; r < rows; ++r) std::copy_n(t.data + r * row, row, wide.data() + r * (row + 4));
      bytes = std::move(wide);
      ++ne[0];
    }
    w.add_tensor(t.name, ne, t.type);
    data.push_back(std::move(bytes));
  }
  w.open(path);
  for (const auto& d : data) w.write_tensor(d);
  w.finish();
}

// A missing or misshapen tensor is refused at load with its name (and, for a wrong shape,
// what was expected): for one F32 fixture per architecture, the first matrix of block 1.
TEST(ArchFixtures, MissingOrMisshapenTensorIsNamed) {
  std::set<std::string> seen;
  const std::string path = (std::filesystem::temp_directory_path() / ("ws-broken-" + std::to_string(::getpid()) + ".gguf")).string();
  for (const auto& g : golden_fixtures()) {
    if (!g.f32 || !seen.insert(g.arch).second) continue;
    const auto f = gguf::File::open(g.model);
    if (skip_not_supported(f, g.model)) continue;
    std::string victim;
    for (const auto& t : f.tensors())
      if (t.name.rfind("blk.1.", 0) == 0 && t.ne.size() >= 2 && (victim.empty() || t.name < victim)) victim = t.name;
    ASSERT_FALSE(victim.empty()) << g.model;
    SCOPED_TRACE(g.arch + ": " + victim);
    for (const bool drop : {true, false}) {
      write_variant(f, path, drop ? victim : "", drop ? "" : victim);
      const auto broken = gguf::File::open(path);
      try {
        load_model(broken);
        ADD_FAILURE() << (drop ? "loaded without " : "loaded with a misshapen ") << victim;
      } catch (const gguf::GgufError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'" + victim + "'"), std::string::npos) << msg;
        if (!drop) {
          EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
        }
      }
    }
  }
  std::filesystem::remove(path);
  EXPECT_GE(seen.size(), 2u);
}

// Every model file in the fixtures loads and gives finite logits up to its last token id;
// a vision model ("<x>-vl-tiny") has a bigger vocabulary (image marker tokens) than its
// text sibling ("<x>-tiny").
TEST(ArchFixtures, EveryModelFileLoads) {
  ThreadPool pool(2);
  std::map<std::string, int32_t> vocab;  // file stem -> n_vocab
  for (const auto& e : std::filesystem::directory_iterator(kShared / "fixtures" / "models")) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".gguf" || stem.rfind("mmproj", 0) == 0) continue;
    SCOPED_TRACE(stem);
    const auto f = gguf::File::open(e.path().string());
    std::unique_ptr<Model> model;
    try {
      model = load_model(f);
    } catch (const gguf::GgufError&) {
      if (skip_not_supported(f, stem)) continue;  // refused, and listed
      throw;
    }
    const auto* toks = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(toks, nullptr);
    EXPECT_EQ(size_t(model->config().n_vocab), toks->as_array().items.size());
    SeqState s = model->make_state(MemoryOptions{});
    const std::vector<Token> probe = {1, 2, 3, Token(model->config().n_vocab - 1)};
    const auto logits = eval_all(*model, s, probe, 512, pool);
    EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
    vocab[stem] = model->config().n_vocab;
  }
  int vision = 0;
  for (const auto& [stem, n] : vocab) {
    const size_t at = stem.find("-vl-");
    if (at == std::string::npos || !vocab.count(stem.substr(0, at) + "-" + stem.substr(at + 4))) continue;
    EXPECT_GT(n, vocab[stem.substr(0, at) + "-" + stem.substr(at + 4)]) << stem;
    ++vision;
  }
  EXPECT_GE(vision, 3);  // llama-vl-tiny, lfm2-vl-tiny, gemma3-vl-tiny
}

// LFM2's quantized fixtures: its short conv and attention on quantized weights.
class Lfm2Quantized : public ::testing::TestWithParam<GoldenFixture> {};

std::vector<GoldenFixture> lfm2_quantized() {
  std::vector<GoldenFixture> out;
  for (const auto& g : golden_fixtures())
    if (g.arch == "lfm2" && !g.f32) out.push_back(g);
  return out;
}

TEST_P(Lfm2Quantized, GenericExactnessChecks) {
  const auto file = gguf::File::open(GetParam().model);
  const auto model = load_model(file);
  const auto tokens = longest_probe(GetParam().golden);
  MemoryOptions mem;
  mem.n_ctx = int32_t(tokens.size()) + 64;
  ThreadPool pool(2);
  expect_batch_split_invariant(*model, tokens, mem, pool);
  expect_snapshot_restore_fork_exact(*model, tokens, mem, pool);
}

TEST(Lfm2QuantizedFixtures, AreFound) { EXPECT_GE(lfm2_quantized().size(), 1u); }

INSTANTIATE_TEST_SUITE_P(Fixtures, Lfm2Quantized, ::testing::ValuesIn(lfm2_quantized()),
                         [](const auto& i) { return param_name(i.param.golden); });

}  // namespace
