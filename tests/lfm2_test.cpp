// LFM2 (short conv + attention hybrid): batch invariance, snapshot/restore and fork
// isolation on the fixture models, with the golden probes' tokens (no tokenizer needed).
// Every lfm2 golden is discovered at run time; nothing about shapes or lengths is assumed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/eval.h"
#include "engine/logit_report.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace fs = std::filesystem;
using namespace ws;

namespace {

const fs::path kShared = WS_SHARED_DIR;

std::string arch_of(const fs::path& model) {
  const auto f = gguf::File::open(model.string());
  return f.get_string("general.architecture");
}

// Golden JSONs whose model is an lfm2 file.
std::vector<std::string> lfm2_goldens() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || j.value("format", "") != "llama-golden-v1") continue;
    if (arch_of(kShared / j.at("model_file").get<std::string>()) == "lfm2") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string model_path_of(const std::string& golden) {
  std::ifstream in(golden);
  return (kShared / nlohmann::json::parse(in).at("model_file").get<std::string>()).string();
}

// The longest probe of a golden file: the most positions to compare.
std::vector<Token> longest_probe(const std::string& golden) {
  std::vector<Token> best;
  for (const auto& p : read_golden(golden))
    if (p.tokens.size() > best.size()) best = p.tokens;
  return best;
}

// Logits [tokens.size()][n_vocab] of `tokens` appended to `state`.
std::vector<float> eval(const Model& m, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                        ThreadPool& pool) {
  std::vector<float> logits;  // [n][n_vocab]
  eval_tokens(m, state, tokens, n_ubatch, LogitsMode::all, logits, pool);
  return logits;
}

// Bit-identity of two logit blocks; on failure reports the largest difference.
::testing::AssertionResult bit_identical(const std::vector<float>& a, const float* b, size_t n) {
  if (a.size() != n) return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << n;
  if (std::memcmp(a.data(), b, n * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  double max_diff = 0;
  for (size_t i = 0; i < n; ++i) max_diff = std::max(max_diff, std::fabs(double(a[i]) - double(b[i])));
  return ::testing::AssertionFailure() << "not bit-identical, max |diff| " << max_diff;
}

class Lfm2Fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(model_path_of(GetParam())));
    model_ = load_model(*file_);
    tokens_ = longest_probe(GetParam());
    ASSERT_GT(tokens_.size(), 70u) << "the split points below need a probe longer than one KV page";
    mem_.n_ctx = int32_t(tokens_.size()) + 64;
    SeqState s = model_->make_state(mem_);
    straight_ = eval(*model_, s, tokens_, 512, pool_);
  }
  size_t vocab() const { return size_t(model_->config().n_vocab); }
  // Logits of tokens[k:] in the straight run.
  const float* straight_from(size_t k) const { return straight_.data() + k * vocab(); }
  std::span<const Token> from(size_t k) const { return std::span<const Token>(tokens_).subspan(k); }
  std::span<const Token> upto(size_t k) const { return std::span<const Token>(tokens_).first(k); }
  // Split points: inside the first micro-batch, around a KV page boundary, midway, near the end.
  std::vector<size_t> splits() const {
    const size_t n = tokens_.size(), page = size_t(mem_.kv_page_size);
    return {1, 5, page - 1, page, page + 1, n / 2, n - 1};
  }
  // Tokens unrelated to the probe, evaluated on a state to dirty it.
  std::vector<Token> other_tokens() const {
    std::vector<Token> o(tokens_.rbegin(), tokens_.rbegin() + 23);
    return o;
  }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<Token> tokens_;
  MemoryOptions mem_;
  ThreadPool pool_{2};
  std::vector<float> straight_;  // [n][n_vocab], one micro-batch of 512
};

TEST_P(Lfm2Fixture, AnyMicroBatchSplitIsBitIdentical) {
  for (const int32_t ub : {1, 7, 32, 512}) {
    SCOPED_TRACE("n_ubatch " + std::to_string(ub));
    SeqState s = model_->make_state(mem_);
    const auto logits = eval(*model_, s, tokens_, ub, pool_);
    EXPECT_TRUE(bit_identical(logits, straight_.data(), straight_.size()));
    EXPECT_EQ(s.position(), int32_t(tokens_.size()));
  }
}

TEST_P(Lfm2Fixture, SnapshotRestoreIsBitIdentical) {
  for (const size_t k : splits()) {
    for (const int32_t ub : {7, 512}) {
      SCOPED_TRACE("split at " + std::to_string(k) + ", n_ubatch " + std::to_string(ub));
      SeqState s = model_->make_state(mem_);
      eval(*model_, s, upto(k), ub, pool_);
      const Snapshot snap = s.snapshot();
      EXPECT_EQ(snap.position, int32_t(k));
      eval(*model_, s, other_tokens(), ub, pool_);  // dirty the live state
      s.restore(snap);
      ASSERT_EQ(s.position(), int32_t(k));
      EXPECT_TRUE(bit_identical(eval(*model_, s, from(k), ub, pool_), straight_from(k), (tokens_.size() - k) * vocab()));

      SeqState fresh = model_->make_state(mem_);  // restoring into a new state works the same
      fresh.restore(snap);
      EXPECT_TRUE(
          bit_identical(eval(*model_, fresh, from(k), ub, pool_), straight_from(k), (tokens_.size() - k) * vocab()));
    }
  }
}

TEST_P(Lfm2Fixture, ConvLayersRefuseToTruncate) {
  SeqState s = model_->make_state(mem_);
  const size_t k = tokens_.size() / 2;
  eval(*model_, s, upto(k), 32, pool_);
  // A hybrid with recurrent conv layers cannot be cut back; the refusal leaves it intact.
  EXPECT_EQ(s.truncate_floor(), int32_t(k));
  EXPECT_FALSE(s.try_truncate(int32_t(k) - 1));
  EXPECT_EQ(s.position(), int32_t(k));
  EXPECT_TRUE(bit_identical(eval(*model_, s, from(k), 32, pool_), straight_from(k), (tokens_.size() - k) * vocab()));
}

TEST_P(Lfm2Fixture, ExtendingAForkNeverChangesTheOrigin) {
  for (const size_t k : splits()) {
    SCOPED_TRACE("fork at " + std::to_string(k));
    SeqState origin = model_->make_state(mem_);
    eval(*model_, origin, upto(k), 32, pool_);
    SeqState fork = origin.fork();
    eval(*model_, fork, other_tokens(), 32, pool_);  // the fork diverges
    EXPECT_TRUE(
        bit_identical(eval(*model_, origin, from(k), 32, pool_), straight_from(k), (tokens_.size() - k) * vocab()));
    // And the origin's progress did not leak into a second fork taken before it moved on.
    SeqState origin2 = model_->make_state(mem_);
    eval(*model_, origin2, upto(k), 32, pool_);
    SeqState fork2 = origin2.fork();
    eval(*model_, origin2, other_tokens(), 32, pool_);
    EXPECT_TRUE(
        bit_identical(eval(*model_, fork2, from(k), 32, pool_), straight_from(k), (tokens_.size() - k) * vocab()));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Lfm2Fixture, ::testing::ValuesIn(lfm2_goldens()),
                         [](const auto& info) {
                           std::string s = fs::path(info.param).stem().string();
                           std::replace_if(s.begin(), s.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return s;
                         });

// Every lfm2 model file in the fixtures loads and gives finite logits, including the
// vision fixture (no golden; a larger vocabulary with image marker tokens).
TEST(Lfm2Models, EveryFixtureLoads) {
  int found = 0;
  ThreadPool pool(2);
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "models")) {
    if (e.path().extension() != ".gguf") continue;
    const auto f = gguf::File::open(e.path().string());
    if (f.get_string("general.architecture") != "lfm2") continue;
    SCOPED_TRACE(e.path().filename().string());
    ++found;
    const auto model = load_model(f);
    const auto* toks = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(toks, nullptr);
    EXPECT_EQ(size_t(model->config().n_vocab), toks->as_array().items.size());
    SeqState s = model->make_state(MemoryOptions{});
    const std::vector<Token> probe = {1, 2, 3, Token(model->config().n_vocab - 1)};
    const auto logits = eval(*model, s, probe, 512, pool);
    EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  }
  EXPECT_GE(found, 2);
}

}  // namespace
