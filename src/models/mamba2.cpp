// Pure Mamba-2: every layer is x += mixer(RMSNorm(x, attn_norm)); no FFN, no attention.
// Memory: one RecurrentState per layer (conv tail + SSM state), nothing that grows.
#include <vector>

#include "models/mamba2_mixer.h"
#include "models/ops.h"

namespace ws {
namespace {

struct Mamba2Layer {
  const float* norm;  // [n_embd]
  Mamba2Weights mixer;
};

class Mamba2Model final : public Model {
 public:
  Mamba2Model(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    const int64_t d = cfg_.n_embd;
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    cfg_.rope_type = RopeType::none;
    emb_ = ops::load_embeddings(f, cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      layers_.push_back({ops::vector_f32(f, p + "attn_norm.weight", d), load_mamba2_weights(f, p, dims_)});
    }
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers.push_back(std::make_unique<RecurrentState>(mamba2_state_sizes(dims_)));
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = batch.size(), d = cfg_.n_embd;
    if (n == 0) return;
    state.check_room(n);
    std::vector<float> x(size_t(n * d));   // [n][n_embd] residual stream
    std::vector<float> xn(size_t(n * d));  // [n][n_embd] normed layer input
    std::vector<float> o(size_t(n * d));   // [n][n_embd] mixer output
    ops::embed_batch(emb_.tok_embd, batch, false, x.data());  // throws before any state is touched
    for (size_t il = 0; il < layers_.size(); ++il) {
      ops::rms_norm(x.data(), layers_[il].norm, xn.data(), n, d, cfg_.rms_eps);
      mamba2_mixer(layers_[il].mixer, dims_, static_cast<RecurrentState&>(state.layer(il)), xn.data(), n, o.data(),
                   cfg_.rms_eps, pool);
      ops::add_scaled(x.data(), o.data(), n * d);
    }
    state.advance(int32_t(n));
    ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
  }

 private:
  ModelConfig cfg_;
  Mamba2Dims dims_;
  ops::Embeddings emb_;
  std::vector<Mamba2Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_mamba2(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Mamba2Model>(f, arch);
}

}  // namespace ws
