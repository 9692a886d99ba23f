// For every architecture warmstart supports (found through the goldens' models): logits do
// not depend on the micro-batch split, and split/snapshot/restore/fork reproduce a straight
// run bit for bit (DESIGN.md, correctness contract).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/eval.h"
#include "engine/logit_report.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace fs = std::filesystem;
using namespace ws;

namespace {

const fs::path kShared = WS_SHARED_DIR;

struct Case {
  std::string model_path;  // one F32 fixture per architecture
  std::string golden;
};

std::vector<Case> cases() {
  std::map<std::string, Case> by_arch;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || j.value("format", "") != "llama-golden-v1") continue;
    const std::string model = (kShared / j.at("model_file").get<std::string>()).string();
    const auto f = gguf::File::open(model);
    const std::string arch = f.get_string("general.architecture");
    bool f32 = true;
    for (const auto& t : f.tensors()) f32 = f32 && t.type == DType::f32;
    if (f32 && !by_arch.count(arch)) by_arch[arch] = {model, e.path().string()};
  }
  std::vector<Case> out;
  for (auto& [arch, c] : by_arch) out.push_back(c);
  return out;
}

class StateExactness : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(GetParam().model_path));
    try {
      model_ = load_model(*file_);
    } catch (const gguf::GgufError& e) {
      GTEST_SKIP() << "architecture not supported yet: " << e.what();  // golden_test checks the refusal
    }
    tokens_ = read_golden(GetParam().golden).at(1).tokens;  // the random probe
    mem_.n_ctx = int32_t(tokens_.size()) + 64;
  }
  std::vector<float> straight(int32_t ubatch) {
    SeqState s = model_->make_state(mem_);
    std::vector<float> logits;  // [n][n_vocab]
    eval_tokens(*model_, s, tokens_, ubatch, LogitsMode::all, logits, pool_);
    return logits;
  }
  std::vector<float> eval(SeqState& s, size_t begin, size_t end, int32_t ubatch) {
    std::vector<float> logits;  // [end-begin][n_vocab]
    eval_tokens(*model_, s, std::span<const Token>(tokens_).subspan(begin, end - begin), ubatch, LogitsMode::all,
                logits, pool_);
    return logits;
  }
  size_t row(size_t pos) const { return pos * size_t(model_->config().n_vocab); }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<Token> tokens_;
  MemoryOptions mem_;
  ThreadPool pool_{2};
};

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

TEST_P(StateExactness, BatchSplitDoesNotChangeLogits) {
  const auto ref = straight(512);
  for (int32_t ub : {1, 7, 32}) {
    const auto other = straight(ub);
    EXPECT_TRUE(same_bits(ref.data(), other.data(), ref.size())) << "n_ubatch " << ub << " vs 512";
  }
}

TEST_P(StateExactness, SnapshotRestoreAndForkAreExact) {
  const auto ref = straight(32);
  const size_t n = tokens_.size();
  const int32_t page = mem_.kv_page_size;
  for (size_t k : {size_t(5), size_t(page), n / 2, n - 3}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    SeqState live = model_->make_state(mem_);
    eval(live, 0, k, 32);
    const Snapshot snap = live.snapshot();
    SeqState fork = live.fork();
    // Disturb the origin with other tokens, then come back through the snapshot.
    std::vector<float> junk;  // [16][n_vocab]
    const std::vector<Token> other(16, tokens_[0]);
    eval_tokens(*model_, live, other, 32, LogitsMode::none, junk, pool_);
    live.restore(snap);
    const auto after_restore = eval(live, k, n, 32);
    EXPECT_TRUE(same_bits(after_restore.data(), ref.data() + row(k), after_restore.size())) << "restore";
    // The fork was taken before the disturbance and must not have seen it.
    const auto after_fork = eval(fork, k, n, 32);
    EXPECT_TRUE(same_bits(after_fork.data(), ref.data() + row(k), after_fork.size())) << "fork";
    // A fresh state restored from the same snapshot (the origin is gone).
    SeqState fresh = model_->make_state(mem_);
    fresh.restore(snap);
    const auto after_fresh = eval(fresh, k, n, 32);
    EXPECT_TRUE(same_bits(after_fresh.data(), ref.data() + row(k), after_fresh.size())) << "fresh restore";
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = fs::path(info.param.model_path).stem().string();
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StateExactness, ::testing::ValuesIn(cases()), case_name);

}  // namespace
