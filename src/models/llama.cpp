// Dense decoder family: llama (RoPE NORM) and qwen3 (per-head Q/K RMSNorm, RoPE NEOX).
// Pre-norm GQA attention + SwiGLU FFN, full KV cache per layer.
#include <cmath>
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"
#include <stdexcept>

namespace ws {
namespace {

struct LlamaLayer {
  const float* attn_norm;  // [n_embd]
  Matrix wq, wk, wv, wo;   // q: [n_head*hd, n_embd], k/v: [n_kv*hd, n_embd], o: [n_embd, n_head*hd]
  const float* q_norm;     // [hd] or null (qwen3)
  const float* k_norm;     // [hd] or null (qwen3)
  const float* ffn_norm;   // [n_embd]
  Matrix gate, up, down;   // gate/up: [n_ff, n_embd], down: [n_embd, n_ff]
};

class LlamaModel final : public Model {
 public:
  LlamaModel(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    cfg_.rope_type = arch == "llama" ? RopeType::norm : RopeType::neox;
    const int64_t d = cfg_.n_embd, hd = cfg_.head_dim, nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd;
    if (cfg_.n_head <= 0 || cfg_.n_ff <= 0) f.fail(arch + ": attention.head_count and feed_forward_length are required");
    tok_embd_ = ops::matrix(f, "token_embd.weight", d, cfg_.n_vocab);
    output_ = ops::optional_tensor(f, "output.weight") ? ops::matrix(f, "output.weight", d, cfg_.n_vocab) : tok_embd_;
    output_norm_ = ops::vector_f32(f, "output_norm.weight", d);
    const bool qk_norm = arch == "qwen3";
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      LlamaLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.wq = ops::matrix(f, p + "attn_q.weight", d, nq);
      l.wk = ops::matrix(f, p + "attn_k.weight", d, nkv);
      l.wv = ops::matrix(f, p + "attn_v.weight", d, nkv);
      l.wo = ops::matrix(f, p + "attn_output.weight", nq, d);
      l.q_norm = qk_norm ? ops::vector_f32(f, p + "attn_q_norm.weight", hd) : nullptr;
      l.k_norm = qk_norm ? ops::vector_f32(f, p + "attn_k_norm.weight", hd) : nullptr;
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      l.gate = ops::matrix(f, p + "ffn_gate.weight", d, cfg_.n_ff);
      l.up = ops::matrix(f, p + "ffn_up.weight", d, cfg_.n_ff);
      l.down = ops::matrix(f, p + "ffn_down.weight", cfg_.n_ff, d);
      layers_.push_back(l);
    }
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (int32_t i = 0; i < cfg_.n_layer; ++i)
      layers.push_back(std::make_unique<FullKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, opts.kv_page_size));
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(std::span<const Token> tokens, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = int64_t(tokens.size());
    if (n == 0) return;
    state.check_room(n);
    const int64_t d = cfg_.n_embd;
    std::vector<float> x(size_t(n * d));  // [n][n_embd] residual stream
    for (int64_t t = 0; t < n; ++t) {
      if (tokens[t] < 0 || tokens[t] >= cfg_.n_vocab)
        throw std::runtime_error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                                 std::to_string(cfg_.n_vocab - 1) + ")");
      get_row(tok_embd_, tokens[t], x.data() + t * d);
    }
    for (size_t il = 0; il < layers_.size(); ++il)
      layer_forward(layers_[il], static_cast<FullKvState&>(state.layer(il)), x.data(), n, state.position(), pool);
    state.advance(int32_t(n));
    if (mode == LogitsMode::none) return;
    const int64_t first = mode == LogitsMode::all ? 0 : n - 1;
    const int64_t rows = n - first;
    std::vector<float> xn(size_t(rows * d));  // [rows][n_embd]
    ops::rms_norm(x.data() + first * d, output_norm_, xn.data(), rows, d, cfg_.rms_eps);
    matmul(output_, xn.data(), rows, logits, pool);
  }

 private:
  void layer_forward(const LlamaLayer& l, FullKvState& kv, float* x, int64_t n, int32_t pos0,
                     ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd, hd = cfg_.head_dim;
    const int64_t nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd;
    std::vector<float> xn(size_t(n * d));                      // [n][n_embd] normed input
    std::vector<float> q(size_t(n * nq)), attn(size_t(n * nq));  // [n][n_head][hd]
    std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd]
    std::vector<float> o(size_t(n * d));                       // [n][n_embd] branch output
    ops::rms_norm(x, l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
    matmul(l.wq, xn.data(), n, q.data(), pool);
    matmul(l.wk, xn.data(), n, k.data(), pool);
    matmul(l.wv, xn.data(), n, v.data(), pool);
    if (l.q_norm) {
      ops::rms_norm(q.data(), l.q_norm, q.data(), n * cfg_.n_head, hd, cfg_.rms_eps);
      ops::rms_norm(k.data(), l.k_norm, k.data(), n * cfg_.n_head_kv, hd, cfg_.rms_eps);
    }
    ops::rope(q.data(), n, cfg_.n_head, int32_t(hd), cfg_.n_rot, pos0, cfg_.rope_base, cfg_.rope_type);
    ops::rope(k.data(), n, cfg_.n_head_kv, int32_t(hd), cfg_.n_rot, pos0, cfg_.rope_base, cfg_.rope_type);
    kv.append(k.data(), v.data(), int32_t(n));
    ops::attention(q.data(), kv, n, pos0, {cfg_.n_head, 1.0f / std::sqrt(float(hd)), 0}, attn.data(), pool);
    matmul(l.wo, attn.data(), n, o.data(), pool);
    ops::add_scaled(x, o.data(), n * d);

    std::vector<float> g(size_t(n * cfg_.n_ff)), u(size_t(n * cfg_.n_ff));  // [n][n_ff]
    ops::rms_norm(x, l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
    matmul(l.gate, xn.data(), n, g.data(), pool);
    matmul(l.up, xn.data(), n, u.data(), pool);
    ops::swiglu(g.data(), u.data(), n * cfg_.n_ff);
    matmul(l.down, u.data(), n, o.data(), pool);
    ops::add_scaled(x, o.data(), n * d);
  }

  ModelConfig cfg_;
  Matrix tok_embd_, output_;  // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;  // [n_embd]
  std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama_family(const gguf::File& f, const std::string& arch) {
  return std::make_unique<LlamaModel>(f, arch);
}

}  // namespace ws
