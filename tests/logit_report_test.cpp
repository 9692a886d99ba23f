// The row statistics every logit report shares (engine/logit_report.h), on rows small
// enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/logit_report.h"

using namespace ws;

TEST(LogitReport, LogSumExpAndNllAreShiftedByTheMaximum) {
  const std::vector<float> row = {1000.f, 1000.f};  // exp(1000) overflows unshifted
  EXPECT_DOUBLE_EQ(log_sum_exp(row), 1000.0 + std::log(2.0));
  EXPECT_NEAR(token_nll(row, 1), std::log(2.0), 1e-12);  // 1000 + log 2 - 1000 rounds
  const std::vector<float> skewed = {0.f, std::log(3.f)};
  EXPECT_NEAR(token_nll(skewed, 0), std::log(4.0), 1e-7);
}

TEST(LogitReport, TopKIsLogitDescendingWithTiesToTheLowerId) {
  const std::vector<float> row = {0.5f, 2.f, 2.f, -1.f, 3.f};
  EXPECT_EQ(top_k_ids(row, 3), (std::vector<int32_t>{4, 1, 2}));
  EXPECT_EQ(top_k_ids(row, 8).size(), row.size()) << "k is clamped to the row";
}

TEST(LogitReport, MeanNllSkipsRowsWithNoNextToken) {
  const std::vector<float> rows = {0.f, 0.f,   // row 0: uniform, predicts 1
                                   5.f, 5.f,   // row 1: an image position (next -1)
                                   0.f, 0.f};  // row 2: predicts 0
  const std::vector<Token> next = {1, -1, 0};
  EXPECT_DOUBLE_EQ(mean_nll(rows, 2, next), std::log(2.0));
  EXPECT_EQ(mean_nll(rows, 2, std::vector<Token>{-1, -1, -1}), 0.0);
}

TEST(LogitReport, MaxAbsDiffIsInfiniteWhenSizesDiffer) {
  const std::vector<float> a = {1.f, 2.f, 3.f}, b = {1.f, 2.5f, 2.f};
  EXPECT_EQ(max_abs_diff(a, b), 1.0);
  EXPECT_TRUE(std::isinf(max_abs_diff(a, std::vector<float>{1.f, 2.f})));
}

TEST(LogitReport, CompareProbesCountsArgmaxOnlyPastTheGap) {
  LogitProbe gold, ours;
  gold.full_rows = {0.f, 1.f};
  ours.full_rows = {0.5f, 1.f};
  gold.mean_nll = 2.0, ours.mean_nll = 2.25;
  gold.argmax = {0, 1};
  ours.argmax = {1, 1};
  gold.top8 = {{{0, 1.0f}, {1, 0.99f}}, {{1, 3.f}, {0, 1.f}}};  // position 0 is a near-tie
  const ProbeComparison c = compare_probes(ours, gold, 0.1);
  EXPECT_EQ(c.max_abs, 0.5);
  EXPECT_EQ(c.mean_abs, 0.25);
  EXPECT_EQ(c.mean_nll_diff, 0.25);
  EXPECT_EQ(c.argmax_compared, 1);
  EXPECT_EQ(c.argmax_agreement, 1.0);
  EXPECT_EQ(c.n_nonfinite, 0u);
}
