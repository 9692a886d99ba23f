#include "engine/turn.h"

#include <algorithm>
#include <chrono>

#include "engine/eval.h"

namespace ws {
namespace {

// Thrown between micro-batches when TurnRequest::cancelled says the client left.
struct TurnCancelled {};

using clock_type = std::chrono::steady_clock;
double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// The media chunk that holds position p, or null (text).
const MediaChunk* chunk_at(const TurnRequest& req, int32_t p) {
  for (const auto& c : req.media)
    if (p >= c.pos0 && p < c.pos0 + c.n_rows) return &c;
  return nullptr;
}

// First media chunk starting after p (the end of a text run), or n.
int32_t next_media_start(const TurnRequest& req, int32_t p, int32_t n) {
  for (const auto& c : req.media)
    if (c.pos0 > p) return std::min(c.pos0, n);
  return n;
}

void validate_media(const TurnRequest& req) {
  int32_t prev_end = 0;
  for (const auto& c : req.media) {
    if (c.n_rows <= 0 || c.pos0 < prev_end || c.pos0 + c.n_rows > int32_t(req.prompt.size()) || !c.embeddings)
      throw std::invalid_argument("media chunks must be sorted, non-overlapping, non-empty and inside the prompt");
    prev_end = c.pos0 + c.n_rows;
  }
}

}  // namespace

std::vector<int32_t> mrope_positions(const ModelConfig& cfg, std::span<const MediaChunk> media, int32_t begin,
                                     int32_t end) {
  // Rows before the first image rotate by their state positions, as text always does.
  if (!cfg.mrope || end <= begin || media.empty() || end <= media.front().pos0) return {};
  std::vector<int32_t> out(size_t(end - begin) * 4);  // [end - begin][4] t, h, w, e
  int32_t shift = 0;  // rows minus positions of the chunks before row r
  size_t c = 0;       // first chunk not wholly before row r
  for (int32_t r = begin; r < end; ++r) {
    while (c < media.size() && r >= media[c].pos0 + media[c].n_rows) {
      const MediaChunk& m = media[c++];
      const int32_t w = m.grid_w > 0 ? m.grid_w : m.n_rows, h = m.grid_h > 0 ? m.grid_h : 1;
      shift += m.n_rows - std::max(w, h);
    }
    int32_t* o = out.data() + size_t(r - begin) * 4;
    if (c < media.size() && r >= media[c].pos0) {
      const MediaChunk& m = media[c];
      const int32_t q = m.pos0 - shift, i = r - m.pos0, w = m.grid_w > 0 ? m.grid_w : m.n_rows;
      o[0] = q, o[1] = q + i / w, o[2] = q + i % w, o[3] = 0;
    } else {
      o[0] = o[1] = o[2] = r - shift, o[3] = 0;  // text: llama.cpp zeroes the fourth component
    }
  }
  return out;
}

ReuseTraits reuse_traits(const Model& model, const MemoryOptions& mem) {
  MemoryOptions probe = mem;
  probe.n_ctx = 1;
  const SeqState s = model.make_state(probe);
  ReuseTraits t;
  for (size_t i = 0; i < s.n_layers(); ++i) {
    const LayerState& l = s.layer(i);
    t.can_truncate = t.can_truncate && l.kind() == LayerKind::full_kv;
    t.fixed_snapshot_bytes += l.fixed_copy_bytes();
  }
  return t;
}

int32_t Engine::restore_hit(Hit& hit, SeqState& state, TurnResult& res) {
  if (!hit.snapshot) return 0;
  const auto t0 = clock_type::now();
  try {
    state.restore(*hit.snapshot);
    const size_t n_logits = hit.snapshot->logits.size(), n_vocab = size_t(model_.config().n_vocab);
    if (n_logits != 0 && n_logits != n_vocab)
      throw std::runtime_error("it holds " + std::to_string(n_logits) + " logits for a vocabulary of " +
                               std::to_string(n_vocab));
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

void Engine::put(const std::vector<Token>& tokens, size_t n, const SeqState& state, Boundary kind,
                 PreparedSnapshotMemory::Set memory, std::span<const float> logits) {
  if (!cache_ || !cache_->enabled()) return;
  Snapshot snap = state.snapshot(std::move(memory));
  if (!logits.empty()) {
    snap.logits.assign(logits.begin(), logits.end());
    snap.checksum = snap.compute_checksum();
  }
  cache_->put(model_.config().model_id, std::span(tokens).first(n), std::move(snap), kind);
}

void Engine::eval_range(const TurnRequest& req, int32_t pos, int32_t end, LogitsMode mode, SeqState& state,
                        std::vector<float>& logits) {
  const MediaChunk* c = chunk_at(req, pos);
  // [end - pos][4] M-RoPE components, or empty
  const std::vector<int32_t> rope_pos = mrope_positions(model_.config(), req.media, pos, end);
  const int32_t* rp = rope_pos.empty() ? nullptr : rope_pos.data();
  if (!c) {
    eval_tokens(model_, state, std::span(req.prompt).subspan(size_t(pos), size_t(end - pos)), opt_.n_ubatch, mode,
                logits, pool_, rp);
    return;
  }
  const size_t d = size_t(model_.config().n_embd);
  const auto rows = c->embeddings();  // [n_rows][n_embd]
  if (!rows || rows->size() != size_t(c->n_rows) * d)
    throw std::runtime_error("media chunk at " + std::to_string(c->pos0) + " has " +
                             std::to_string(rows ? rows->size() : 0) + " embedding values, expected " +
                             std::to_string(size_t(c->n_rows) * d) + " (projector and model do not match?)");
  eval_embeddings(model_, state, rows->data() + size_t(pos - c->pos0) * d, end - pos, c->non_causal, opt_.n_ubatch,
                  mode, logits, pool_, rp);
}

Boundary Engine::ingest(const TurnRequest& req, int32_t from, SeqState& state, std::vector<float>& last_logits,
                        PreparedSnapshotMemory& memory, TurnResult& res) {
  const int32_t n = int32_t(req.prompt.size());
  // The plan ends at the frontier n (always in it, from < n), taken by the caller.
  auto plan = opt_.checkpoints.plan(from, n, req.message_ends, req.media_ends, opt_.checkpoints.min_gap(traits_),
                                    req.keep_message_end);
  const Boundary frontier = plan.back().second;
  plan.pop_back();
  // A checkpoint inside a bidirectional chunk would split it (its rows see each other).
  std::erase_if(plan, [&](const auto& cp) {
    const MediaChunk* c = chunk_at(req, cp.first);
    return c && c->non_causal && cp.first > c->pos0;
  });
  // The frontier and the reply's end are taken after the first token, off the TTFT path;
  // their memory is prepared too only where the helper does not slow the prompt down.
  memory.start(plan.size() + (spare_core_ ? 2 : 0));
  size_t next_cp = 0;
  const size_t n_vocab = size_t(model_.config().n_vocab);
  std::vector<float> chunk_logits;  // [chunk][n_vocab] or [n_vocab]
  int32_t pos = from;
  while (pos < n) {
    if (req.cancelled && req.cancelled()) throw TurnCancelled();
    int32_t end = std::min(n, pos + opt_.n_ubatch);
    if (next_cp < plan.size() && plan[next_cp].first < end) end = plan[next_cp].first;
    // Text and each media chunk go in separate batches; a non-causal chunk goes whole.
    if (const MediaChunk* c = chunk_at(req, pos))
      end = c->non_causal ? c->pos0 + c->n_rows : std::min(end, c->pos0 + c->n_rows);
    else
      end = std::min(end, next_media_start(req, pos, n));
    const bool last = end == n;
    const LogitsMode mode = req.record_logits ? LogitsMode::all : (last ? LogitsMode::last : LogitsMode::none);
    eval_range(req, pos, end, mode, state, chunk_logits);
    if (req.record_logits) res.logits.insert(res.logits.end(), chunk_logits.begin(), chunk_logits.end());
    res.chunk_ends.push_back(end);
    while (next_cp < plan.size() && plan[next_cp].first < end) ++next_cp;
    if (next_cp < plan.size() && plan[next_cp].first == end) {
      const auto t0 = clock_type::now();
      put(req.prompt, size_t(end), state, plan[next_cp++].second, memory.take());
      res.checkpoint_ms += ms_since(t0);
      ++res.checkpoints;
    }
    pos = end;
  }
  last_logits.assign(chunk_logits.end() - long(n_vocab), chunk_logits.end());
  return frontier;
}

void Engine::align_hit_to_media(const TurnRequest& req, Hit& hit, TurnResult& res) {
  if (!hit.snapshot) return;
  for (const auto& c : req.media) {
    if (!c.non_causal || hit.reuse <= c.pos0 || hit.reuse >= c.pos0 + c.n_rows) continue;
    if (traits_.can_truncate) {
      hit.reuse = c.pos0;  // restore_hit cuts the state back to the chunk's start
    } else {
      cache_->release(hit);
      hit = Hit{};
      res.miss_reason = "the cached state ends inside a bidirectional image chunk";
    }
    return;
  }
}

TurnResult Engine::run_turn(const TurnRequest& req, const TokenSink& sink) {
  if (!sink) return run_samples(req, {});
  return run_samples(req, [&sink](int32_t, Token t, std::span<const float>) { return sink(t); });
}

Engine::DecodedReplies Engine::decode_replies(const TurnRequest& req, const SampleSink& sink, SeqState& state,
                                              const std::vector<float>& logits,
                                              const std::function<void()>& first_token_out,
                                              std::chrono::steady_clock::time_point t0, TurnResult& res) {
  struct Reply {  // each with its own sampler and logits
    SeqState* state;
    Sampler sampler;
    std::vector<float> logits;
    std::vector<Token> seq;  // every token the state has consumed
    TurnResult::Sample out;
    bool done = false;
  };
  const int32_t n_samples = std::max<int32_t>(1, req.n_samples);
  std::vector<SeqState> forks;
  forks.reserve(size_t(n_samples - 1));
  for (int32_t s = 1; s < n_samples; ++s) forks.push_back(state.fork());
  std::vector<Reply> replies;
  replies.reserve(size_t(n_samples));
  for (int32_t s = 0; s < n_samples; ++s) {
    SamplingParams p = req.sampling;
    p.seed += uint64_t(s);
    replies.push_back(Reply{s == 0 ? &state : &forks[size_t(s - 1)], Sampler(p), logits, req.prompt, {{}, "length"}});
    for (Token t : req.prompt)
      if (t >= 0) replies.back().sampler.accept(t);  // media placeholders are not tokens
  }
  for (int32_t i = 0; i < req.max_tokens; ++i) {
    bool active = false;
    for (int32_t s = 0; s < n_samples; ++s) {
      Reply& r = replies[size_t(s)];
      if (r.done) continue;
      const Token next = r.sampler.sample(r.logits);
      if (i == 0 && s == 0) res.ttft_ms = ms_since(t0);
      r.done = true;  // until this step reaches its end
      if (tok_.is_eog(next)) {
        r.out.stop_reason = "eog";
        continue;
      }
      r.out.generated.push_back(next);
      r.sampler.accept(next);
      if (sink && !sink(s, next, r.logits)) {
        r.out.stop_reason = "client";
        continue;
      }
      if (s == 0) first_token_out();  // reply 0's state and logits are still the prompt's
      if (i + 1 == req.max_tokens) continue;
      if (r.state->position() + 1 >= opt_.memory.n_ctx) {
        r.out.stop_reason = "context";
        continue;
      }
      const Token one[1] = {next};
      const auto rope_pos = mrope_positions(model_.config(), req.media, r.state->position(), r.state->position() + 1);
      const bool record = req.record_logits && s == 0;
      eval_tokens(model_, *r.state, one, 1, record ? LogitsMode::all : LogitsMode::last, r.logits, pool_,
                  rope_pos.empty() ? nullptr : rope_pos.data());
      if (record) res.logits.insert(res.logits.end(), r.logits.begin(), r.logits.end());
      r.seq.push_back(next);
      r.done = false;
      active = true;
    }
    if (!active) break;
  }
  DecodedReplies out;
  for (auto& r : replies) {
    if (&r != &replies[0]) out.computed_elsewhere += int32_t(r.seq.size()) - int32_t(req.prompt.size());
    res.samples.push_back(std::move(r.out));
  }
  out.first_sequence = std::move(replies[0].seq);
  return out;
}

TurnResult Engine::run_samples(const TurnRequest& req, const SampleSink& sink) {
  const auto t0 = clock_type::now();
  TurnResult res;
  const int32_t n = int32_t(req.prompt.size());
  res.prompt_tokens = n;
  if (n == 0) throw std::invalid_argument("empty prompt");
  validate_media(req);
  if (n >= opt_.memory.n_ctx)
    throw std::invalid_argument("the prompt has " + std::to_string(n) + " tokens; the context holds " +
                                std::to_string(opt_.memory.n_ctx));
  Hit hit;
  if (cache_ && cache_->enabled()) hit = cache_->acquire(model_.config().model_id, req.prompt, traits_);
  res.common_prefix = hit.common_prefix;
  res.miss_reason = hit.miss_reason;
  res.reuse_tier = hit.tier;
  res.tier_bytes = hit.tier_bytes;
  res.tier_ms = hit.tier_ms;
  align_hit_to_media(req, hit, res);
  SeqState state = model_.make_state(opt_.memory);
  res.reused = restore_hit(hit, state, res);
  if (cache_) cache_->release(hit);

  std::vector<float> logits;  // [n_vocab] after the last token the state consumed
  bool frontier_due = res.reused < n;  // a checkpoint at n, once the first token is out
  Boundary frontier_kind = Boundary::frontier;
  PreparedSnapshotMemory memory(cache_ && cache_->enabled() ? state.fixed_copy_bytes() : std::vector<size_t>{});
  if (frontier_due) {
    try {
      frontier_kind = ingest(req, res.reused, state, logits, memory, res);
    } catch (const TurnCancelled&) {  // the checkpoints laid so far stay: a retry reuses them
      res.stop_reason = "cancelled";
      res.samples.assign(size_t(std::max<int32_t>(1, req.n_samples)), {{}, "cancelled"});
      res.computed = state.position() - res.reused;
      res.total_ms = ms_since(t0);
      return res;
    }
  } else {
    logits = hit.snapshot->logits;  // a regeneration: the frontier kept them
  }
  // The frontier's copy (MiBs for recurrent layers) waits until the first token has
  // reached the client; nothing has changed the state or the logits by then.
  auto take_frontier = [&] {
    if (!frontier_due) return;
    const auto t1 = clock_type::now();
    put(req.prompt, size_t(n), state, frontier_kind, memory.take(), logits);
    res.frontier_ms = ms_since(t1);
    ++res.checkpoints;
    frontier_due = false;
  };
  const DecodedReplies decoded = decode_replies(req, sink, state, logits, take_frontier, t0, res);
  const std::vector<Token>& seq = decoded.first_sequence;
  res.generated = res.samples[0].generated;
  res.stop_reason = res.samples[0].stop_reason;
  if (res.ttft_ms == 0) res.ttft_ms = ms_since(t0);
  take_frontier();
  if (int32_t(seq.size()) > n) put(seq, seq.size(), state, Boundary::reply, memory.take());
  res.computed = int32_t(seq.size()) - res.reused + decoded.computed_elsewhere;
  if (cache_) cache_->record_turn(res.reused, res.computed, res.restore_ms, res.checkpoint_ms + res.frontier_ms);
  res.total_ms = ms_since(t0);
  last_sequence_ = seq;
  return res;
}

}  // namespace ws
