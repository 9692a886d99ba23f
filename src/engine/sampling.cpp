#include "engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace ws {
namespace {

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Strict total order: higher logit first, lower id on ties, so every step is
// deterministic whatever the sort algorithm does with equal keys.
template <class C>
bool better(const C& a, const C& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("sampling: " + what);
}

}  // namespace

uint64_t Rng::splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed) {
  // splitmix64 spreads any seed (0 included) over the state; xoshiro must not start all-zero,
  // which splitmix64 cannot produce for four consecutive outputs.
  uint64_t st = seed;
  for (auto& s : s_) s = splitmix64(st);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

Sampler::Sampler(const SamplingParams& p) : params_(p), rng_(p.seed) {
  if (p.constraint) filter_ = p.constraint->start();
  check(!std::isnan(p.temperature), "temperature is NaN");
  check(p.top_k >= 0, "top_k must be >= 0 (0 turns it off), got " + std::to_string(p.top_k));
  check(p.top_p >= 0.0f && p.top_p <= 1.0f, "top_p must be in [0, 1] (1 turns it off), got " + std::to_string(p.top_p));
  check(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p must be in [0, 1] (0 turns it off), got " + std::to_string(p.min_p));
  check(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f,
        "repeat_penalty must be a positive number (1 turns it off), got " + std::to_string(p.repeat_penalty));
  check(p.repeat_last_n >= 0, "repeat_last_n must be >= 0 (0 turns it off), got " + std::to_string(p.repeat_last_n));
  check(std::isfinite(p.presence_penalty), "presence_penalty must be a finite number");
  check(std::isfinite(p.frequency_penalty), "frequency_penalty must be a finite number");
  for (const auto& [id, bias] : p.logit_bias) {
    check(id >= 0, "logit_bias token ids must be >= 0, got " + std::to_string(id));
    check(!std::isnan(bias) && !(std::isinf(bias) && bias > 0), "logit_bias values must be numbers or -inf");
    bias_.emplace_back(id, bias);
  }
  std::sort(bias_.begin(), bias_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // The same id twice adds both biases, as two entries of llama.cpp's list do.
  size_t out = 0;
  for (size_t i = 0; i < bias_.size(); ++i) {
    if (out > 0 && bias_[out - 1].first == bias_[i].first) bias_[out - 1].second += bias_[i].second;
    else bias_[out++] = bias_[i];
  }
  bias_.resize(out);
}

void Sampler::reset() {
  history_.clear();
  history_next_ = 0;
  rng_ = Rng(params_.seed);
  if (params_.constraint) filter_ = params_.constraint->start();
}

void Sampler::accept(int32_t token) {
  const size_t cap = size_t(params_.repeat_last_n);
  if (cap == 0) return;
  if (history_.size() < cap) {
    history_.push_back(token);
  } else {
    history_[history_next_] = token;
    history_next_ = (history_next_ + 1) % cap;
  }
}

void Sampler::build_candidates(std::span<const float> logits) {
  check(!logits.empty(), "empty logits");
  cands_.clear();
  sorted_ = false;
  bool any_pos_inf = false;
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isinf(logits[i]) && logits[i] > 0) any_pos_inf = true;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (any_pos_inf) {
      // +inf dominates: keep only those tokens, as equals, so softmax stays NaN-free.
      if (std::isinf(l) && l > 0) cands_.push_back({int32_t(i), 0.0f});
    } else if (std::isfinite(l)) {
      cands_.push_back({int32_t(i), l});
    }
  }
  check(!cands_.empty(), "every logit is -inf or NaN; there is no token to pick");
}

void Sampler::apply_logit_bias() {
  if (bias_.empty()) return;
  // Candidates are in id order here, so each biased token is found by binary search.
  bool banned = false;
  for (const auto& [tok, bias] : bias_) {
    auto it = std::lower_bound(cands_.begin(), cands_.end(), tok,
                               [](const Candidate& c, int32_t id) { return c.id < id; });
    if (it == cands_.end() || it->id != tok) continue;
    it->logit += bias;
    banned = banned || !std::isfinite(it->logit);
  }
  if (banned) std::erase_if(cands_, [](const Candidate& c) { return !std::isfinite(c.logit); });
  check(!cands_.empty(), "logit_bias bans every token that could be picked");
}

void Sampler::apply_penalties() {
  const SamplingParams& p = params_;
  if ((p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) || history_.empty())
    return;
  std::vector<int32_t> seen(history_);
  std::sort(seen.begin(), seen.end());
  // Candidates are still in id order here, so each seen token is found by binary search.
  for (size_t i = 0; i < seen.size();) {
    const int32_t tok = seen[i];
    size_t j = i;
    while (j < seen.size() && seen[j] == tok) ++j;
    const float count = float(j - i);
    i = j;
    auto it = std::lower_bound(cands_.begin(), cands_.end(), tok,
                               [](const Candidate& c, int32_t id) { return c.id < id; });
    if (it == cands_.end() || it->id != tok) continue;
    // llama.cpp's rule: shrink positive logits, push negative ones further down; then
    // OpenAI's frequency and presence terms.
    it->logit = it->logit > 0 ? it->logit / p.repeat_penalty : it->logit * p.repeat_penalty;
    it->logit -= count * p.frequency_penalty + p.presence_penalty;
  }
}

void Sampler::apply_top_k() {
  const size_t k = size_t(params_.top_k);
  if (k == 0 || k >= cands_.size()) return;
  auto cmp = [](const Candidate& a, const Candidate& b) { return better(a, b); };
  std::nth_element(cands_.begin(), cands_.begin() + ptrdiff_t(k), cands_.end(), cmp);
  cands_.resize(k);
  std::sort(cands_.begin(), cands_.end(), cmp);
  sorted_ = true;
}

void Sampler::apply_top_p() {
  if (params_.top_p >= 1.0f || cands_.size() == 1) return;
  if (!sorted_) {
    std::sort(cands_.begin(), cands_.end(), [](const Candidate& a, const Candidate& b) { return better(a, b); });
    sorted_ = true;
  }
  // Softmax at temperature 1 (as llama.cpp does: top-p runs before temperature).
  const double m = cands_[0].logit;
  double total = 0;
  for (const auto& c : cands_) total += std::exp(double(c.logit) - m);
  const double target = double(params_.top_p) * total;
  double cum = 0;
  size_t keep = cands_.size();
  for (size_t i = 0; i < cands_.size(); ++i) {
    cum += std::exp(double(cands_[i].logit) - m);
    if (cum >= target) {
      keep = i + 1;  // the token that crosses the threshold stays
      break;
    }
  }
  cands_.resize(std::max<size_t>(keep, 1));
}

void Sampler::apply_min_p() {
  if (params_.min_p <= 0.0f || cands_.size() == 1) return;
  float m = cands_[0].logit;
  for (const auto& c : cands_) m = std::max(m, c.logit);
  // p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p); the max itself always stays.
  const double floor = double(m) + std::log(double(params_.min_p));
  std::erase_if(cands_, [&](const Candidate& c) { return double(c.logit) < floor; });
}

int32_t Sampler::draw() {
  float m = cands_[0].logit;
  for (const auto& c : cands_) m = std::max(m, c.logit);
  // Temperature folded into the exponent in double: (l - max) / T is <= 0, so a tiny T
  // underflows to probability 0 instead of overflowing to inf/NaN.
  const double inv_t = 1.0 / double(params_.temperature);
  double total = 0;
  for (const auto& c : cands_) total += std::exp((double(c.logit) - m) * inv_t);
  const double u = rng_.uniform() * total;
  double cum = 0;
  for (const auto& c : cands_) {
    cum += std::exp((double(c.logit) - m) * inv_t);
    if (cum > u) return c.id;
  }
  // Rounding can leave u just above the final sum; the last candidate with weight wins.
  for (size_t i = cands_.size(); i-- > 0;)
    if (std::exp((double(cands_[i].logit) - m) * inv_t) > 0) return cands_[i].id;
  return cands_[0].id;
}

// llama.cpp's order (common_sampler_sample): draw from the unconstrained chain; keep the
// token when the filter allows it, otherwise remove every refused token before the chain
// (penalties, top-k, ...) and draw again. The full mask is paid only on a refusal.
int32_t Sampler::sample_filtered(std::span<const float> logits) {
  in_chain_ = true;
  mask_pass_ = false;
  try {
    int32_t t = sample(logits);
    if (!filter_->allows(t)) {
      filter_->allowed(mask_);
      mask_pass_ = true;
      t = sample(logits);
    }
    in_chain_ = mask_pass_ = false;
    filter_->accept(t);
    return t;
  } catch (...) {
    in_chain_ = mask_pass_ = false;
    throw;
  }
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (filter_ && !in_chain_) return sample_filtered(logits);
  build_candidates(logits);
  if (mask_pass_) {
    // Logit rows past the tokenizer's vocabulary (padding) are never allowed.
    std::erase_if(cands_, [&](const Candidate& c) { return size_t(c.id) >= mask_.size() || !mask_[size_t(c.id)]; });
    check(!cands_.empty(), "the grammar allows no token here (every allowed token has a -inf or NaN logit)");
  }
  apply_logit_bias();
  apply_penalties();
  if (params_.temperature <= 0.0f) {
    // Greedy: the filters below never remove the best token, so skip them.
    const auto best = std::min_element(cands_.begin(), cands_.end(),
                                       [](const Candidate& a, const Candidate& b) { return better(a, b); });
    return best->id;
  }
  apply_top_k();
  apply_top_p();
  apply_min_p();
  return draw();
}

LogprobReport logprobs_of(std::span<const float> logits, int32_t token, int32_t top_n) {
  check(token >= 0 && size_t(token) < logits.size(), "logprobs_of: token outside the vocabulary");
  auto value = [&](size_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  float m = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) m = std::max(m, value(i));
  // log-softmax = l - max - log(sum exp(l - max)), in double; +inf logits share the mass.
  const bool pos_inf = std::isinf(m) && m > 0;
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    total += pos_inf ? double(value(i) == m) : std::exp(double(value(i)) - double(m));
  const double log_total = std::log(total);
  auto logprob = [&](size_t i) -> float {
    const float l = value(i);
    if (pos_inf) return l == m ? float(-log_total) : -INFINITY;
    return std::isinf(l) ? -INFINITY : float(double(l) - double(m) - log_total);
  };
  LogprobReport r;
  r.chosen = {token, logprob(size_t(token))};
  const size_t k = std::min(size_t(std::max(top_n, 0)), logits.size());
  if (k == 0) return r;
  struct Entry {
    int32_t id;
    float logit;
  };
  std::vector<Entry> all;  // ranked with the sampler's strict order (ties: lower id)
  all.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) all.push_back({int32_t(i), value(i)});
  auto cmp = [](const Entry& a, const Entry& b) { return better(a, b); };
  std::partial_sort(all.begin(), all.begin() + ptrdiff_t(k), all.end(), cmp);
  for (size_t i = 0; i < k; ++i) r.top.push_back({all[i].id, logprob(size_t(all[i].id))});
  return r;
}

}  // namespace ws
