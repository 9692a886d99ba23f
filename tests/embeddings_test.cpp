// /v1/embeddings' computation: the hidden state it pools is exactly what the LM head reads
// (checked against the logits with an independent dot product over the head's weights), and
// mean / last pooling with L2 normalisation as llama.cpp defines them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gguf/gguf.h"
#include "model_fixtures.h"
#include "models/model.h"
#include "not_supported.h"
#include "server/embeddings.h"

using namespace ws;
using ws::test::GoldenFixture;
using ws::test::golden_fixtures;
using ws::test::longest_probe;

namespace {

// One f32 fixture per architecture whose logits are the plain LM head of the hidden state
// (no softcap, no logit scale in its metadata).
std::vector<GoldenFixture> plain_head_fixtures() {
  std::map<std::string, GoldenFixture> by_arch;
  for (const auto& g : golden_fixtures()) {
    if (!g.f32 || by_arch.count(g.arch)) continue;
    const auto f = gguf::File::open(g.model);
    bool plain = !test::needs_unsupported(f);
    for (const auto& [key, v] : f.metadata())
      if (key.ends_with("logit_softcapping") || key.ends_with("logit_scale")) plain = false;
    if (plain) by_arch[g.arch] = g;
  }
  std::vector<GoldenFixture> out;
  for (auto& [a, g] : by_arch) out.push_back(g);
  return out;
}

std::vector<float> forward(const Model& m, const MemoryOptions& mem, const std::vector<Token>& tokens, LogitsMode mode,
                           int64_t width, ThreadPool& pool) {
  SeqState s = m.make_state(mem);
  std::vector<float> out(tokens.size() * size_t(width));  // [n][width]
  m.forward(tokens, s, mode, out.data(), pool);
  return out;
}

TEST(Embeddings, HiddenStateIsWhatTheLmHeadReads) {
  ThreadPool pool(2);
  int checked = 0;
  for (const auto& g : plain_head_fixtures()) {
    const auto file = gguf::File::open(g.model);
    const gguf::TensorInfo* head = file.find_tensor("output.weight");
    if (!head) head = file.find_tensor("token_embd.weight");
    ASSERT_NE(head, nullptr);
    ASSERT_EQ(head->type, DType::f32);
    const auto model = load_model(file);
    const int64_t d = model->config().n_embd, nv = model->config().n_vocab;
    ASSERT_EQ(head->ne[0], d);
    std::vector<Token> tokens = longest_probe(g.golden);
    tokens.resize(std::min<size_t>(tokens.size(), 12));
    MemoryOptions mem;
    mem.n_ctx = 64;
    const auto logits = forward(*model, mem, tokens, LogitsMode::all, nv, pool);
    const auto hidden = forward(*model, mem, tokens, LogitsMode::hidden, d, pool);
    const auto* w = reinterpret_cast<const float*>(head->data);  // [n_vocab][n_embd]
    double worst = 0;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (int64_t v = 0; v < nv; ++v) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(w[v * d + i]) * hidden[t * size_t(d) + size_t(i)];
        const double ref = logits[t * size_t(nv) + size_t(v)];
        worst = std::max(worst, std::abs(dot - ref) / (1.0 + std::abs(ref)));
      }
    EXPECT_LT(worst, 1e-4) << g.arch;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(Embeddings, MeanAndLastPoolingAreNormalisedPoolsOfTheHiddenStates) {
  ThreadPool pool(2);
  const auto fixtures = plain_head_fixtures();
  ASSERT_FALSE(fixtures.empty());
  const auto file = gguf::File::open(fixtures.front().model);
  const auto model = load_model(file);
  const int64_t d = model->config().n_embd;
  std::vector<Token> tokens = longest_probe(fixtures.front().golden);
  tokens.resize(std::min<size_t>(tokens.size(), 20));
  MemoryOptions mem;
  mem.n_ctx = 64;
  const auto hidden = forward(*model, mem, tokens, LogitsMode::hidden, d, pool);
  const size_t n = tokens.size();
  for (const auto pooling : {server::Pooling::mean, server::Pooling::last}) {
    std::vector<double> want(size_t(d), 0.0);  // [n_embd]
    for (int64_t i = 0; i < d; ++i) {
      if (pooling == server::Pooling::last) want[size_t(i)] = hidden[(n - 1) * size_t(d) + size_t(i)];
      else
        for (size_t t = 0; t < n; ++t) want[size_t(i)] += hidden[t * size_t(d) + size_t(i)] / double(n);
    }
    double norm = 0;
    for (double v : want) norm += v * v;
    norm = std::sqrt(norm);
    // Micro-batches of 3 and one batch: the same vector.
    const auto got = server::embed_tokens(*model, mem, tokens, pooling, 3, pool);
    const auto whole = server::embed_tokens(*model, mem, tokens, pooling, 512, pool);
    double got_norm = 0;
    for (int64_t i = 0; i < d; ++i) {
      EXPECT_NEAR(got[size_t(i)], want[size_t(i)] / norm, 1e-5);
      EXPECT_NEAR(got[size_t(i)], whole[size_t(i)], 1e-5);
      got_norm += double(got[size_t(i)]) * got[size_t(i)];
    }
    EXPECT_NEAR(got_norm, 1.0, 1e-5);
  }
}

TEST(Embeddings, Base64IsTheFloatsLittleEndianBytes) {
  // 1.0f = 00 00 80 3F, -2.0f = 00 00 00 C0 -> base64 of those 8 bytes (RFC 4648).
  EXPECT_EQ(server::base64_floats(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(server::base64_floats(std::vector<float>{1.0f}), "AACAPw==");
}

}  // namespace
