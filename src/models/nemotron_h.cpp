// Nemotron-H: every layer is x += block(RMSNorm(x, attn_norm)) with block one of
//   Mamba-2 mixer        (head_count_kv[i] == 0 and feed_forward_length[i] == 0),
//   attention, no RoPE   (head_count_kv[i] > 0),
//   ReLU² MLP            (feed_forward_length[i] > 0): ffn_down(relu(ffn_up x)^2).
// Memory: RecurrentState for Mamba layers, FullKvState for attention, and a zero-byte
// RecurrentState for MLP layers (it only tracks the position).
#include <cmath>
#include <vector>

#include "models/mamba2_mixer.h"
#include "models/ops.h"

namespace ws {
namespace {

enum class BlockKind { mamba, attention, mlp };

struct NemotronLayer {
  const float* norm;              // [n_embd]
  BlockKind kind;
  Mamba2Weights mixer;            // mamba only
  ops::AttnWeights attn;   // attention only
  Matrix up, down;                // mlp only: up [n_ff, n_embd], down [n_embd, n_ff]
};

class NemotronHModel final : public Model {
 public:
  NemotronHModel(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    cfg_.rope_type = RopeType::none;
    attn_ = ops::attention_options(cfg_);
    const int64_t d = cfg_.n_embd;
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    emb_ = ops::load_embeddings(f, cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      const int32_t n_ff = cfg_.n_ff_per_layer[size_t(i)], n_kv = cfg_.n_head_kv_per_layer[size_t(i)];
      NemotronLayer l{};
      l.norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      if (n_kv > 0 && n_ff > 0)
        f.fail("layer " + std::to_string(i) + " has both head_count_kv and feed_forward_length set; a Nemotron-H "
               "layer is exactly one of Mamba-2, attention or MLP");
      if (n_kv > 0) {
        l.kind = BlockKind::attention;
        l.attn = ops::load_attention(f, p, d, cfg_.n_head, n_kv, cfg_.head_dim, /*qk_norm=*/false);
      } else if (n_ff > 0) {
        l.kind = BlockKind::mlp;
        l.up = ops::matrix(f, p + "ffn_up.weight", d, n_ff);
        l.down = ops::matrix(f, p + "ffn_down.weight", n_ff, d);
      } else {
        l.kind = BlockKind::mamba;
        l.mixer = load_mamba2_weights(f, p, dims_);
      }
      layers_.push_back(l);
    }
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (size_t i = 0; i < layers_.size(); ++i) {
      switch (layers_[i].kind) {
        case BlockKind::attention:
          layers.push_back(
              std::make_unique<FullKvState>(cfg_.n_head_kv_per_layer[i], cfg_.head_dim, opts.kv_type, opts.kv_page_size));
          break;
        case BlockKind::mamba:
          layers.push_back(std::make_unique<RecurrentState>(mamba2_state_sizes(dims_)));
          break;
        case BlockKind::mlp:
          layers.push_back(std::make_unique<RecurrentState>(std::vector<size_t>{}));  // no memory, tracks position
          break;
      }
    }
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(const Batch& batch, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = batch.size(), d = cfg_.n_embd;
    if (n == 0) return;
    state.check_room(n);
    std::vector<float> x(size_t(n * d));   // [n][n_embd] residual stream
    std::vector<float> xn(size_t(n * d));  // [n][n_embd] normed layer input
    std::vector<float> o(size_t(n * d));   // [n][n_embd] block output
    ops::embed_batch(emb_.tok_embd, batch, false, x.data());
    for (size_t il = 0; il < layers_.size(); ++il) {
      const NemotronLayer& l = layers_[il];
      ops::rms_norm(x.data(), l.norm, xn.data(), n, d, cfg_.rms_eps);
      switch (l.kind) {
        case BlockKind::mamba:
          mamba2_mixer(l.mixer, dims_, static_cast<RecurrentState&>(state.layer(il)), xn.data(), n, o.data(),
                       cfg_.rms_eps, pool);
          break;
        case BlockKind::attention:
          ops::attention_block(l.attn, attn_, static_cast<FullKvState&>(state.layer(il)), xn.data(), n,
                               state.position(), o.data(), pool);
          break;
        case BlockKind::mlp:
          mlp(l, xn.data(), n, o.data(), pool);
          static_cast<RecurrentState&>(state.layer(il)).advance(int32_t(n));
          break;
      }
      ops::add_scaled(x.data(), o.data(), n * d);
    }
    state.advance(int32_t(n));
    ops::output_logits(emb_, x.data(), n, mode, cfg_.rms_eps, logits, pool);
  }

 private:
  // out = down(relu(up xn)^2). xn, out: [n][n_embd].
  static void mlp(const NemotronLayer& l, const float* xn, int64_t n, float* out, ThreadPool& pool) {
    std::vector<float> u(size_t(n * l.up.rows));  // [n][n_ff]
    matmul(l.up, xn, n, u.data(), pool);
    for (float& v : u) v = v > 0.f ? v * v : 0.f;
    matmul(l.down, u.data(), n, out, pool);
  }

  ModelConfig cfg_;
  Mamba2Dims dims_;
  ops::AttnOptions attn_;  // no RoPE
  ops::Embeddings emb_;
  std::vector<NemotronLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_nemotron_h(const gguf::File& f, const std::string& arch) {
  return std::make_unique<NemotronHModel>(f, arch);
}

}  // namespace ws
