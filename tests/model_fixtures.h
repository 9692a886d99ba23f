// Helpers shared by the model tests: the fixture models found through the goldens'
// JSONs (no tokenizer, no hard-coded shapes or lengths), evaluation, bit comparison, and
// the generic exactness checks every architecture must pass.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/eval.h"
#include "engine/logit_report.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace ws::test {

inline const std::filesystem::path kShared = WS_SHARED_DIR;

struct GoldenFixture {
  std::string golden;  // path of the golden JSON
  std::string model;   // path of its model file
  std::string arch;    // general.architecture
  bool f32 = false;    // every tensor stored as F32
};

// Every llama-golden-v1 JSON with its model, in name order. Scanned once per process:
// every test binary start lists the parameterised suites, and opening each GGUF (its
// vocabulary included) on every call cost ~1.5 s per test process.
inline std::vector<GoldenFixture> scan_golden_fixtures() {
  std::vector<GoldenFixture> out;
  for (const auto& e : std::filesystem::directory_iterator(kShared / "fixtures" / "golden")) {
    if (e.path().extension() != ".json") continue;
    const auto h = read_golden_header(e.path().string());
    if (h.count("format") == 0 || h.at("format") != "llama-golden-v1") continue;
    const std::string model = (kShared / h.at("model_file")).string();
    const auto f = gguf::File::open(model);
    bool f32 = true;
    for (const auto& t : f.tensors()) f32 = f32 && t.type == DType::f32;
    out.push_back({e.path().string(), model, f.get_string("general.architecture"), f32});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.golden < b.golden; });
  return out;
}

inline const std::vector<GoldenFixture>& golden_fixtures() {
  static const std::vector<GoldenFixture> fixtures = scan_golden_fixtures();
  return fixtures;
}

// The first F32 fixture of `arch`, or an empty golden path when there is none.
inline GoldenFixture f32_fixture(const std::string& arch) {
  for (const auto& g : golden_fixtures())
    if (g.arch == arch && g.f32) return g;
  return {};
}

// The first F32 golden fixture's model of each architecture, by model file name.
inline std::vector<std::string> one_f32_model_per_arch() {
  std::map<std::string, std::string> by_arch;
  for (const auto& g : golden_fixtures())
    if (g.f32 && (!by_arch.count(g.arch) || g.model < by_arch[g.arch])) by_arch[g.arch] = g.model;
  std::vector<std::string> out;
  for (auto& [a, p] : by_arch) out.push_back(p);
  return out;
}

// The longest probe of a golden file: the most positions to compare.
inline std::vector<Token> longest_probe(const std::string& golden) {
  std::vector<Token> best;
  for (const auto& p : read_golden(golden))
    if (p.tokens.size() > best.size()) best = p.tokens;
  return best;
}

// A file stem as a test-name suffix.
inline std::string param_name(const std::string& path) {
  std::string s = std::filesystem::path(path).stem().string();
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// Logits [tokens.size()][n_vocab] of `tokens` appended to `state`.
inline std::vector<float> eval_all(const Model& m, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                                   ThreadPool& pool) {
  std::vector<float> logits;  // [n][n_vocab] f32
  eval_tokens(m, state, tokens, n_ubatch, LogitsMode::all, logits, pool);
  return logits;
}

// Bit-identity of n floats; on failure says where and how far apart.
inline ::testing::AssertionResult same_bits(const float* a, const float* b, size_t n) {
  if (std::memcmp(a, b, n * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!(d <= worst)) worst = d, at = i;
  }
  return ::testing::AssertionFailure() << "not bit-identical, max |diff| " << worst << " at element " << at;
}

// Logits do not depend on the micro-batch split, and LogitsMode::last is the last row.
inline void expect_batch_split_invariant(const Model& m, const std::vector<Token>& tokens, const MemoryOptions& mem,
                                         ThreadPool& pool) {
  SeqState s = m.make_state(mem);
  const auto ref = eval_all(m, s, tokens, 512, pool);
  for (int32_t ub : {1, 7, 32}) {
    SeqState other = m.make_state(mem);
    const auto logits = eval_all(m, other, tokens, ub, pool);
    ASSERT_EQ(logits.size(), ref.size());
    EXPECT_TRUE(same_bits(ref.data(), logits.data(), ref.size())) << "n_ubatch " << ub << " vs 512";
  }
  const size_t nv = size_t(m.config().n_vocab);
  SeqState last_state = m.make_state(mem);
  std::vector<float> last;  // [n_vocab] f32
  eval_tokens(m, last_state, tokens, 32, LogitsMode::last, last, pool);
  ASSERT_EQ(last.size(), nv);
  EXPECT_TRUE(same_bits(last.data(), ref.data() + (tokens.size() - 1) * nv, nv)) << "LogitsMode::last";
}

// Split at K, snapshot, disturb, restore (in place and into a fresh state), fork: every
// continuation reproduces the straight run bit for bit.
inline void expect_snapshot_restore_fork_exact(const Model& m, const std::vector<Token>& tokens,
                                               const MemoryOptions& mem, ThreadPool& pool) {
  SeqState straight = m.make_state(mem);
  const auto ref = eval_all(m, straight, tokens, 32, pool);
  const size_t n = tokens.size(), nv = size_t(m.config().n_vocab);
  const std::span<const Token> all(tokens);
  for (size_t k : {size_t(5), size_t(mem.kv_page_size), n / 2, n - 3}) {
    SCOPED_TRACE("K = " + std::to_string(k));
    const size_t rest = (n - k) * nv;
    SeqState live = m.make_state(mem);
    eval_all(m, live, all.first(k), 32, pool);
    const Snapshot snap = live.snapshot();
    SeqState fork = live.fork();
    // Disturb the origin with other tokens, then come back through the snapshot.
    eval_all(m, live, std::vector<Token>(16, tokens[0]), 32, pool);
    live.restore(snap);
    EXPECT_TRUE(same_bits(eval_all(m, live, all.subspan(k), 32, pool).data(), ref.data() + k * nv, rest)) << "restore";
    // The fork was taken before the disturbance and must not have seen it.
    EXPECT_TRUE(same_bits(eval_all(m, fork, all.subspan(k), 32, pool).data(), ref.data() + k * nv, rest)) << "fork";
    // A fresh state restored from the same snapshot (the origin is gone).
    SeqState fresh = m.make_state(mem);
    fresh.restore(snap);
    EXPECT_TRUE(same_bits(eval_all(m, fresh, all.subspan(k), 32, pool).data(), ref.data() + k * nv, rest))
        << "fresh restore";
  }
}

}  // namespace ws::test
