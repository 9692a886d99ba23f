#include "engine/turn.h"

#include <algorithm>
#include <chrono>

#include "engine/eval.h"

namespace ws {
namespace {

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

}  // namespace

ReuseTraits reuse_traits(const Model& model, const MemoryOptions& mem) {
  MemoryOptions probe = mem;
  probe.n_ctx = 1;
  const SeqState s = model.make_state(probe);
  ReuseTraits t;
  for (size_t i = 0; i < s.n_layers(); ++i) t.can_truncate = t.can_truncate && s.layer(i).kind() == LayerKind::full_kv;
  return t;
}

int32_t Engine::restore_hit(Hit& hit, SeqState& state, TurnResult& res) {
  if (!hit.snapshot) return 0;
  const auto t0 = clock_type::now();
  try {
    state.restore(*hit.snapshot);
    if (state.position() > hit.reuse && !state.try_truncate(hit.reuse))
      throw std::runtime_error("cannot cut the restored state back to " + std::to_string(hit.reuse));
  } catch (const std::exception& e) {
    // A corrupted or mismatched checkpoint: drop it and run cold. Wrong output is never an option.
    cache_->reject(hit);
    hit = Hit{};
    state = model_.make_state(opt_.memory);
    res.miss_reason = std::string("checkpoint rejected: ") + e.what();
    return 0;
  }
  res.restore_ms = ms_since(t0);
  return hit.reuse;
}

void Engine::put(const std::vector<Token>& tokens, size_t n, const SeqState& state, Boundary kind) {
  if (cache_ && cache_->enabled()) cache_->put(model_.config().model_id, std::span(tokens).first(n), state.snapshot(), kind);
}

void Engine::ingest(const TurnRequest& req, int32_t from, SeqState& state, std::vector<float>& last_logits,
                    TurnResult& res) {
  const int32_t n = int32_t(req.prompt.size());
  // Checkpoints up to the frontier n-1: a regenerated turn (same prompt) reuses all but
  // the last token, whose logits it needs anyway.
  const auto plan = opt_.checkpoints.plan(from, n - 1, req.message_ends, req.media_ends);
  size_t next_cp = 0;
  const size_t n_vocab = size_t(model_.config().n_vocab);
  std::vector<float> chunk_logits;  // [chunk][n_vocab] or [n_vocab]
  int32_t pos = from;
  while (pos < n) {
    int32_t end = std::min(n, pos + opt_.n_ubatch);
    if (next_cp < plan.size() && plan[next_cp].first < end) end = plan[next_cp].first;
    const bool last = end == n;
    const LogitsMode mode = req.record_logits ? LogitsMode::all : (last ? LogitsMode::last : LogitsMode::none);
    eval_tokens(model_, state, std::span(req.prompt).subspan(size_t(pos), size_t(end - pos)), opt_.n_ubatch, mode,
                chunk_logits, pool_);
    if (req.record_logits) res.logits.insert(res.logits.end(), chunk_logits.begin(), chunk_logits.end());
    res.chunk_ends.push_back(end);
    if (next_cp < plan.size() && plan[next_cp].first == end) put(req.prompt, size_t(end), state, plan[next_cp++].second);
    pos = end;
  }
  last_logits.assign(chunk_logits.end() - long(n_vocab), chunk_logits.end());
}

TurnResult Engine::run_turn(const TurnRequest& req, const TokenSink& sink) {
  const auto t0 = clock_type::now();
  TurnResult res;
  const int32_t n = int32_t(req.prompt.size());
  res.prompt_tokens = n;
  if (n == 0) throw std::invalid_argument("empty prompt");
  if (n >= opt_.memory.n_ctx)
    throw std::invalid_argument("the prompt has " + std::to_string(n) + " tokens; the context holds " +
                                std::to_string(opt_.memory.n_ctx));
  Hit hit;
  if (cache_ && cache_->enabled()) hit = cache_->acquire(model_.config().model_id, req.prompt, reuse_traits(model_, opt_.memory));
  res.common_prefix = hit.common_prefix;
  res.miss_reason = hit.miss_reason;
  SeqState state = model_.make_state(opt_.memory);
  res.reused = restore_hit(hit, state, res);
  if (cache_) cache_->release(hit);

  std::vector<float> logits;  // [n_vocab] of the last evaluated token
  ingest(req, res.reused, state, logits, res);
  Sampler sampler(req.sampling);
  for (Token t : req.prompt) sampler.accept(t);
  std::vector<Token> seq = req.prompt;  // every token the state has consumed
  res.stop_reason = "length";
  for (int32_t i = 0; i < req.max_tokens; ++i) {
    const Token next = sampler.sample(logits);
    if (i == 0) res.ttft_ms = ms_since(t0);
    if (tok_.is_eog(next)) {
      res.stop_reason = "eog";
      break;
    }
    res.generated.push_back(next);
    sampler.accept(next);
    if (sink && !sink(next)) {
      res.stop_reason = "client";
      break;
    }
    if (i + 1 == req.max_tokens) break;
    if (state.position() + 1 >= opt_.memory.n_ctx) {
      res.stop_reason = "context";
      break;
    }
    const Token one[1] = {next};
    eval_tokens(model_, state, one, 1, req.record_logits ? LogitsMode::all : LogitsMode::last, logits, pool_);
    if (req.record_logits) res.logits.insert(res.logits.end(), logits.begin(), logits.end());
    seq.push_back(next);
  }
  if (res.ttft_ms == 0) res.ttft_ms = ms_since(t0);
  if (int32_t(seq.size()) > n) put(seq, seq.size(), state, Boundary::reply);
  res.computed = int32_t(seq.size()) - res.reused;
  if (cache_) cache_->record_turn(res.reused, res.computed, res.restore_ms);
  res.total_ms = ms_since(t0);
  return res;
}

}  // namespace ws
