// Nemotron-H: every layer is x += block(RMSNorm(x, attn_norm)) with block one of
//   Mamba-2 mixer        (head_count_kv[i] == 0 and feed_forward_length[i] == 0),
//   attention, no RoPE   (head_count_kv[i] > 0),
//   ReLU² MLP            (feed_forward_length[i] > 0): ffn_down(relu(ffn_up x)^2).
// nemotron_h_moe (Nemotron-3-Nano): with expert_count > 0 every MLP layer is a
// sigmoid-routed mixture of ReLU² experts (selection bias exp_probs_b, weights normalised
// iff expert_weights_norm, times expert_weights_scale) plus an unscaled ReLU² shared expert.
// Memory: RecurrentState for Mamba layers, FullKvState for attention, and a zero-byte
// RecurrentState for MLP layers (it only tracks the position).
#include <cmath>
#include <vector>

#include "models/decoder.h"
#include "models/mamba2_mixer.h"
#include "models/moe.h"

namespace ws {
namespace {

enum class BlockKind { mamba, attention, mlp };

struct NemotronLayer {
  const float* norm;      // [n_embd]
  BlockKind kind;
  Mamba2Weights mixer;    // mamba only
  ops::AttnWeights attn;  // attention only
  Matrix up, down;        // dense mlp only: up [n_ff, n_embd], down [n_embd, n_ff]
  MoeWeights moe;         // mlp layers of nemotron_h_moe
};

class NemotronHModel final : public Decoder {
 public:
  NemotronHModel(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = RopeType::none;
    attn_ = ops::attention_options(cfg_);
    dims_ = read_mamba2_dims(f, arch, cfg_.n_embd);
    emb_ = ops::load_embeddings(f, cfg_);
    n_expert_ = keys.get_int("expert_count", 0);
    if (n_expert_ > 0) {
      moe_opts_.n_used = int32_t(keys.require_int("expert_used_count"));
      moe_opts_.gating = MoeGating::sigmoid;
      moe_opts_.act = ExpertAct::relu2;
      moe_opts_.normalize = f.get_bool(arch + ".expert_weights_norm", false);
      moe_opts_.scale = float(keys.get_float("expert_weights_scale", 1.0));
      n_ff_exp_ = keys.require_int("expert_feed_forward_length");
      n_ff_shared_ = keys.get_int("expert_shared_feed_forward_length", 0);
      if (moe_opts_.n_used > n_expert_) f.fail(arch + ".expert_used_count exceeds expert_count");
    }
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
  }

 private:
  NemotronLayer load_layer(const gguf::File& f, int32_t i) const {
    const std::string p = layer_prefix(i);
    const int64_t d = cfg_.n_embd;
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
      if (n_expert_ > 0) {
        l.moe = load_moe(f, p, d, n_expert_, n_ff_exp_, n_ff_shared_, ExpertAct::relu2);
        if (!l.moe.selection_bias) f.fail("tensor '" + p + "exp_probs_b.bias' is required by " + cfg_.arch);
      } else {
        l.up = ops::matrix(f, p + "ffn_up.weight", d, n_ff);
        l.down = ops::matrix(f, p + "ffn_down.weight", n_ff, d);
      }
    } else {
      l.kind = BlockKind::mamba;
      l.mixer = load_mamba2_weights(f, p, dims_);
    }
    return l;
  }

  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    switch (layers_[il].kind) {
      case BlockKind::attention: return full_kv_memory(cfg_.n_head_kv_per_layer[il], cfg_.head_dim, opts);
      case BlockKind::mamba: return recurrent_memory(mamba2_state_sizes(dims_));
      case BlockKind::mlp: break;
    }
    return recurrent_memory({});  // no memory, tracks the position
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const NemotronLayer& l = layers_[il];
    pre_norm(x, l.norm, p, [&](const float* xn, float* out) {
      switch (l.kind) {
        case BlockKind::mamba:
          return mamba2_mixer(l.mixer, dims_, il, p.seqs, xn, p.n, out, cfg_.rms_eps, p.pool);
        case BlockKind::attention:
          return ops::attention_block(l.attn, attn_, il, p.seqs, xn, p.n, out, p.pool);
        case BlockKind::mlp:
          if (n_expert_ > 0) moe_ffn(l.moe, moe_opts_, xn, p.n, out, p.pool);
          else mlp(l, xn, p.n, out, p.pool);
          for (const SeqRows& s : p.seqs) s.memory<RecurrentState>(il).advance(int32_t(s.n));
      }
    });
  }

  // out = down(relu(up xn)^2). xn, out: [n][n_embd].
  static void mlp(const NemotronLayer& l, const float* xn, int64_t n, float* out, ThreadPool& pool) {
    std::vector<float> u(size_t(n * l.up.rows));  // [n][n_ff]
    matmul(l.up, xn, n, u.data(), pool);
    for (float& v : u) v = v > 0.f ? v * v : 0.f;
    matmul(l.down, u.data(), n, out, pool);
  }

  Mamba2Dims dims_;
  ops::AttnOptions attn_;  // no RoPE
  int64_t n_expert_ = 0, n_ff_exp_ = 0, n_ff_shared_ = 0;
  MoeOptions moe_opts_;
  std::vector<NemotronLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_nemotron_h(const gguf::File& f, const std::string& arch) {
  return std::make_unique<NemotronHModel>(f, arch);
}

}  // namespace ws
