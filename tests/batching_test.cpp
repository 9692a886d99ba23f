// Continuous batching is exact (issue 22): on every fixture architecture, each sequence's
// logits out of Model::forward_many, and each conversation's tokens and logits through a
// StepLoop shared by 4 and 8 concurrent Engines (greedy and seeded sampling, prompts split
// across steps and interleaved with other streams' decoding), are bit-identical to the
// same sequence or request evaluated alone; so are input-embedding rows (causal and
// non-causal) and M-RoPE positions sharing passes with text. A refused sequence changes
// nothing, its own state included; the loop's step statistics describe the steps it ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <latch>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/prefix_cache.h"
#include "engine/step_loop.h"
#include "engine/turn.h"
#include "model_fixtures.h"
#include "not_supported.h"
#include "tokenizer/tokenizer.h"

using namespace ws;
using namespace ws::test;

namespace {

// One fixture per architecture: its first F32 one, else its first.
std::vector<GoldenFixture> one_per_arch() {
  std::map<std::string, GoldenFixture> by_arch;
  for (const auto& g : golden_fixtures()) {
    if (by_arch.count(g.arch)) continue;
    const GoldenFixture f32 = f32_fixture(g.arch);
    by_arch[g.arch] = f32.golden.empty() ? g : f32;
  }
  std::vector<GoldenFixture> out;
  for (auto& [arch, g] : by_arch) out.push_back(g);
  return out;
}

// K different token sequences of different lengths cut from the probe: sequence i is the
// probe rotated by its own offset, `prompt` rows fed in chunks, then `decode` rows fed one
// at a time (teacher-forced: the model level needs no sampling).
struct SeqPlan {
  std::vector<Token> tokens;
  int64_t prompt = 0;
};
std::vector<SeqPlan> make_plans(const std::vector<Token>& probe, int k) {
  const size_t n = probe.size();
  std::vector<SeqPlan> out;
  for (int i = 0; i < k; ++i) {
    const size_t prompt = std::min(n - 8, size_t(6 + (i * 13) % 41 + (i % 2 ? 17 : 0)));
    const size_t total = prompt + size_t(3 + i % 4);
    SeqPlan p;
    p.prompt = int64_t(prompt);
    for (size_t j = 0; j < total; ++j) p.tokens.push_back(probe[(size_t(i) * 61 + 3 + j) % n]);
    out.push_back(std::move(p));
  }
  return out;
}

// K chat requests: prompts of different lengths (some longer than a micro-batch), 8-16
// new tokens, greedy for even i, seeded sampling for odd i (one with penalties).
std::vector<TurnRequest> make_requests(const std::vector<Token>& probe, int k) {
  const size_t n = probe.size();
  std::vector<TurnRequest> out;
  for (int i = 0; i < k; ++i) {
    TurnRequest r;
    const size_t len = std::min(n - 1, size_t(9 + (i * 19) % 57));
    for (size_t j = 0; j < len; ++j) r.prompt.push_back(probe[(size_t(i) * 47 + 5 + j) % n]);
    r.max_tokens = 8 + (i * 5) % 9;
    r.record_logits = true;
    if (i % 2 == 0) {
      r.sampling.temperature = 0.0f;
    } else {
      r.sampling.temperature = 0.9f + 0.1f * float(i % 3);
      r.sampling.seed = 1234 + uint64_t(i);
      if (i % 4 == 3) r.sampling.repeat_penalty = 1.1f, r.sampling.top_k = 0;
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Wraps a model and records what each pass evaluated (the loop thread is its only caller).
class PassSpy final : public Model {
 public:
  explicit PassSpy(const Model& m) : m_(m) {}
  const ModelConfig& config() const override { return m_.config(); }
  SeqState make_state(const MemoryOptions& opts) const override { return m_.make_state(opts); }
  void forward_many(std::span<SeqStep> steps, ThreadPool& pool) const override {
    std::vector<int64_t> rows;
    for (const SeqStep& s : steps) rows.push_back(s.batch.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      passes_.push_back(std::move(rows));
    }
    m_.forward_many(steps, pool);
  }
  std::vector<std::vector<int64_t>> passes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return passes_;
  }

 private:
  const Model& m_;
  mutable std::mutex mu_;
  mutable std::vector<std::vector<int64_t>> passes_;  // [pass][sequence] rows
};

class Batching : public ::testing::TestWithParam<GoldenFixture> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(GetParam().model));
    if (const auto* u = needs_unsupported(*file_)) GTEST_SKIP() << not_supported_message(*u, file_->path());
    model_ = load_model(*file_);
    tok_ = Tokenizer::from_gguf(*file_);
    probe_ = longest_probe(GetParam().golden);
    ASSERT_GE(probe_.size(), size_t(80));
    nv_ = size_t(model_->config().n_vocab);
    eo_.memory.n_ctx = 512;
    eo_.n_ubatch = 32;
  }

  // Logits of every row of `tokens` (mode all, or hidden) evaluated alone on a fresh state.
  std::vector<float> alone(const std::vector<Token>& tokens, LogitsMode mode, const MemoryOptions& mem) {
    SeqState s = model_->make_state(mem);
    const size_t width = mode == LogitsMode::hidden ? size_t(model_->config().n_embd) : nv_;
    std::vector<float> out(tokens.size() * width);
    model_->forward(tokens, s, mode, out.data(), pool_);
    return out;
  }

  void forward_many_matches_alone(int k);
  void step_loop_matches_alone(int k, int32_t step_tokens);

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<Token> probe_;
  size_t nv_ = 0;
  EngineOptions eo_;
  ThreadPool pool_{2};
};

// K sequences with staggered starts: each pass mixes prompt chunks of varying sizes with
// single-row decode steps of others, in varying order, asking for all / last / no logits
// or hidden states; every row written must equal the alone run's.
void Batching::forward_many_matches_alone(int k) {
  const auto plans = make_plans(probe_, k);
  const size_t d = size_t(model_->config().n_embd);
  MemoryOptions mem;
  mem.n_ctx = 256;
  std::vector<std::vector<float>> ref, ref_hidden;  // [k][rows][n_vocab], [k][rows][n_embd]
  for (const auto& p : plans) {
    ref.push_back(alone(p.tokens, LogitsMode::all, mem));
    ref_hidden.push_back(alone(p.tokens, LogitsMode::hidden, mem));
  }
  std::vector<SeqState> states;
  for (int i = 0; i < k; ++i) states.push_back(model_->make_state(mem));
  std::vector<int64_t> done(size_t(k), 0);
  std::vector<std::vector<float>> out(static_cast<size_t>(k));  // this pass's output of each sequence
  int mixed_passes = 0, checked_rows = 0;
  for (int t = 0;; ++t) {
    std::vector<SeqStep> steps;
    std::vector<int> who;  // [steps] sequence
    for (int i = 0; i < k; ++i) {
      const auto& p = plans[size_t(i)];
      const int64_t at = done[size_t(i)], total = int64_t(p.tokens.size());
      if (t < i || at == total) continue;  // sequence i starts at pass i
      const int64_t rows = at < p.prompt ? std::min<int64_t>(p.prompt - at, 1 + (t * 5 + i * 3) % 11) : 1;
      const LogitsMode modes[] = {LogitsMode::all, LogitsMode::last, LogitsMode::all, LogitsMode::none,
                                  LogitsMode::hidden};
      const LogitsMode mode = modes[(t + i) % 5];
      auto& o = out[size_t(i)];
      o.assign(size_t(rows) * (mode == LogitsMode::hidden ? d : nv_), -1.0f);
      SeqStep st;
      st.batch = Batch{std::span(p.tokens).subspan(size_t(at), size_t(rows))};
      st.state = &states[size_t(i)];
      st.mode = mode;
      st.logits = o.data();
      steps.push_back(st);
      who.push_back(i);
    }
    if (steps.empty()) break;
    if (t % 2) {  // the order of sequences in a pass does not matter either
      std::reverse(steps.begin(), steps.end());
      std::reverse(who.begin(), who.end());
    }
    bool has_decode = false, has_prompt = false;
    for (const auto& s : steps) (s.batch.size() == 1 ? has_decode : has_prompt) = true;
    mixed_passes += steps.size() > 1 && has_decode && has_prompt;
    model_->forward_many(steps, pool_);
    for (size_t j = 0; j < steps.size(); ++j) {
      const int i = who[j];
      const SeqStep& s = steps[j];
      const int64_t at = done[size_t(i)], rows = s.batch.size();
      SCOPED_TRACE("pass " + std::to_string(t) + ", sequence " + std::to_string(i) + ", rows " +
                   std::to_string(at) + ".." + std::to_string(at + rows));
      ASSERT_FALSE(s.error);
      ASSERT_EQ(states[size_t(i)].position(), at + rows);
      const float* r = ref[size_t(i)].data();
      if (s.mode == LogitsMode::all) {
        EXPECT_TRUE(same_bits(s.logits, r + size_t(at) * nv_, size_t(rows) * nv_)) << "all";
      } else if (s.mode == LogitsMode::last) {
        EXPECT_TRUE(same_bits(s.logits, r + size_t(at + rows - 1) * nv_, nv_)) << "last";
      } else if (s.mode == LogitsMode::hidden) {
        EXPECT_TRUE(same_bits(s.logits, ref_hidden[size_t(i)].data() + size_t(at) * d, size_t(rows) * d)) << "hidden";
      }
      checked_rows += s.mode != LogitsMode::none;
      done[size_t(i)] += rows;
    }
  }
  EXPECT_GT(mixed_passes, 0) << "no pass mixed prompt chunks with decode rows";
  EXPECT_GT(checked_rows, k);
}

TEST_P(Batching, ForwardManyMatchesAloneK4) { forward_many_matches_alone(4); }
TEST_P(Batching, ForwardManyMatchesAloneK8) { forward_many_matches_alone(8); }

// A refused sequence (a token id outside the vocabulary, negative or too large; a batch
// past its context) gets its error, keeps its state (position and content: it carries on
// exactly afterwards), and the others in the same pass are unaffected.
TEST_P(Batching, RefusedSequenceChangesNothing) {
  const auto plans = make_plans(probe_, 4);
  std::vector<MemoryOptions> mem(4);
  for (int i = 0; i < 4; ++i) mem[size_t(i)].n_ctx = 256;
  mem[3].n_ctx = int32_t(plans[3].tokens.size());  // room for exactly its tokens
  std::vector<std::vector<float>> ref;
  std::vector<SeqState> states;
  for (int i = 0; i < 4; ++i) {
    ref.push_back(alone(plans[size_t(i)].tokens, LogitsMode::all, mem[size_t(i)]));
    states.push_back(model_->make_state(mem[size_t(i)]));
  }
  std::vector<int64_t> done(4, 0);
  std::vector<std::vector<float>> out(4);
  // A pass of the next `rows[i]` tokens of each sequence (0: left out), with `bad` inputs.
  auto pass = [&](std::vector<int64_t> rows, const std::map<int, std::vector<Token>>& bad) {
    std::vector<SeqStep> steps;
    std::vector<int> who;
    for (int i = 0; i < 4; ++i) {
      if (rows[size_t(i)] == 0 && !bad.count(i)) continue;
      SeqStep st;
      st.batch = bad.count(i) ? Batch{bad.at(i)}
                              : Batch{std::span(plans[size_t(i)].tokens).subspan(size_t(done[size_t(i)]),
                                                                                 size_t(rows[size_t(i)]))};
      out[size_t(i)].assign(size_t(st.batch.size()) * nv_, -1.0f);
      st.state = &states[size_t(i)];
      st.mode = LogitsMode::all;
      st.logits = out[size_t(i)].data();
      steps.push_back(st);
      who.push_back(i);
    }
    model_->forward_many(steps, pool_);
    for (size_t j = 0; j < steps.size(); ++j) {
      const int i = who[j];
      SCOPED_TRACE("sequence " + std::to_string(i));
      if (bad.count(i)) {
        EXPECT_TRUE(steps[j].error) << "a refused input must set the error";
        EXPECT_EQ(states[size_t(i)].position(), done[size_t(i)]) << "a refused input must not move the state";
        continue;
      }
      ASSERT_FALSE(steps[j].error);
      const int64_t n = steps[j].batch.size();
      EXPECT_TRUE(same_bits(out[size_t(i)].data(), ref[size_t(i)].data() + size_t(done[size_t(i)]) * nv_,
                            size_t(n) * nv_));
      done[size_t(i)] += n;
      EXPECT_EQ(states[size_t(i)].position(), done[size_t(i)]);
    }
  };
  pass({5, 3, 4, 6}, {});
  const Token a = plans[1].tokens[size_t(done[1])];
  const Token oov = Token(nv_);
  std::vector<Token> too_long(plans[3].tokens.begin() + done[3], plans[3].tokens.end());
  too_long.push_back(plans[3].tokens[0]);  // one row past its context
  pass({2, 0, 1, 0}, {{1, {a, oov, a}}, {3, too_long}});
  pass({1, 0, 3, 0}, {{1, {-1}}});
  // Every sequence refused: nothing runs, nothing moves.
  pass({0, 0, 0, 0}, {{0, {oov}}, {2, {a, Token(-7)}}});
  // The refused states carry on exactly, to the end of every sequence.
  pass({int64_t(plans[0].tokens.size()) - done[0], int64_t(plans[1].tokens.size()) - done[1],
        int64_t(plans[2].tokens.size()) - done[2], int64_t(plans[3].tokens.size()) - done[3]},
       {});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(done[size_t(i)], int64_t(plans[size_t(i)].tokens.size()));
  // Two steps on one state are a caller's bug, refused before anything runs.
  std::vector<float> l1(nv_), l2(nv_);
  SeqState s = model_->make_state(mem[0]);
  const Token one[1] = {plans[0].tokens[0]};
  SeqStep twice[2] = {{Batch{one}, &s, LogitsMode::last, l1.data(), nullptr},
                      {Batch{one}, &s, LogitsMode::last, l2.data(), nullptr}};
  EXPECT_THROW(model_->forward_many(twice, pool_), std::logic_error);
  EXPECT_EQ(s.position(), 0);
}

// K engines on their own threads share one StepLoop (one pool of 2 threads; steps of
// `step_tokens` rows split the prompts and interleave them with the others' decoding).
// Each turn's tokens, stop reason and recorded logits equal the same request run alone on
// the plain model.
void Batching::step_loop_matches_alone(int k, int32_t step_tokens) {
  const auto reqs = make_requests(probe_, k);
  std::vector<TurnResult> ref;
  {
    Engine engine(*model_, *tok_, nullptr, eo_, pool_);
    for (const auto& r : reqs) ref.push_back(engine.run_turn(r));
  }
  ThreadPool loop_pool(2);
  PassSpy spy(*model_);
  std::vector<TurnResult> got(static_cast<size_t>(k));
  std::vector<std::string> errors(static_cast<size_t>(k));
  StepStats stats;
  {
    StepLoop loop(spy, loop_pool, StepLoopOptions{.step_tokens = step_tokens});
    std::latch start(k);
    std::vector<std::thread> threads;
    for (int i = 0; i < k; ++i)
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          Engine engine(loop, *tok_, nullptr, eo_, loop_pool);
          got[size_t(i)] = engine.run_turn(reqs[size_t(i)]);
        } catch (const std::exception& e) {
          errors[size_t(i)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    stats = loop.stats();
  }
  int64_t fed = 0;  // rows the engines asked for
  size_t generated = 0;
  for (int i = 0; i < k; ++i) {
    SCOPED_TRACE("conversation " + std::to_string(i) + (reqs[size_t(i)].sampling.temperature > 0 ? " (seeded)" : " (greedy)"));
    ASSERT_EQ(errors[size_t(i)], "");
    const TurnResult &a = got[size_t(i)], &b = ref[size_t(i)];
    generated += b.generated.size();
    EXPECT_EQ(a.generated, b.generated);
    EXPECT_EQ(a.stop_reason, b.stop_reason);
    EXPECT_EQ(a.computed, b.computed);
    ASSERT_EQ(a.logits.size(), b.logits.size());
    EXPECT_TRUE(same_bits(a.logits.data(), b.logits.data(), a.logits.size()));
    fed += a.computed;
  }
  EXPECT_GT(generated, size_t(0));
  // The loop ran the rows asked for, in steps of at most step_tokens prompt rows, and the
  // streams shared steps.
  const auto passes = spy.passes();
  int64_t rows_sum = 0, decode = 0;
  size_t most_sequences = 0;
  for (const auto& p : passes) {
    int64_t rows = 0, singles = 0;
    for (int64_t r : p) {
      rows += r, singles += r == 1;
      EXPECT_LE(r, step_tokens) << "a prompt piece larger than a step";
    }
    // Prompt rows keep a quarter of the step beside any number of decode rows.
    EXPECT_LE(rows, std::max<int64_t>(step_tokens, singles + (step_tokens + 3) / 4)) << "a step over its budget";
    rows_sum += rows, decode += singles;
    most_sequences = std::max(most_sequences, p.size());
  }
  EXPECT_EQ(rows_sum, fed);
  EXPECT_GT(most_sequences, size_t(1)) << "no step evaluated more than one sequence";
  EXPECT_EQ(stats.steps, passes.size());
  EXPECT_EQ(stats.rows_sum, uint64_t(rows_sum));
  EXPECT_EQ(stats.decode_rows, uint64_t(decode));
  EXPECT_EQ(stats.decode_rows + stats.prompt_rows, stats.rows_sum);
  uint64_t histogram = 0;
  for (uint64_t c : stats.rows_histogram) histogram += c;
  EXPECT_EQ(histogram, stats.steps);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_GT(stats.busy_seconds, 0.0);
}

TEST_P(Batching, StepLoopTurnsMatchAloneK4) { step_loop_matches_alone(4, 7); }
TEST_P(Batching, StepLoopTurnsMatchAloneK8) { step_loop_matches_alone(8, 16); }

// Engines sharing a PrefixCache through the loop, two turns of each conversation: the
// second reuses the first's states, and both turns equal the alone, cold (uncached) runs.
TEST_P(Batching, SharedCacheTwoTurnsMatchAloneCold) {
  constexpr int k = 4;
  const auto first = make_requests(probe_, k);
  auto second_of = [&](int i, const TurnRequest& r1, const TurnResult& t1) {
    TurnRequest r = r1;
    r.prompt.insert(r.prompt.end(), t1.generated.begin(), t1.generated.end());
    for (size_t j = 0; j < size_t(6 + 3 * i); ++j) r.prompt.push_back(probe_[(size_t(i) * 29 + 101 + j) % probe_.size()]);
    r.sampling.seed += 100;
    return r;
  };
  std::vector<TurnResult> ref1, ref2;
  {
    Engine engine(*model_, *tok_, nullptr, eo_, pool_);
    for (int i = 0; i < k; ++i) {
      ref1.push_back(engine.run_turn(first[size_t(i)]));
      ref2.push_back(engine.run_turn(second_of(i, first[size_t(i)], ref1.back())));
    }
  }
  ThreadPool loop_pool(2);
  PrefixCache cache(size_t(64) << 20);
  std::vector<TurnResult> got1(k), got2(k);
  std::vector<std::string> errors(k);
  {
    StepLoop loop(*model_, loop_pool, StepLoopOptions{.step_tokens = 7});
    std::latch start(k);
    std::vector<std::thread> threads;
    for (int i = 0; i < k; ++i)
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          Engine engine(loop, *tok_, &cache, eo_, loop_pool);
          got1[size_t(i)] = engine.run_turn(first[size_t(i)]);
          got2[size_t(i)] = engine.run_turn(second_of(i, first[size_t(i)], got1[size_t(i)]));
        } catch (const std::exception& e) {
          errors[size_t(i)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
  }
  // A turn's recorded logits start at the first computed row; the cold run has them all.
  auto expect_tail = [&](const TurnResult& warm, const TurnResult& cold) {
    EXPECT_EQ(warm.generated, cold.generated);
    EXPECT_EQ(warm.stop_reason, cold.stop_reason);
    const size_t skip = size_t(warm.reused) * nv_;
    ASSERT_EQ(warm.logits.size() + skip, cold.logits.size());
    EXPECT_TRUE(same_bits(warm.logits.data(), cold.logits.data() + skip, warm.logits.size()));
  };
  for (int i = 0; i < k; ++i) {
    SCOPED_TRACE("conversation " + std::to_string(i));
    ASSERT_EQ(errors[size_t(i)], "");
    {
      SCOPED_TRACE("turn 1");
      expect_tail(got1[size_t(i)], ref1[size_t(i)]);
    }
    {
      SCOPED_TRACE("turn 2");
      EXPECT_GE(got2[size_t(i)].reused, int32_t(first[size_t(i)].prompt.size())) << "the second turn must reuse the first";
      expect_tail(got2[size_t(i)], ref2[size_t(i)]);
    }
  }
  EXPECT_GT(cache.stats().hits, 0u);
}

// Through the loop, an input the model would refuse is refused whole before any piece of
// it runs (a prompt split across steps never fails halfway), the state unchanged.
TEST_P(Batching, StepLoopRefusesWholeBatches) {
  ThreadPool loop_pool(2);
  StepLoop loop(*model_, loop_pool, StepLoopOptions{.step_tokens = 4});
  MemoryOptions mem;
  mem.n_ctx = 20;
  SeqState s = loop.make_state(mem);
  std::vector<float> logits(nv_ * 32);
  std::vector<Token> toks(probe_.begin(), probe_.begin() + 12);
  toks[9] = Token(nv_);  // a bad id in the third piece
  EXPECT_ANY_THROW(loop.forward(toks, s, LogitsMode::all, logits.data(), pool_));
  EXPECT_EQ(s.position(), 0);
  std::vector<Token> too_long(probe_.begin(), probe_.begin() + 21);
  EXPECT_ANY_THROW(loop.forward(too_long, s, LogitsMode::all, logits.data(), pool_));
  EXPECT_EQ(s.position(), 0);
  // The state is untouched: the same tokens then give the alone run's logits.
  const std::vector<Token> ok(probe_.begin(), probe_.begin() + 20);
  loop.forward(ok, s, LogitsMode::all, logits.data(), pool_);
  EXPECT_EQ(s.position(), 20);
  const auto ref = alone(ok, LogitsMode::all, mem);
  EXPECT_TRUE(same_bits(logits.data(), ref.data(), ref.size()));
}

// Rows of input embeddings (an image's: causal, and non-causal where the architecture has
// it) and M-RoPE position components (where the model rotates by them) share passes with
// token rows, split at the model level and by the loop's steps: each sequence's logits
// equal the alone run's. An architecture without non-causal batches refuses them alone,
// in a pass of several and through the loop, its state unchanged.
TEST_P(Batching, EmbeddingRowsAndPositionsMatchAlone) {
  const ModelConfig& cfg = model_->config();
  const size_t d = size_t(cfg.n_embd);
  MemoryOptions mem;
  mem.n_ctx = 128;
  auto rows_of = [&](int64_t n, int salt) {  // deterministic input rows of a plausible scale
    std::vector<float> e(size_t(n) * d);
    for (size_t i = 0; i < e.size(); ++i) e[i] = 0.5f * std::sin(0.37f * float(i) + 1.3f * float(salt));
    return e;
  };
  const std::vector<Token> a(probe_.begin() + 10, probe_.begin() + 30);  // tokens, then decode rows
  const std::vector<float> b = rows_of(11, 1);                          // causal embedding rows
  const std::vector<float> c = rows_of(6, 2);                           // one non-causal chunk
  const std::vector<Token> dt(probe_.begin() + 40, probe_.begin() + 53);
  std::vector<int32_t> dpos;  // [13][4]: distinct components, as an image grid has
  for (int32_t i = 0; i < 13; ++i) dpos.insert(dpos.end(), {i, i + i % 3, i + i % 5, 0});
  auto batch_a = [&](int64_t at, int64_t n) { return Batch{std::span(a).subspan(size_t(at), size_t(n))}; };
  auto batch_b = [&](int64_t at, int64_t n) {
    Batch x;
    x.embeddings = b.data() + size_t(at) * d;
    x.n_rows = n;
    return x;
  };
  Batch batch_c;
  batch_c.embeddings = c.data();
  batch_c.n_rows = 6;
  batch_c.non_causal = true;
  auto batch_d = [&](int64_t at, int64_t n) {
    Batch x{std::span(dt).subspan(size_t(at), size_t(n))};
    if (cfg.mrope) x.positions = dpos.data() + 4 * at;
    return x;
  };
  auto alone_batch = [&](const Batch& x, bool& refused) {
    SeqState s = model_->make_state(mem);
    std::vector<float> out(size_t(x.size()) * nv_);
    refused = false;
    try {
      model_->forward(x, s, LogitsMode::all, out.data(), pool_);
    } catch (const std::exception&) {
      refused = true;
      EXPECT_EQ(s.position(), 0);
    }
    return out;
  };
  bool refused = false, c_refused = false;
  const auto ref_a = alone_batch(batch_a(0, 20), refused);
  ASSERT_FALSE(refused);
  const auto ref_b = alone_batch(batch_b(0, 11), refused);
  ASSERT_FALSE(refused);
  const auto ref_c = alone_batch(batch_c, c_refused);
  const auto ref_d = alone_batch(batch_d(0, 13), refused);
  ASSERT_FALSE(refused);
  if (cfg.mrope) {  // the positions matter here: a step that dropped them would be caught
    const auto plain = alone_batch(Batch{dt}, refused);
    EXPECT_FALSE(same_bits(plain.data(), ref_d.data(), plain.size())) << "M-RoPE positions change nothing?";
  }
  std::printf("%s: non-causal batches %s, M-RoPE positions %s\n", cfg.arch.c_str(),
              c_refused ? "refused" : "evaluated", cfg.mrope ? "used" : "not used");

  {  // The model level: three passes mixing them.
    SeqState sa = model_->make_state(mem), sb = model_->make_state(mem), sc = model_->make_state(mem),
             sd = model_->make_state(mem);
    std::vector<float> oa(20 * nv_), ob(11 * nv_), oc(6 * nv_), od(13 * nv_);
    auto step = [&](Batch x, SeqState& s, std::vector<float>& o, int64_t at) {
      return SeqStep{x, &s, LogitsMode::all, o.data() + size_t(at) * nv_, nullptr};
    };
    std::vector<SeqStep> p1 = {step(batch_a(0, 5), sa, oa, 0), step(batch_b(0, 4), sb, ob, 0),
                               step(batch_c, sc, oc, 0), step(batch_d(0, 3), sd, od, 0)};
    model_->forward_many(p1, pool_);
    EXPECT_EQ(bool(p1[2].error), c_refused);
    EXPECT_EQ(sc.position(), c_refused ? 0 : 6);
    for (size_t i : {0, 1, 3}) ASSERT_FALSE(p1[i].error) << i;
    std::vector<SeqStep> p2 = {step(batch_d(3, 10), sd, od, 3), step(batch_a(5, 1), sa, oa, 5),
                               step(batch_b(4, 7), sb, ob, 4)};
    model_->forward_many(p2, pool_);
    for (const auto& s : p2) ASSERT_FALSE(s.error);
    for (int64_t at = 6; at < 20; ++at) {  // a decodes alone to the end
      std::vector<SeqStep> p = {step(batch_a(at, 1), sa, oa, at)};
      model_->forward_many(p, pool_);
      ASSERT_FALSE(p[0].error);
    }
    EXPECT_TRUE(same_bits(oa.data(), ref_a.data(), oa.size())) << "tokens";
    EXPECT_TRUE(same_bits(ob.data(), ref_b.data(), ob.size())) << "embedding rows";
    if (!c_refused) {
      EXPECT_TRUE(same_bits(oc.data(), ref_c.data(), oc.size())) << "non-causal rows";
    }
    EXPECT_TRUE(same_bits(od.data(), ref_d.data(), od.size())) << "tokens with positions";
  }
  {  // Through the loop, steps of 4 rows: a decodes token by token while the others are split.
    ThreadPool loop_pool(2), caller_pool(1);
    StepLoop loop(*model_, loop_pool, StepLoopOptions{.step_tokens = 4});
    std::vector<float> oa(20 * nv_), ob(11 * nv_), oc(6 * nv_), od(13 * nv_);
    std::vector<std::string> errors(4);
    bool c_threw = false;
    int32_t c_position = -1;
    std::latch start(4);
    std::vector<std::thread> threads;
    auto run = [&](int i, auto&& fn) {
      threads.emplace_back([&, i, fn] {
        start.arrive_and_wait();
        try {
          fn();
        } catch (const std::exception& e) {
          errors[size_t(i)] = e.what();
        }
      });
    };
    run(0, [&] {
      SeqState s = loop.make_state(mem);
      loop.forward(batch_a(0, 5), s, LogitsMode::all, oa.data(), caller_pool);
      for (int64_t at = 5; at < 20; ++at)
        loop.forward(batch_a(at, 1), s, LogitsMode::all, oa.data() + size_t(at) * nv_, caller_pool);
    });
    run(1, [&] {
      SeqState s = loop.make_state(mem);
      loop.forward(batch_b(0, 11), s, LogitsMode::all, ob.data(), caller_pool);
    });
    run(2, [&] {
      SeqState s = loop.make_state(mem);
      try {
        loop.forward(batch_c, s, LogitsMode::all, oc.data(), caller_pool);
      } catch (const std::exception&) {
        c_threw = true;
      }
      c_position = s.position();
    });
    run(3, [&] {
      SeqState s = loop.make_state(mem);
      loop.forward(batch_d(0, 13), s, LogitsMode::all, od.data(), caller_pool);
    });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) EXPECT_EQ(e, "");
    EXPECT_EQ(c_threw, c_refused);
    EXPECT_EQ(c_position, c_refused ? 0 : 6);
    EXPECT_TRUE(same_bits(oa.data(), ref_a.data(), oa.size())) << "loop: tokens";
    EXPECT_TRUE(same_bits(ob.data(), ref_b.data(), ob.size())) << "loop: embedding rows";
    if (!c_refused) {
      EXPECT_TRUE(same_bits(oc.data(), ref_c.data(), oc.size())) << "loop: non-causal rows";
    }
    EXPECT_TRUE(same_bits(od.data(), ref_d.data(), od.size())) << "loop: tokens with positions";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Batching, ::testing::ValuesIn(one_per_arch()),
                         [](const auto& info) { return param_name(info.param.model); });

}  // namespace
