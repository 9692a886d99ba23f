// Exactness of the gemma3 (sliding window + global attention) and mamba (recurrent)
// models on their fixtures: logits bit-identical for any micro-batch split, after a
// snapshot/restore at several cut points, and unaffected by extending a fork. The fixture
// models and their probe tokens are discovered from the golden JSONs; shapes, probe
// lengths and window sizes come from the files.
#include <gtest/gtest.h>

#include <algorithm>
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

struct Fixture {
  std::string model_path;   // the GGUF
  std::vector<Token> tokens;  // the longest golden probe's tokens
};

// The golden of the tiny model of `arch` (first in name order), with its longest probe.
Fixture find_fixture(const std::string& arch) {
  std::vector<fs::path> jsons;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden"))
    if (e.path().extension() == ".json") jsons.push_back(e.path());
  std::sort(jsons.begin(), jsons.end());
  for (const auto& path : jsons) {
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || j.value("format", "") != "llama-golden-v1") continue;
    const fs::path model = kShared / j.at("model_file").get<std::string>();
    if (gguf::File::open(model.string()).get_string("general.architecture") != arch) continue;
    Fixture f{model.string(), {}};
    for (const auto& p : read_golden(path.string()))
      if (p.tokens.size() > f.tokens.size()) f.tokens = p.tokens;
    return f;
  }
  return {};
}

// Logits [tokens.size()][n_vocab] of `tokens` evaluated on top of `state`.
std::vector<float> run(const Model& m, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                       ThreadPool& pool) {
  std::vector<float> logits;  // [n][n_vocab]
  eval_tokens(m, state, tokens, n_ubatch, LogitsMode::all, logits, pool);
  return logits;
}

// Bit-identical, with a readable failure: where the first difference is and how big.
::testing::AssertionResult same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  if (std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  size_t first = 0;
  double max_diff = 0;
  for (size_t i = a.size(); i-- > 0;)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      first = i;
      max_diff = std::max(max_diff, std::fabs(double(a[i]) - double(b[i])));
    }
  return ::testing::AssertionFailure() << "first differing logit at index " << first << ", max |diff| " << max_diff;
}

class ArchExactness : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    fixture_ = find_fixture(GetParam());
    if (fixture_.model_path.empty()) GTEST_SKIP() << "no golden fixture of architecture " << GetParam();
    file_ = std::make_unique<gguf::File>(gguf::File::open(fixture_.model_path));
    model_ = load_model(*file_);
    n_vocab_ = size_t(model_->config().n_vocab);
    mem_.n_ctx = int32_t(fixture_.tokens.size()) * 2 + 64;
  }
  // The logits of rows [from, n) of a whole-sequence result.
  std::vector<float> tail(const std::vector<float>& all, size_t from) const {
    return {all.begin() + std::ptrdiff_t(from * n_vocab_), all.end()};
  }
  // Tokens unrelated to the probe, to disturb a state before it is restored.
  std::vector<Token> other_tokens(size_t n) const {
    std::vector<Token> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = Token((i * 7919 + 13) % 8000 % n_vocab_);
    return t;
  }
  // Cut points: inside the first micro-batch, at a KV page boundary, beyond the sliding
  // window (when there is one), and the middle.
  std::vector<size_t> cut_points() const {
    const size_t n = fixture_.tokens.size();
    std::vector<size_t> ks = {5, size_t(mem_.kv_page_size), size_t(mem_.kv_page_size) + 1, n / 2};
    const int64_t window = file_->get_int(GetParam() + ".attention.sliding_window", 0);
    if (window > 0) ks.push_back(size_t(window) + 3);
    std::vector<size_t> valid;
    for (size_t k : ks)
      if (k > 0 && k < n) valid.push_back(k);
    return valid;
  }

  Fixture fixture_;
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  size_t n_vocab_ = 0;
  MemoryOptions mem_;
  ThreadPool pool_{2};
};

TEST_P(ArchExactness, MicroBatchSplitIsBitIdentical) {
  SeqState ref_state = model_->make_state(mem_);
  const auto ref = run(*model_, ref_state, fixture_.tokens, 512, pool_);
  for (int32_t ub : {1, 7, 32}) {
    SCOPED_TRACE("n_ubatch " + std::to_string(ub));
    SeqState s = model_->make_state(mem_);
    EXPECT_TRUE(same_bits(run(*model_, s, fixture_.tokens, ub, pool_), ref));
  }
}

TEST_P(ArchExactness, SnapshotRestoreIsBitIdentical) {
  const std::span<const Token> toks(fixture_.tokens);
  SeqState ref_state = model_->make_state(mem_);
  const auto ref = run(*model_, ref_state, toks, 512, pool_);
  for (size_t k : cut_points()) {
    SCOPED_TRACE("cut at " + std::to_string(k));
    SeqState s = model_->make_state(mem_);
    run(*model_, s, toks.first(k), 32, pool_);
    const Snapshot snap = s.snapshot();
    run(*model_, s, other_tokens(40), 7, pool_);  // disturb the live state
    s.restore(snap);
    ASSERT_EQ(s.position(), int32_t(k));
    EXPECT_TRUE(same_bits(run(*model_, s, toks.subspan(k), 32, pool_), tail(ref, k)));
    // Restored into a fresh state, the same.
    SeqState fresh = model_->make_state(mem_);
    fresh.restore(snap);
    EXPECT_TRUE(same_bits(run(*model_, fresh, toks.subspan(k), 512, pool_), tail(ref, k)));
  }
}

TEST_P(ArchExactness, ExtendingAForkLeavesTheOriginAlone) {
  const std::span<const Token> toks(fixture_.tokens);
  SeqState ref_state = model_->make_state(mem_);
  const auto ref = run(*model_, ref_state, toks, 512, pool_);
  for (size_t k : cut_points()) {
    SCOPED_TRACE("fork at " + std::to_string(k));
    SeqState origin = model_->make_state(mem_);
    run(*model_, origin, toks.first(k), 512, pool_);
    SeqState fork = origin.fork();
    SeqState fork2 = origin.fork();
    run(*model_, fork, other_tokens(70), 32, pool_);
    EXPECT_TRUE(same_bits(run(*model_, origin, toks.subspan(k), 32, pool_), tail(ref, k)));
    EXPECT_TRUE(same_bits(run(*model_, fork2, toks.subspan(k), 7, pool_), tail(ref, k)));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArchExactness, ::testing::Values("gemma3", "mamba"),
                         [](const auto& info) { return info.param; });

// Every fixture model of these architectures loads (including gemma3-vl-tiny, whose
// vocabulary has extra image tokens) and evaluates a few tokens to finite logits.
TEST(Gemma3Mamba, EveryFixtureModelLoads) {
  int loaded = 0;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "models")) {
    if (e.path().extension() != ".gguf") continue;
    const auto file = gguf::File::open(e.path().string());
    const std::string arch = file.get_string("general.architecture");
    if (arch != "gemma3" && arch != "mamba") continue;
    SCOPED_TRACE(e.path().filename().string());
    const auto model = load_model(file);
    ThreadPool pool(2);
    SeqState s = model->make_state(MemoryOptions{});
    const std::vector<Token> toks = {1, 2, 3, Token(model->config().n_vocab - 1)};
    const auto logits = run(*model, s, toks, 512, pool);
    EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
    ++loaded;
  }
  EXPECT_GE(loaded, 3);  // gemma3-tiny, gemma3-vl-tiny, mamba-tiny
}

}  // namespace
