// Logit reports, in one place so every figure is computed one way: the row statistics
// (log-sum-exp, next-token NLL, top-k, differences) used by `warmstart logits`, by
// `warmstart replay --verify` (engine/replay.cpp) and by the vision report
// (engine/vision_report.cpp); and the `llama-golden-v1` report (shared/fixtures/README.md
// section 4): per-token NLL, argmax, top-8 and full rows at fixed positions, written by
// `warmstart logits` and read by the tests to compare with llama.cpp's goldens.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace ws {

// log(sum(exp(row))) in double, shifted by the row's maximum.
double log_sum_exp(std::span<const float> row);

// The natural-log NLL of token `next` under `row`: log_sum_exp(row) - row[next].
double token_nll(std::span<const float> row, Token next);

// Ids of the k largest entries (k clamped to the row), logit descending, ties to the lower id.
std::vector<int32_t> top_k_ids(std::span<const float> row, int32_t k);

// Mean next-token NLL of rows [n][n_vocab], where next[i] is the token row i predicts; rows
// with next[i] < 0 (nothing follows, or an image position) are skipped. 0 when none count.
double mean_nll(std::span<const float> rows, size_t n_vocab, std::span<const Token> next);

// max |a[i] - b[i]|, the difference taken in float (as replay has always reported it);
// infinity when the sizes differ.
double max_abs_diff(std::span<const float> a, std::span<const float> b);

struct LogitProbe {
  std::string name;
  std::vector<Token> tokens;                // [n]
  std::vector<double> nll;                  // [n-1] next-token NLL (natural log)
  double mean_nll = 0;
  std::vector<Token> argmax;                // [n]
  std::vector<std::vector<std::pair<Token, float>>> top8;  // [n][8] (id, logit), logit descending
  std::vector<int32_t> full_positions;      // positions whose full rows are kept
  std::vector<float> full_rows;             // [full_positions.size()][n_vocab] f32
  int32_t n_vocab = 0;
  int32_t n_ubatch = 0;                     // settings.n_ubatch when known
};

// Builds a probe from logits [tokens.size()][n_vocab]; full rows at 0, 1, 7, 31, 63, 127
// and n-1 (those < n).
LogitProbe make_probe(const std::string& name, const std::vector<Token>& tokens, const std::vector<float>& logits,
                      int32_t n_vocab, int32_t n_ubatch);

// Writes PREFIX.json + PREFIX.logits.f32 (one probe).
void write_golden(const std::string& prefix, const LogitProbe& probe, const std::string& model_file);

// The top-level string fields of a golden JSON that come before its probes ("format",
// "model_file", ...), read without parsing the (large) rest: test discovery runs in every
// test process.
std::map<std::string, std::string> read_golden_header(const std::string& json_path);

// Reads every probe of a golden JSON (and its logits file).
std::vector<LogitProbe> read_golden(const std::string& json_path);

// Our probe against a golden's (the callers check that the full rows' positions match):
// full-row differences (in double), |mean NLL difference| and
// argmax agreement over positions whose golden top-1/top-2 gap exceeds `gap_tolerance` (a
// near-tie may flip on rounding alone).
struct ProbeComparison {
  double max_abs = 0, mean_abs = 0, mean_nll_diff = 0, argmax_agreement = 0;
  int argmax_compared = 0;
  size_t n_nonfinite = 0;  // non-finite values among our compared full rows
};
ProbeComparison compare_probes(const LogitProbe& ours, const LogitProbe& gold, double gap_tolerance);

}  // namespace ws
