// Qwen3.5 (gated delta net + gated attention hybrid): batch invariance, snapshot/restore
// and fork isolation on the fixture models, fed with the golden probes' tokens (no
// tokenizer needed). qwen35 goldens are discovered at run time; no shape or probe length
// is assumed.
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

std::string model_path_of(const std::string& golden) {
  std::ifstream in(golden);
  return (kShared / nlohmann::json::parse(in).at("model_file").get<std::string>()).string();
}

// Golden JSONs whose model file is a qwen35 model.
std::vector<std::string> qwen35_goldens() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || j.value("format", "") != "llama-golden-v1") continue;
    const auto f = gguf::File::open((kShared / j.at("model_file").get<std::string>()).string());
    if (f.get_string("general.architecture") == "qwen35") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Logits [tokens.size()][n_vocab] of `tokens` appended to `state`.
std::vector<float> eval(const Model& m, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                        ThreadPool& pool) {
  std::vector<float> logits;  // [n][n_vocab] f32
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

class Qwen35Fixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(model_path_of(GetParam())));
    model_ = load_model(*file_);
    const auto probes = read_golden(GetParam());
    ASSERT_GE(probes.size(), 2u);
    for (const auto& p : probes)  // the longest probe: the most positions to compare
      if (p.tokens.size() > tokens_.size()) tokens_ = p.tokens;
    for (const auto& p : probes)  // "other" tokens that dirty a state before a restore
      if (p.tokens != tokens_) other_ = p.tokens;
    ASSERT_GT(tokens_.size(), 130u) << "the probe must cross two KV pages";
    ASSERT_FALSE(other_.empty());
    mem_.n_ctx = int32_t(tokens_.size() + other_.size());
    nv_ = size_t(model_->config().n_vocab);
  }
  std::vector<float> straight(int32_t n_ubatch) {
    SeqState s = model_->make_state(mem_);
    return eval(*model_, s, tokens_, n_ubatch, pool_);
  }
  // The split points: inside the first micro-batch, at a KV page boundary, just after
  // one, and late in the probe.
  std::vector<size_t> splits() const {
    const size_t page = size_t(mem_.kv_page_size);
    return {5, page, page + 1, tokens_.size() - 7};
  }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<Token> tokens_, other_;  // [n] probe tokens
  MemoryOptions mem_;
  size_t nv_ = 0;
  ThreadPool pool_{2};
};

// A token's logits never depend on how the prompt is cut into micro-batches.
TEST_P(Qwen35Fixture, LogitsBitIdenticalForAnyMicroBatch) {
  const auto ref = straight(512);
  for (int32_t ub : {1, 7, 32}) {
    SCOPED_TRACE("n_ubatch " + std::to_string(ub));
    EXPECT_TRUE(bit_identical(straight(ub), ref.data(), ref.size()));
  }
  // LogitsMode::last gives the final row of the full run.
  SeqState s = model_->make_state(mem_);
  std::vector<float> last;  // [n_vocab]
  eval_tokens(*model_, s, tokens_, 32, LogitsMode::last, last, pool_);
  EXPECT_TRUE(bit_identical(last, ref.data() + (tokens_.size() - 1) * nv_, nv_));
}

// eval [0,K), snapshot, dirty the state, restore (in place and into a fresh state), eval
// [K,n): identical to the straight run, whatever the micro-batch size.
TEST_P(Qwen35Fixture, SnapshotRestoreIsExact) {
  const auto ref = straight(512);
  const std::span<const Token> all(tokens_);
  for (int32_t ub : {7, 32, 512}) {
    for (size_t k : splits()) {
      SCOPED_TRACE("n_ubatch " + std::to_string(ub) + " K " + std::to_string(k));
      SeqState a = model_->make_state(mem_);
      eval(*model_, a, all.first(k), ub, pool_);
      const Snapshot snap = a.snapshot();
      EXPECT_EQ(snap.position, int32_t(k));
      eval(*model_, a, std::span<const Token>(other_).first(std::min<size_t>(other_.size(), 70)), ub, pool_);
      a.restore(snap);
      ASSERT_EQ(a.position(), int32_t(k));
      EXPECT_TRUE(bit_identical(eval(*model_, a, all.subspan(k), ub, pool_), ref.data() + k * nv_,
                                (tokens_.size() - k) * nv_));
      SeqState fresh = model_->make_state(mem_);
      fresh.restore(snap);
      EXPECT_TRUE(bit_identical(eval(*model_, fresh, all.subspan(k), ub, pool_), ref.data() + k * nv_,
                                (tokens_.size() - k) * nv_));
    }
  }
}

// Extending a fork never changes the origin's later results, and the fork is exact too.
TEST_P(Qwen35Fixture, ForkIsIsolated) {
  const auto ref = straight(512);
  const std::span<const Token> all(tokens_);
  for (size_t k : splits()) {
    SCOPED_TRACE("K " + std::to_string(k));
    SeqState origin = model_->make_state(mem_);
    eval(*model_, origin, all.first(k), 32, pool_);
    SeqState branch = origin.fork();
    SeqState twin = origin.fork();
    eval(*model_, branch, other_, 32, pool_);  // crosses page boundaries on the fork
    EXPECT_TRUE(bit_identical(eval(*model_, origin, all.subspan(k), 32, pool_), ref.data() + k * nv_,
                              (tokens_.size() - k) * nv_));
    EXPECT_TRUE(bit_identical(eval(*model_, twin, all.subspan(k), 7, pool_), ref.data() + k * nv_,
                              (tokens_.size() - k) * nv_));
  }
}

// The delta-net layers cannot be cut back: a hybrid state refuses any truncation below its
// position and stays usable and unchanged.
TEST_P(Qwen35Fixture, RefusesTruncationBelowPosition) {
  const auto ref = straight(512);
  const std::span<const Token> all(tokens_);
  const size_t k = size_t(mem_.kv_page_size) + 3;
  SeqState s = model_->make_state(mem_);
  eval(*model_, s, all.first(k), 32, pool_);
  EXPECT_EQ(s.truncate_floor(), int32_t(k));
  EXPECT_FALSE(s.try_truncate(int32_t(k) - 1));
  EXPECT_FALSE(s.try_truncate(0));
  EXPECT_EQ(s.position(), int32_t(k));
  EXPECT_TRUE(s.try_truncate(int32_t(k)));  // a cut to where it is is a no-op
  EXPECT_TRUE(bit_identical(eval(*model_, s, all.subspan(k), 32, pool_), ref.data() + k * nv_,
                            (tokens_.size() - k) * nv_));
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = fs::path(info.param).stem().string();
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

TEST(Qwen35Fixtures, AreFound) { EXPECT_FALSE(qwen35_goldens().empty()) << "no qwen35 golden in shared/fixtures"; }

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen35Fixture, ::testing::ValuesIn(qwen35_goldens()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Qwen35Fixture);

}  // namespace
