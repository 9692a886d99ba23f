// Token sampling: logit bias, repeat/frequency/presence penalties, top-k, top-p, min-p,
// temperature, seeded draw. The chain order follows llama.cpp's default (logit bias ->
// penalties -> top-k -> top-p -> min-p -> temperature -> dist) so that the same settings
// mean the same thing to users of both.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace ws {

// Which tokens may come next (a grammar, a forced tool call): one per generation, owned by
// its Sampler. The sampler asks about the token it drew first and masks the whole
// vocabulary only when that token is refused, as llama.cpp's sampler does.
class TokenFilter {
 public:
  virtual ~TokenFilter() = default;
  virtual bool allows(int32_t token) = 0;
  // mask[n_vocab] u8: 1 where the token is allowed.
  virtual void allowed(std::vector<uint8_t>& mask) = 0;
  // Advances past a token the filter allowed.
  virtual void accept(int32_t token) = 0;
};

// Immutable and shared by requests; start() makes the per-generation state.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::unique_ptr<TokenFilter> start() const = 0;
};

struct SamplingParams {
  float temperature = 0.8f;    // <= 0: greedy (argmax, ties to the lower id)
  int32_t top_k = 40;          // 0: off
  float top_p = 0.95f;         // 1: off
  float min_p = 0.05f;         // 0: off
  float repeat_penalty = 1.0f; // 1: off
  int32_t repeat_last_n = 64;  // window of accepted tokens the penalties look at; 0: off
  // OpenAI's penalties, applied as llama.cpp does over the same window: a token seen c times
  // there loses c * frequency_penalty + (c > 0) * presence_penalty from its logit.
  float presence_penalty = 0.0f;   // 0: off
  float frequency_penalty = 0.0f;  // 0: off
  // (token id, bias) added to the raw logits before everything else; -inf bans the token.
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;
  std::shared_ptr<const TokenConstraint> constraint;  // null: unconstrained (costs nothing)
};

// One token's log-probability under the model's raw logits (log-softmax, before bias,
// penalties, filters and temperature: what OpenAI's and llama-server's logprobs report).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;  // -inf for a token with logit -inf
};
struct LogprobReport {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the top_n most likely tokens, most likely first (ties: lower id)
};
// NaN logits count as -inf; +inf logits share the whole mass.
LogprobReport logprobs_of(std::span<const float> logits, int32_t token, int32_t top_n);

// xoshiro256** seeded through splitmix64. Written out here (instead of <random>) because
// the standard distributions are not specified bit-for-bit, and a seed must reproduce the
// same text on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  // Uniform double in [0, 1) with 53 random bits.
  double uniform();
  // One step of splitmix64 on `state` (advances it); exposed for tests of the seeding.
  static uint64_t splitmix64(uint64_t& state);

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  // Throws std::invalid_argument naming the bad field (e.g. top_p outside (0, 1]).
  explicit Sampler(const SamplingParams& params);

  // Picks a token from logits[n_vocab]. NaN and -inf logits are never picked; +inf logits
  // win over every finite one. Throws std::invalid_argument when no logit is pickable.
  int32_t sample(std::span<const float> logits);
  // Records a token (prompt or generated) for the repetition penalty.
  void accept(int32_t token);
  // Forgets the history and restarts the random stream from the seed.
  void reset();

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  void build_candidates(std::span<const float> logits);
  void apply_logit_bias();
  void apply_penalties();
  void apply_top_k();
  void apply_top_p();
  void apply_min_p();
  int32_t draw();
  int32_t sample_filtered(std::span<const float> logits);

  SamplingParams params_;
  Rng rng_;
  std::vector<std::pair<int32_t, float>> bias_;  // params_.logit_bias sorted by id, repeats summed
  std::vector<int32_t> history_;  // ring buffer of the last repeat_last_n accepted tokens
  size_t history_next_ = 0;
  std::vector<Candidate> cands_;  // scratch, reused between calls
  bool sorted_ = false;           // cands_ sorted by (logit desc, id asc)
  std::unique_ptr<TokenFilter> filter_;  // from params_.constraint; null when unconstrained
  bool in_chain_ = false;                // sample_filtered is running the chain
  bool mask_pass_ = false;               // ... with the filter's mask applied to the candidates
  std::vector<uint8_t> mask_;            // [n_vocab] scratch for the filter's mask
};

}  // namespace ws
