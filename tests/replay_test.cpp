// Cross-turn reuse scenarios on every supported fixture architecture: append, edit a past
// message, regenerate, reasoning strip, interleaved conversations sharing a system prompt,
// and a budget small enough to evict. Each asserts reuse (> 0 and at least the checkpoint
// that should have been hit: reuse = 0 would be the fallback-to-cold bug), bit-identical
// logits against a cold run with the same micro-batch boundaries, and the budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "chat/chat_prompt.h"
#include "engine/eval.h"
#include "engine/replay.h"
#include "gguf/gguf.h"
#include "model_fixtures.h"
#include "not_supported.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ws;

namespace {

const fs::path kShared = WS_SHARED_DIR;

// The scripts as ChatML, in the shape the engine's Replay takes (text, message ends).
std::pair<std::string, std::vector<size_t>> chatml(const json& messages) {
  chat::RenderedPrompt r = chat::render_chatml(messages, true);
  return {std::move(r.text), std::move(r.message_ends)};
}

const std::string kSystem =
    "You are a careful assistant for a small hardware shop. Answer briefly, quote prices in euros, and never invent "
    "stock levels. Opening hours are nine to six on weekdays and ten to two on Saturdays.";

json msg(const std::string& role, const std::string& content) { return {{"role", role}, {"content", content}}; }
json from_turn(int k) { return {{"role", "assistant"}, {"from_turn", k}}; }
json line(json messages, int max_tokens = 8, const std::string& conv = "default") {
  return {{"messages", std::move(messages)}, {"max_tokens", max_tokens}, {"conversation", conv}};
}

class ReplayScenarios : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(gguf::File::open(GetParam()));
    if (const auto* u = test::needs_unsupported(*file_))
      GTEST_SKIP() << test::not_supported_message(*u, file_->path());
    model_ = load_model(*file_);
    tok_ = Tokenizer::from_gguf(*file_);
  }
  // Runs the lines with a cache of `budget` bytes; every turn verified against cold.
  // spacing > 0: checkpoints of a model with recurrent layers at least that many tokens
  // apart (as a bench-size state's MiBs give), instead of at every boundary. cut_gap: the
  // spacing every model gets (CheckpointPolicy::min_cut_gap; 0 = every boundary).
  std::vector<ReplayTurn> play(const std::vector<json>& lines, size_t budget = size_t(256) << 20,
                               int32_t spacing = 0, int32_t cut_gap = 0) {
    cache_ = std::make_unique<PrefixCache>(budget);
    EngineOptions eo;
    eo.memory.n_ctx = 2048;
    eo.n_ubatch = 64;
    eo.checkpoints.every_n = 128;
    eo.checkpoints.copy_bytes_per_token =
        spacing > 0 ? std::max<size_t>(1, reuse_traits(*model_, eo.memory).fixed_snapshot_bytes / size_t(spacing)) : 0;
    eo.checkpoints.min_cut_gap = cut_gap;
    Engine engine(*model_, *tok_, cache_.get(), eo, pool_);
    Replay replay(engine, *tok_, chatml, /*verify=*/true);
    std::vector<ReplayTurn> out;
    for (const auto& l : lines) {
      out.push_back(replay.run(l));
      const auto& t = out.back();
      EXPECT_EQ(t.max_abs_logit_diff, 0.0) << "turn " << t.turn << ": logits differ from cold (same boundaries)";
      EXPECT_EQ(t.mean_nll_diff, 0.0) << "turn " << t.turn;
      EXPECT_LE(t.max_abs_logit_diff_plain, 0.0) << "turn " << t.turn << ": kernels are batch-invariant";
      EXPECT_LE(cache_->stats().bytes_in_use, budget);
    }
    return out;
  }

  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<PrefixCache> cache_;
  ThreadPool pool_{2};
};

// With spacing, the restore points of edit and regenerate still hold: of two close
// boundaries the later is kept (the end of a reply before the next user message, the
// frontier rather than the user message's end three tokens before it).
void check_append_edit_regenerate_strip(const std::vector<ReplayTurn>& t) {
  EXPECT_EQ(t[0].reused_tokens, 0);
  EXPECT_GE(t[1].reused_tokens, t[0].prompt_tokens - 1) << "append must reuse turn 1's prompt";
  EXPECT_GE(t[2].reused_tokens, t[0].prompt_tokens - 1) << "edit must restore the checkpoint before the edit";
  EXPECT_EQ(t[3].reused_tokens, t[3].prompt_tokens) << "regenerate restores the frontier and its logits";
  EXPECT_EQ(t[3].generated, t[2].generated) << "greedy regenerate gives the same reply";
  EXPECT_GE(t[4].reused_tokens, t[0].prompt_tokens - 1) << "strip must hit the checkpoint before the reply";
  EXPECT_GE(t[5].reused_tokens, t[1].prompt_tokens - 1) << "the first branch is still cached";
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GT(t[i].reused_tokens, 0);
}

std::vector<json> append_edit_regenerate_strip_lines() {
  const json sys = msg("system", kSystem);
  const json u1 = msg("user", "Do you sell M4 stainless steel bolts, and how much is a box of fifty?");
  const json u2 = msg("user", "And the matching nuts? I need about two hundred of them for a fence.");
  const json u2_edited = msg("user", "Actually, what about washers? I need about two hundred of them.");
  return {
      line({sys, u1}),                                                   // 1
      line({sys, u1, from_turn(1), u2}),                                 // 2 append
      line({sys, u1, from_turn(1), u2_edited}),                          // 3 edit the last user message
      line({sys, u1, from_turn(1), u2_edited}),                          // 4 regenerate
      line({sys, u1, msg("assistant", "Yes."), u2}),                     // 5 strip: history differs from turn 1's reply
      line({sys, u1, from_turn(1), u2, from_turn(2), msg("user", "Thanks, that is all.")}),  // 6 back on the first branch
  };
}

TEST_P(ReplayScenarios, AppendEditRegenerateStrip) {
  check_append_edit_regenerate_strip(play(append_edit_regenerate_strip_lines()));
}

TEST_P(ReplayScenarios, SpacedCheckpointsKeepTheRestorePoints) {
  const auto lines = append_edit_regenerate_strip_lines();
  play(lines);
  const uint64_t dense = cache_->stats().checkpoints_stored;
  check_append_edit_regenerate_strip(play(lines, size_t(256) << 20, /*spacing=*/12));
  const uint64_t spaced = cache_->stats().checkpoints_stored;
  if (reuse_traits(*model_, MemoryOptions{}).fixed_snapshot_bytes > 0)
    EXPECT_LT(spaced, dense) << "spacing must drop the boundaries a few tokens before others";
  else
    EXPECT_EQ(spaced, dense) << "full-KV snapshots copy no fixed state: every boundary stays";
}

TEST_P(ReplayScenarios, DefaultCutGapKeepsTheRestorePoints) {
  const auto lines = append_edit_regenerate_strip_lines();
  play(lines);
  const uint64_t dense = cache_->stats().checkpoints_stored;
  check_append_edit_regenerate_strip(play(lines, size_t(256) << 20, 0, CheckpointPolicy{}.min_cut_gap));
  EXPECT_LT(cache_->stats().checkpoints_stored, dense) << "user message ends a header before the frontier are dropped";
}

TEST_P(ReplayScenarios, InterleavedConversationsShareTheSystemPrompt) {
  const json sys = msg("system", kSystem);
  const json a1 = msg("user", "What time do you open on Saturday?");
  const json b1 = msg("user", "Is there parking near the shop for a van?");
  const json c1 = msg("user", "Can I pay with a card at the counter?");
  const auto t = play({
      line({sys, a1}, 8, "a"),
      line({sys, b1}, 8, "b"),
      line({sys, a1, from_turn(1), msg("user", "And on Sunday?")}, 8, "a"),
      line({sys, b1, from_turn(2), msg("user", "How high is the entrance?")}, 8, "b"),
      line({sys, c1}, 8, "c"),
  });
  // The system prompt's rendering ends where "<|im_start|>user" begins: B and C share it.
  const int32_t sys_tokens = int32_t(tok_->encode("<|im_start|>system\n" + kSystem + "<|im_end|>\n", true, true).size());
  EXPECT_GE(t[1].reused_tokens, sys_tokens - 1);
  EXPECT_GE(t[4].reused_tokens, sys_tokens - 1);
  EXPECT_GE(t[2].reused_tokens, t[0].prompt_tokens - 1);
  EXPECT_GE(t[3].reused_tokens, t[1].prompt_tokens - 1);
  // Conversations never see each other's state: each answer equals its cold run (checked
  // in play()) and the same question in a fresh cache gives the same reply.
  const auto alone = play({line({sys, b1}, 8, "b")});
  EXPECT_EQ(alone[0].generated, t[1].generated);
}

// An agent's tool loop: each step appends the model's reply (its tool call, exactly as
// generated) and the tool's result as a role "tool" message; every request after the first
// must reuse at least the previous request's whole prompt.
TEST_P(ReplayScenarios, AgentToolLoopReusesThePreviousPromptEveryStep) {
  std::vector<json> messages = {msg("system", kSystem + " Call a tool at every step."),
                                msg("user", "Find the cheapest M4 bolts in stock and reserve fifty.")};
  std::vector<json> lines;
  for (int step = 1; step <= 10; ++step) {
    lines.push_back(line(messages, 8, "agent"));
    messages.push_back(from_turn(step));
    messages.push_back({{"role", "tool"}, {"tool_call_id", "call" + std::to_string(step)},
                        {"content", json({{"step", step}, {"ok", true}, {"items", step * 3}}).dump()}});
  }
  const auto t = play(lines);
  for (size_t i = 1; i < t.size(); ++i)
    EXPECT_GE(t[i].reused_tokens, t[i - 1].prompt_tokens - 1) << "step " << i + 1;
}

TEST_P(ReplayScenarios, TinyBudgetEvictsAndStaysCorrect) {
  const json sys = msg("system", kSystem);
  std::vector<json> lines;
  json history = {sys};
  for (int turn = 1; turn <= 4; ++turn) {
    history.push_back(msg("user", "Question number " + std::to_string(turn) + ": how many screws fit in a jar?"));
    lines.push_back(line(history));
    history.push_back(from_turn(turn));
  }
  // Measure one turn's checkpoints, then allow about two of them.
  play({lines[0]});
  const size_t one = cache_->stats().bytes_in_use;
  const size_t budget = one * 2 / 3 + 1;
  const auto t = play(lines, budget);
  const CacheStats s = cache_->stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_LE(s.bytes_in_use, budget);
  EXPECT_GT(t.back().reused_tokens, 0) << "recent checkpoints survive eviction";
}

TEST_P(ReplayScenarios, CorruptedCheckpointFallsBackToCold) {
  const json sys = msg("system", kSystem);
  const json u1 = msg("user", "Do you cut keys while I wait?");
  const auto before = play({line({sys, u1}), line({sys, u1})});
  // Same two turns again, corrupting every stored checkpoint between them.
  cache_ = std::make_unique<PrefixCache>(size_t(256) << 20);
  EngineOptions eo;
  eo.memory.n_ctx = 2048;
  eo.n_ubatch = 64;
  Engine engine(*model_, *tok_, cache_.get(), eo, pool_);
  Replay replay(engine, *tok_, chatml, true);
  const auto first = replay.run(line({sys, u1}));
  const PromptTokens p = tokenize_prompt(*tok_, chatml(json::array({sys, u1})).first, {});
  int corrupted = 0;
  for (size_t n = 1; n <= p.tokens.size(); ++n)
    if (auto snap = cache_->find_for_test(model_->config().model_id, std::span(p.tokens).first(n))) {
      for (auto& l : snap->layers)
        if (!l.bytes.empty()) {
          l.bytes[l.bytes.size() / 2] ^= 0x10;
          ++corrupted;
          break;
        }
    }
  ASSERT_GT(corrupted, 0);
  const auto second = replay.run(line({sys, u1}));
  EXPECT_NE(second.miss_reason.find("rejected"), std::string::npos) << second.miss_reason;
  EXPECT_EQ(second.max_abs_logit_diff, 0.0);
  EXPECT_EQ(second.generated, before[1].generated) << "the answer is unchanged";
  EXPECT_GT(cache_->stats().corrupt_rejected, 0u);
}

// The frontier holds the state after the whole prompt and the logits a cold run gives
// there: the same prompt again computes no prompt token, and corrupted logits are refused.
TEST_P(ReplayScenarios, RegenerationComputesNothing) {
  const json sys = msg("system", kSystem);
  const json u1 = msg("user", "Which drill bits do I need for concrete?");
  const auto t = play({line({sys, u1}), line({sys, u1})});
  EXPECT_EQ(t[1].reused_tokens, t[1].prompt_tokens);
  EXPECT_LE(t[1].computed_tokens, int32_t(t[1].generated.size())) << "only the fed reply tokens";
  EXPECT_EQ(t[1].generated, t[0].generated);

  const PromptTokens p = tokenize_prompt(*tok_, chatml(json::array({sys, u1})).first, {});
  const auto frontier = cache_->find_for_test(model_->config().model_id, p.tokens);
  ASSERT_TRUE(frontier);
  SeqState cold = model_->make_state(MemoryOptions{.n_ctx = 2048});
  std::vector<float> last;  // [n_vocab]
  eval_tokens(*model_, cold, p.tokens, 64, LogitsMode::last, last, pool_);
  EXPECT_EQ(frontier->logits, last) << "the stored logits are a cold run's, bit for bit";

  frontier->logits[frontier->logits.size() / 3] += 1.0f;
  EngineOptions eo;
  eo.memory.n_ctx = 2048;
  Engine engine(*model_, *tok_, cache_.get(), eo, pool_);
  Replay replay(engine, *tok_, chatml, true);
  const auto again = replay.run(line({sys, u1}));
  EXPECT_NE(again.miss_reason.find("rejected"), std::string::npos) << again.miss_reason;
  EXPECT_LT(again.reused_tokens, again.prompt_tokens);
  EXPECT_EQ(again.generated, t[0].generated) << "the answer is unchanged";
}

std::string name_of(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = fs::path(info.param).stem().string();
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

using Plan = std::vector<std::pair<int32_t, Boundary>>;
std::vector<int32_t> positions(const Plan& plan) {
  std::vector<int32_t> v;
  for (const auto& [pos, kind] : plan) v.push_back(pos);
  return v;
}

// The whole prompt is reused only from a checkpoint that holds the logits after it; one
// that does not is replaced by one that does, never the other way round.
TEST(PrefixCacheTest, WholePromptHitNeedsTheLogits) {
  auto state = [] {
    std::vector<std::unique_ptr<LayerState>> layers;
    layers.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{4}));
    return SeqState(std::move(layers), 64, 7);
  };
  const SeqState s = state();
  const std::vector<Token> prompt = {5, 6, 7};
  ReuseTraits recurrent;
  recurrent.can_truncate = false;
  PrefixCache cache(size_t(1) << 20);
  cache.put(7, prompt, s.snapshot(), Boundary::reply);
  Hit hit = cache.acquire(7, prompt, recurrent);
  EXPECT_FALSE(hit.snapshot) << "without logits the last token must be computed, and nothing lies before it";
  cache.release(hit);
  const size_t without = cache.stats().bytes_in_use;

  Snapshot with_logits = s.snapshot();
  with_logits.logits = {1.f, 2.f};
  with_logits.checksum = with_logits.compute_checksum();
  cache.put(7, prompt, std::move(with_logits), Boundary::frontier);
  EXPECT_EQ(cache.stats().n_checkpoints, 1u);
  EXPECT_EQ(cache.stats().bytes_in_use, without + 2 * sizeof(float));
  cache.put(7, prompt, s.snapshot(), Boundary::reply);  // keeps the one with logits
  hit = cache.acquire(7, prompt, recurrent);
  ASSERT_TRUE(hit.snapshot);
  EXPECT_EQ(hit.reuse, 3);
  EXPECT_EQ(hit.snapshot->logits, (std::vector<float>{1.f, 2.f}));
  cache.release(hit);
  const std::vector<Token> longer = {5, 6, 7, 8};
  hit = cache.acquire(7, longer, recurrent);
  EXPECT_EQ(hit.reuse, 3) << "a longer prompt restores it and computes from there";
  cache.release(hit);
}

TEST(CheckpointPolicy, SpacingKeepsTheLaterOfCloseBoundaries) {
  CheckpointPolicy p;
  p.every_n = 0;
  const std::vector<int32_t> messages = {10, 12, 50, 90, 93}, media = {20};
  EXPECT_EQ(positions(p.plan(0, 95, messages, media)), (std::vector<int32_t>{10, 12, 20, 50, 90, 93, 95}));
  // 93 is 2 before the frontier, 10 is 2 before 12; 20 is media (kept however close).
  const Plan spaced = p.plan(0, 95, messages, media, 5);
  EXPECT_EQ(positions(spaced), (std::vector<int32_t>{12, 20, 50, 90, 95}));
  EXPECT_EQ(spaced.back().second, Boundary::frontier);
  EXPECT_EQ(positions(p.plan(11, 95, messages, media, 50)), (std::vector<int32_t>{20, 95}));
  // 50 is 10 after the restored point 40 (a checkpoint already): not worth a copy. The
  // frontier stays however close.
  EXPECT_EQ(positions(p.plan(40, 95, messages, media, 20)), (std::vector<int32_t>{95}));
  EXPECT_EQ(positions(p.plan(30, 95, messages, media, 20)), (std::vector<int32_t>{50, 95}));
  EXPECT_EQ(positions(p.plan(92, 95, messages, media, 20)), (std::vector<int32_t>{95}));
  // The gap comes from the bytes every snapshot copies.
  ReuseTraits recurrent;
  recurrent.fixed_snapshot_bytes = size_t(48) << 20;
  EXPECT_EQ(p.min_gap(recurrent), 48);
  // Every model keeps the batch-cut spacing.
  EXPECT_EQ(p.min_gap(ReuseTraits{}), p.min_cut_gap);
  EXPECT_GT(p.min_cut_gap, 3) << "the end of a user message a ChatML header before the frontier is dropped";
  p.copy_bytes_per_token = 0;
  EXPECT_EQ(p.min_gap(recurrent), p.min_cut_gap);
  p.min_cut_gap = 0;
  EXPECT_EQ(p.min_gap(recurrent), 0);
}

TEST(CheckpointPolicy, PeriodicCheckpointsFillOnlyLongGaps) {
  CheckpointPolicy p;
  p.every_n = 100;
  const std::vector<int32_t> messages = {30, 260};
  const auto from = [&](int32_t f) { return positions(p.plan(f, 520, messages, {})); };
  // 300 is 40 after the message end at 260 and 500 is 20 before the frontier: dropped.
  EXPECT_EQ(from(0), (std::vector<int32_t>{30, 100, 200, 260, 400, 520}));
  EXPECT_EQ(from(120), (std::vector<int32_t>{200, 260, 400, 520}));
  EXPECT_EQ(from(180), (std::vector<int32_t>{260, 400, 520}));  // 200 is 20 after the restored point
  p.every_n = 0;
  EXPECT_EQ(from(0), (std::vector<int32_t>{30, 260, 520}));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReplayScenarios, ::testing::ValuesIn(test::one_f32_model_per_arch()), name_of);

}  // namespace
