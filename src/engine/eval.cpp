#include "engine/eval.h"

#include <algorithm>
#include <stdexcept>

namespace ws {

void eval_tokens(const Model& model, SeqState& state, std::span<const Token> tokens, int32_t n_ubatch,
                 LogitsMode mode, std::vector<float>& logits, ThreadPool& pool) {
  if (n_ubatch <= 0) throw std::invalid_argument("micro-batch size must be positive");
  const size_t n_vocab = size_t(model.config().n_vocab);
  const size_t n = tokens.size();
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
    model.forward(tokens.subspan(start, len), state, m, out, pool);
  }
}

}  // namespace ws
