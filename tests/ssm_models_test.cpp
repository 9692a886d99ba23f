// The Mamba-2 family (mamba2, granitehybrid, nemotron_h) on the fixture models: any
// micro-batch split gives bit-identical logits, snapshot/restore and fork are exact and
// isolated, recurrent layers refuse to be cut. Models and probe tokens come from the
// golden JSONs at run time (no tokenizer, no hard-coded shapes or lengths).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/eval.h"
#include "engine/logit_report.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace fs = std::filesystem;
using namespace ws;

namespace {

const fs::path kShared = WS_SHARED_DIR;
const std::set<std::string> kSsmArchs = {"mamba2", "granitehybrid", "nemotron_h"};

struct GoldenModel {
  std::string golden;  // path of the golden JSON
  std::string model;   // path of its model file
  std::string arch;
};

std::vector<GoldenModel> ssm_goldens() {
  std::vector<GoldenModel> out;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || j.value("format", "") != "llama-golden-v1") continue;
    const fs::path model = kShared / j.at("model_file").get<std::string>();
    const std::string arch = gguf::File::open(model.string()).get_string("general.architecture");
    if (kSsmArchs.count(arch)) out.push_back({e.path().string(), model.string(), arch});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.golden < b.golden; });
  return out;
}

::testing::AssertionResult same_bits(const float* a, const float* b, size_t n) {
  if (std::memcmp(a, b, n * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= worst)) worst = d, at = i;
  }
  return ::testing::AssertionFailure() << "logits differ, max |diff| " << worst << " at element " << at;
}

class SsmModels : public ::testing::TestWithParam<GoldenModel> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(GetParam().model));
    model_ = load_model(*file_);
    ASSERT_EQ(model_->config().arch, GetParam().arch);
    for (const auto& p : read_golden(GetParam().golden))
      if (p.tokens.size() > tokens_.size()) tokens_ = p.tokens;
    ASSERT_GT(tokens_.size(), size_t(mem_.kv_page_size) + 8) << "the split points need a probe longer than a page";
    mem_.n_ctx = int32_t(tokens_.size()) + 64;
    straight_ = run(*fresh(), tokens_, 512);
  }

  std::unique_ptr<SeqState> fresh() const { return std::make_unique<SeqState>(model_->make_state(mem_)); }
  // Logits [tokens.size()][n_vocab] of `tokens` appended to `s`.
  std::vector<float> run(SeqState& s, std::span<const Token> tokens, int32_t n_ubatch) {
    std::vector<float> logits;  // [n][n_vocab]
    eval_tokens(*model_, s, tokens, n_ubatch, LogitsMode::all, logits, pool_);
    return logits;
  }
  std::span<const Token> head(size_t k) const { return std::span<const Token>(tokens_).first(k); }
  std::span<const Token> tail(size_t k) const { return std::span<const Token>(tokens_).subspan(k); }
  // Checks that continuing `s` (at position k) with tokens[k:] reproduces the straight run.
  ::testing::AssertionResult continues_straight(SeqState& s, size_t k, int32_t n_ubatch) {
    const auto got = run(s, tail(k), n_ubatch);
    const size_t nv = size_t(model_->config().n_vocab);
    if (got.size() != (tokens_.size() - k) * nv) return ::testing::AssertionFailure() << "wrong logits size";
    return same_bits(got.data(), straight_.data() + k * nv, got.size());
  }
  // Split points: inside the first micro-batch, at and around a KV page boundary, later.
  std::vector<size_t> splits() const {
    const size_t page = size_t(mem_.kv_page_size), n = tokens_.size();
    return {1, 3, 6, page - 1, page, page + 1, n / 2 + 3, n - 1};
  }
  // Tokens unrelated to the probe's continuation, used to move a state elsewhere.
  std::vector<Token> detour() const { return std::vector<Token>(tokens_.rbegin(), tokens_.rbegin() + 19); }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<Token> tokens_;    // [n] the golden file's longest probe
  MemoryOptions mem_;
  ThreadPool pool_{2};
  std::vector<float> straight_;  // [n][n_vocab] one micro-batch of 512
};

TEST_P(SsmModels, EveryMicroBatchSplitIsBitIdentical) {
  for (const int32_t ub : {1, 7, 32, 512}) {
    SCOPED_TRACE("n_ubatch " + std::to_string(ub));
    auto s = fresh();
    const auto logits = run(*s, tokens_, ub);
    ASSERT_EQ(logits.size(), straight_.size());
    EXPECT_TRUE(same_bits(logits.data(), straight_.data(), logits.size()));
    EXPECT_EQ(s->position(), int32_t(tokens_.size()));
  }
}

TEST_P(SsmModels, SnapshotRestoreIsBitIdentical) {
  for (const size_t k : splits()) {
    for (const int32_t ub : {1, 7, 512}) {
      SCOPED_TRACE("split at " + std::to_string(k) + ", n_ubatch " + std::to_string(ub));
      auto s = fresh();
      run(*s, head(k), ub);
      const Snapshot snap = s->snapshot();
      ASSERT_EQ(snap.position, int32_t(k));
      run(*s, detour(), ub);  // the live state moves on elsewhere
      s->restore(snap);
      ASSERT_EQ(s->position(), int32_t(k));
      EXPECT_TRUE(continues_straight(*s, k, ub));
      auto other = fresh();  // the same snapshot restores into a new state too, and again
      other->restore(snap);
      EXPECT_TRUE(continues_straight(*other, k, ub));
    }
  }
}

TEST_P(SsmModels, ExtendingAForkNeverChangesTheOrigin) {
  for (const size_t k : splits()) {
    SCOPED_TRACE("fork at " + std::to_string(k));
    auto origin = fresh();
    run(*origin, head(k), 7);
    SeqState fork = origin->fork();
    run(fork, detour(), 7);  // the fork diverges first...
    EXPECT_TRUE(continues_straight(*origin, k, 7));  // ...and the origin does not notice
    auto origin2 = fresh();
    run(*origin2, head(k), 32);
    SeqState fork2 = origin2->fork();
    run(*origin2, detour(), 32);  // the origin moves on; the fork keeps the old state
    EXPECT_TRUE(continues_straight(fork2, k, 32));
  }
}

TEST_P(SsmModels, RecurrentLayersRefuseToBeCut) {
  auto s = fresh();
  const size_t k = tokens_.size() / 2;
  run(*s, head(k), 32);
  EXPECT_EQ(s->truncate_floor(), int32_t(k));
  EXPECT_FALSE(s->try_truncate(int32_t(k) - 1));  // all-or-nothing: nothing was cut
  EXPECT_EQ(s->position(), int32_t(k));
  EXPECT_TRUE(continues_straight(*s, k, 32));
}

TEST_P(SsmModels, BadTokenLeavesTheStateUntouched) {
  auto s = fresh();
  run(*s, head(5), 512);
  const Token bad[] = {tokens_[5], Token(model_->config().n_vocab)};
  EXPECT_THROW(run(*s, bad, 512), std::runtime_error);
  EXPECT_EQ(s->position(), 5);
  EXPECT_TRUE(continues_straight(*s, 5, 512));
}

// Each layer declares the memory it needs: recurrent for Mamba-2, full KV for attention,
// and nemotron_h's MLP layers a zero-byte recurrent state that only tracks position.
TEST_P(SsmModels, LayerMemoryKinds) {
  auto s = fresh();
  ASSERT_EQ(s->n_layers(), size_t(model_->config().n_layer));
  const auto kv = file_->get_ints(GetParam().arch + ".attention.head_count_kv");
  const auto ff = file_->get_ints(GetParam().arch + ".feed_forward_length");
  for (size_t i = 0; i < s->n_layers(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const int64_t n_kv = kv.size() == s->n_layers() ? kv[i] : 0;
    const int64_t n_ff = ff.size() == s->n_layers() ? ff[i] : 0;
    const LayerState& l = s->layer(i);
    if (n_kv > 0) {
      EXPECT_EQ(l.kind(), LayerKind::full_kv);
    } else {
      EXPECT_EQ(l.kind(), LayerKind::recurrent);
      const bool mlp_only = GetParam().arch == "nemotron_h" && n_ff > 0;
      EXPECT_EQ(l.bytes() == 0, mlp_only);
    }
  }
  run(*s, head(9), 4);
  for (size_t i = 0; i < s->n_layers(); ++i) EXPECT_EQ(s->layer(i).position(), 9) << "layer " << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SsmModels, ::testing::ValuesIn(ssm_goldens()), [](const auto& info) {
  std::string s = fs::path(info.param.golden).stem().string();
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});

TEST(SsmModelsDiscovery, EveryArchitectureHasAFixture) {
  std::set<std::string> seen;
  for (const auto& g : ssm_goldens()) seen.insert(g.arch);
  EXPECT_EQ(seen, kSsmArchs);
}

}  // namespace
