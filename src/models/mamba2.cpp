// Pure Mamba-2: every layer is x += mixer(RMSNorm(x, attn_norm)); no FFN, no attention.
// Memory: one RecurrentState per layer (conv tail + SSM state), nothing that grows.
#include <vector>

#include "models/decoder.h"
#include "models/mamba2_mixer.h"

namespace ws {
namespace {

struct Mamba2Layer {
  const float* norm;  // [n_embd]
  Mamba2Weights mixer;
};

class Mamba2Model final : public Decoder {
 public:
  Mamba2Model(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const int64_t d = cfg_.n_embd;
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    cfg_.rope_type = RopeType::none;
    emb_ = ops::load_embeddings(f, cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = layer_prefix(i);
      layers_.push_back({ops::vector_f32(f, p + "attn_norm.weight", d), load_mamba2_weights(f, p, dims_)});
    }
  }

 private:
  std::unique_ptr<LayerState> layer_memory(size_t, const MemoryOptions&) const override {
    return recurrent_memory(mamba2_state_sizes(dims_));
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    pre_norm(x, layers_[il].norm, p, [&](const float* xn, float* out) {
      mamba2_mixer(layers_[il].mixer, dims_, il, p.seqs, xn, p.n, out, cfg_.rms_eps, p.pool);
    });
  }

  Mamba2Dims dims_;
  std::vector<Mamba2Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_mamba2(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Mamba2Model>(f, arch);
}

}  // namespace ws
