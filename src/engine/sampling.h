// Token sampling: repetition penalty, top-k, top-p, min-p, temperature, seeded draw.
// The chain order follows llama.cpp's default (penalties -> top-k -> top-p -> min-p ->
// temperature -> dist) so that the same settings mean the same thing to users of both.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ws {

struct SamplingParams {
  float temperature = 0.8f;    // <= 0: greedy (argmax, ties to the lower id)
  int32_t top_k = 40;          // 0: off
  float top_p = 0.95f;         // 1: off
  float min_p = 0.05f;         // 0: off
  float repeat_penalty = 1.0f; // 1: off
  int32_t repeat_last_n = 64;  // window of accepted tokens the penalty looks at; 0: off
  uint64_t seed = 0;
};

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
  void apply_penalties();
  void apply_top_k();
  void apply_top_p();
  void apply_min_p();
  int32_t draw();

  SamplingParams params_;
  Rng rng_;
  std::vector<int32_t> history_;  // ring buffer of the last repeat_last_n accepted tokens
  size_t history_next_ = 0;
  std::vector<Candidate> cands_;  // scratch, reused between calls
  bool sorted_ = false;           // cands_ sorted by (logit desc, id asc)
};

}  // namespace ws
