#include "models/decoder.h"

#include <algorithm>
#include <stdexcept>

namespace ws {

SeqState Decoder::make_state(const MemoryOptions& opts) const {
  std::vector<std::unique_ptr<LayerState>> layers;  // [n_layer]
  for (int32_t il = 0; il < cfg_.n_layer; ++il) layers.push_back(layer_memory(size_t(il), opts));
  return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
}

namespace {

// The logits of several sequences from one output projection: the rows each step asks for
// (all of its rows, or its last) are gathered, projected together and scattered back.
// x: [rows][n_embd] of the pass.
template <class Finish>
void gathered_logits(const ops::Embeddings& e, SeqSpan seqs, std::span<SeqStep*> owner,
                     const float* x, float eps, ThreadPool& pool, Finish&& finish) {
  const int64_t d = e.output.cols, nv = e.output.rows;
  std::vector<float> rows;  // [m][n_embd] f32: the gathered final hidden states
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqRows& s = seqs[i];
    SeqStep& st = *owner[i];
    if (st.mode == LogitsMode::hidden) ops::output_logits(e, x + s.row0 * d, s.n, st.mode, eps, st.logits, pool);
    if (st.mode != LogitsMode::all && st.mode != LogitsMode::last) continue;
    const int64_t first = st.mode == LogitsMode::all ? s.row0 : s.row0 + s.n - 1;
    rows.insert(rows.end(), x + first * d, x + (s.row0 + s.n) * d);
  }
  const int64_t m = int64_t(rows.size()) / d;
  if (m == 0) return;
  std::vector<float> logits(size_t(m * nv));  // [m][n_vocab] f32
  ops::output_logits(e, rows.data(), m, LogitsMode::all, eps, logits.data(), pool);
  finish(logits.data(), m);
  const float* src = logits.data();
  for (size_t i = 0; i < seqs.size(); ++i) {
    SeqStep& st = *owner[i];
    if (st.mode != LogitsMode::all && st.mode != LogitsMode::last) continue;
    const int64_t k = st.mode == LogitsMode::all ? seqs[i].n : 1;
    std::copy(src, src + k * nv, st.logits);
    src += k * nv;
  }
}

}  // namespace

void Decoder::forward_many(std::span<SeqStep> steps, ThreadPool& pool) const {
  const int64_t d = cfg_.n_embd;
  int64_t total = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    total += steps[i].batch.size();
    for (size_t j = 0; j < i; ++j)
      if (steps[i].state == steps[j].state) throw std::logic_error("forward_many: two steps share one state");
  }
  std::vector<float> x(size_t(total * d));  // [rows][n_embd] f32 residual stream of every sequence
  std::vector<SeqRows> seqs;                // the accepted steps, in row order
  std::vector<SeqStep*> owner;              // [seqs] the step of each
  int64_t n = 0;
  for (SeqStep& st : steps) {
    st.error = nullptr;
    const int64_t k = st.batch.size();
    if (k == 0) continue;
    // A refused input (full context, bad id, non-causal batch) touches no state.
    try {
      st.state->check_room(k);
      ops::embed_batch(emb_.tok_embd, st.batch, non_causal_ok_, x.data() + n * d);
    } catch (...) {
      st.error = std::current_exception();
      continue;
    }
    if (!st.batch.embeddings && embed_scale_ != 1.f)
      for (int64_t i = n * d; i < (n + k) * d; ++i) x[size_t(i)] *= embed_scale_;
    seqs.push_back({&st.batch, st.state, n, k, st.state->position()});
    owner.push_back(&st);
    n += k;
  }
  if (n == 0) return;
  LayerPass p{seqs, n, pool, std::vector<float>(size_t(n * d)), std::vector<float>(size_t(n * d))};
  begin_batch(x.data(), p);
  for (int32_t il = 0; il < cfg_.n_layer; ++il) layer_forward(size_t(il), x.data(), p);
  for (const SeqRows& s : seqs) s.state->advance(int32_t(s.n));
  auto finish = [&](float* logits, int64_t rows) { finish_logits(logits, rows); };
  if (seqs.size() == 1) {  // one sequence: straight into its buffer
    SeqStep& st = *owner[0];
    ops::output_logits(emb_, x.data(), n, st.mode, cfg_.rms_eps, st.logits, pool);
    if (st.mode == LogitsMode::all || st.mode == LogitsMode::last) finish(st.logits, st.mode == LogitsMode::all ? n : 1);
    return;
  }
  gathered_logits(emb_, seqs, owner, x.data(), cfg_.rms_eps, pool, finish);
}

std::unique_ptr<LayerState> full_kv_memory(int32_t n_kv, int32_t head_dim, const MemoryOptions& opts) {
  return std::make_unique<FullKvState>(n_kv, head_dim, opts.kv_types, opts.kv_page_size);
}

std::unique_ptr<LayerState> sliding_kv_memory(int32_t n_kv, int32_t head_dim, int32_t window,
                                              const MemoryOptions& opts) {
  return std::make_unique<SlidingKvState>(n_kv, head_dim, opts.kv_types, window, opts.swa_slack);
}

std::unique_ptr<LayerState> recurrent_memory(std::vector<size_t> buffer_sizes) {
  return std::make_unique<RecurrentState>(std::move(buffer_sizes));
}

std::string layer_prefix(int64_t il) { return "blk." + std::to_string(il) + "."; }

}  // namespace ws
