// For every architecture warmstart supports (found through the goldens' models): logits do
// not depend on the micro-batch split, and split/snapshot/restore/fork reproduce a straight
// run bit for bit (DESIGN.md, correctness contract). The checks live in model_fixtures.h
// so arch_specific_test.cpp can run them on more fixtures of one architecture.
#include <gtest/gtest.h>

#include <map>

#include "model_fixtures.h"
#include "not_supported.h"

using namespace ws;
using namespace ws::test;

namespace {

// One F32 fixture per architecture.
std::vector<GoldenFixture> cases() {
  std::map<std::string, GoldenFixture> by_arch;
  for (const auto& g : golden_fixtures())
    if (g.f32 && !by_arch.count(g.arch)) by_arch[g.arch] = g;
  std::vector<GoldenFixture> out;
  for (auto& [arch, c] : by_arch) out.push_back(c);
  return out;
}

class StateExactness : public ::testing::TestWithParam<GoldenFixture> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(GetParam().model));
    if (const auto* u = test::needs_unsupported(*file_))
      GTEST_SKIP() << test::not_supported_message(*u, file_->path());
    model_ = load_model(*file_);
    tokens_ = read_golden(GetParam().golden).at(1).tokens;  // the random probe
    mem_.n_ctx = int32_t(tokens_.size()) + 64;
  }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::vector<Token> tokens_;
  MemoryOptions mem_;
  ThreadPool pool_{2};
};

TEST_P(StateExactness, BatchSplitDoesNotChangeLogits) { expect_batch_split_invariant(*model_, tokens_, mem_, pool_); }

TEST_P(StateExactness, SnapshotRestoreAndForkAreExact) {
  expect_snapshot_restore_fork_exact(*model_, tokens_, mem_, pool_);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StateExactness, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return param_name(info.param.model); });

}  // namespace
