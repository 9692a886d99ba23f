#include "engine/eval.h"

#include <algorithm>
#include <stdexcept>

namespace ws {

namespace {

// Feeds batches [start, start+len) made by `make` in micro-batches; logits as documented.
template <class MakeBatch>
void eval_batches(const Model& model, SeqState& state, size_t n, int32_t n_ubatch, LogitsMode mode,
                  std::vector<float>& logits, ThreadPool& pool, MakeBatch make) {
  if (n_ubatch <= 0) throw std::invalid_argument("micro-batch size must be positive");
  const size_t n_vocab = size_t(model.config().n_vocab);
  state.check_room(int64_t(n));
  if (mode == LogitsMode::all) logits.resize(n * n_vocab);
  if (mode == LogitsMode::last) logits.resize(n_vocab);
  for (size_t start = 0; start < n; start += size_t(n_ubatch)) {
    const size_t len = std::min(size_t(n_ubatch), n - start);
    const bool last_batch = start + len == n;
    LogitsMode m = LogitsMode::none;
    float* out = nullptr;
    if (mode == LogitsMode::all) {
      m = LogitsMode::all;
      out = logits.data() + start * n_vocab;
    } else if (mode == LogitsMode::last && last_batch) {
      m = LogitsMode::last;
      out = logits.data();
    }
    model.forward(make(start, len), state, m, out, pool);
  }
}

}  // namespace

void eval_tokens(const Model& model, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                 LogitsMode mode, std::vector<float>& logits, ThreadPool& pool, const int32_t* positions) {
  eval_batches(model, state, tokens.size(), n_ubatch, mode, logits, pool, [&](size_t start, size_t len) {
    Batch b{tokens.subspan(start, len)};
    if (positions) b.positions = positions + 4 * start;
    return b;
  });
}

void eval_embeddings(const Model& model, SeqState& state, const float* embeddings, int64_t n_rows, bool non_causal,
                     int32_t n_ubatch, LogitsMode mode, std::vector<float>& logits, ThreadPool& pool,
                     const int32_t* positions) {
  if (n_rows <= 0) throw std::invalid_argument("no embedding rows to evaluate");
  const size_t d = size_t(model.config().n_embd);
  // A non-causal chunk must be one batch: splitting it would hide later rows from earlier ones.
  const int32_t ub = non_causal ? int32_t(std::max<int64_t>(n_rows, 1)) : n_ubatch;
  eval_batches(model, state, size_t(n_rows), ub, mode, logits, pool, [&](size_t start, size_t len) {
    Batch b;
    b.embeddings = embeddings + start * d;
    b.n_rows = int64_t(len);
    b.non_causal = non_causal;
    if (positions) b.positions = positions + 4 * start;
    return b;
  });
}

}  // namespace ws
