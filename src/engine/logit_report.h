// The `llama-golden-v1` logits report (see shared/fixtures/README.md section 4): per-token
// NLL, argmax, top-8 and full rows at fixed positions. Written by `warmstart logits`,
// read by the tests to compare with llama.cpp's goldens.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace ws {

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

}  // namespace ws
