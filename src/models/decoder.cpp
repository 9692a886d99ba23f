#include "models/decoder.h"

namespace ws {

SeqState Decoder::make_state(const MemoryOptions& opts) const {
  std::vector<std::unique_ptr<LayerState>> layers;  // [n_layer]
  for (int32_t il = 0; il < cfg_.n_layer; ++il) layers.push_back(layer_memory(size_t(il), opts));
  return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
}

void Decoder::forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits, ThreadPool& pool) const {
  const int64_t n = batch.size(), d = cfg_.n_embd;
  if (n == 0) return;
  state.check_room(n);
  LayerPass p{batch, state, n, state.position(), pool, std::vector<float>(size_t(n * d)),
              std::vector<float>(size_t(n * d))};
  std::vector<float> x(size_t(n * d));  // [n][n_embd] f32 residual stream
  // Throws on a bad id (or a non-causal batch this model cannot do) before any state is touched.
  ops::embed_batch(emb_.tok_embd, batch, non_causal_ok_, x.data());
  if (!batch.embeddings && embed_scale_ != 1.f)
    for (float& v : x) v *= embed_scale_;
  begin_batch(x.data(), p);
  for (int32_t il = 0; il < cfg_.n_layer; ++il) layer_forward(size_t(il), x.data(), p);
  state.advance(int32_t(n));
  ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
  if (mode == LogitsMode::all || mode == LogitsMode::last) finish_logits(logits, mode == LogitsMode::all ? n : 1);
}

std::unique_ptr<LayerState> full_kv_memory(int32_t n_kv, int32_t head_dim, const MemoryOptions& opts) {
  return std::make_unique<FullKvState>(n_kv, head_dim, opts.kv_type, opts.kv_page_size);
}

std::unique_ptr<LayerState> sliding_kv_memory(int32_t n_kv, int32_t head_dim, int32_t window,
                                              const MemoryOptions& opts) {
  return std::make_unique<SlidingKvState>(n_kv, head_dim, opts.kv_type, window, opts.swa_slack);
}

std::unique_ptr<LayerState> recurrent_memory(std::vector<size_t> buffer_sizes) {
  return std::make_unique<RecurrentState>(std::move(buffer_sizes));
}

std::string layer_prefix(int64_t il) { return "blk." + std::to_string(il) + "."; }

}  // namespace ws
