// Gemma 3: interleaved sliding-window / global attention, Q/K RMSNorm, NEOX RoPE with a
// different base per layer kind, sandwich norms (post_attention_norm, post_ffw_norm) and
// a GELU-gated FFN. Sliding layers keep only their window (SlidingKvState); global
// layers keep everything (FullKvState).
#include <cmath>
#include <stdexcept>
#include <vector>

#include "models/config.h"
#include "models/ops.h"
#include "models/registry.h"

namespace ws {
namespace {

struct Gemma3Layer {
  bool sliding;              // window-limited attention with the SWA rope base
  const float* attn_norm;    // [n_embd]
  Matrix wq, wk, wv, wo;     // q: [n_head*hd, n_embd], k/v: [n_kv*hd, n_embd], o: [n_embd, n_head*hd]
  const float* q_norm;       // [hd]
  const float* k_norm;       // [hd]
  const float* post_attn_norm;  // [n_embd]
  const float* ffn_norm;     // [n_embd]
  Matrix gate, up, down;     // gate/up: [n_ff, n_embd], down: [n_embd, n_ff]
  const float* post_ffw_norm;   // [n_embd]
};

// tanh-approximated GELU evaluated in f32, the formula GGUF runtimes tabulate.
float gelu_tanh_f32(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

class Gemma3Model final : public Model {
 public:
  Gemma3Model(const gguf::File& f, const std::string& arch) : cfg_(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = RopeType::neox;
    if (cfg_.n_head <= 0 || cfg_.n_ff <= 0) f.fail(arch + ": attention.head_count and feed_forward_length are required");
    window_ = int32_t(keys.require_int("attention.sliding_window"));
    // Real Gemma 3 files may omit the pattern; llama.cpp then uses 6 (5 sliding, 1 global).
    const int64_t pattern = keys.get_int("attention.sliding_window_pattern", 6);
    if (pattern <= 0) f.fail(arch + ".attention.sliding_window_pattern must be positive");
    rope_base_swa_ = float(keys.get_float("rope.freq_base_swa", 10000.0));
    // llama.cpp scales Q by 1/sqrt(head_dim) after RoPE and calls attention with scale 1.
    q_scale_ = 1.0f / std::sqrt(float(cfg_.head_dim));
    build_gelu_table();
    load_weights(f, pattern);
  }

  const ModelConfig& config() const override { return cfg_; }

  SeqState make_state(const MemoryOptions& opts) const override {
    std::vector<std::unique_ptr<LayerState>> layers;
    for (const auto& l : layers_) {
      if (l.sliding)
        layers.push_back(
            std::make_unique<SlidingKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, window_, opts.swa_slack));
      else
        layers.push_back(std::make_unique<FullKvState>(cfg_.n_head_kv, cfg_.head_dim, opts.kv_type, opts.kv_page_size));
    }
    return SeqState(std::move(layers), opts.n_ctx, cfg_.model_id);
  }

  void forward(std::span<const Token> tokens, SeqState& state, LogitsMode mode, float* logits,
               ThreadPool& pool) const override {
    const int64_t n = int64_t(tokens.size());
    if (n == 0) return;
    state.check_room(n);
    const int64_t d = cfg_.n_embd;
    const float emb_scale = std::sqrt(float(d));
    std::vector<float> x(size_t(n * d));  // [n][n_embd] residual stream
    for (int64_t t = 0; t < n; ++t) {
      if (tokens[t] < 0 || tokens[t] >= cfg_.n_vocab)
        throw std::runtime_error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                                 std::to_string(cfg_.n_vocab - 1) + ")");
      float* row = x.data() + t * d;
      get_row(tok_embd_, tokens[t], row);
      for (int64_t i = 0; i < d; ++i) row[i] *= emb_scale;
    }
    for (size_t il = 0; il < layers_.size(); ++il)
      layer_forward(layers_[il], static_cast<KvStore&>(state.layer(il)), x.data(), n, state.position(), pool);
    state.advance(int32_t(n));
    if (mode == LogitsMode::none) return;
    const int64_t first = mode == LogitsMode::all ? 0 : n - 1;
    const int64_t rows = n - first;
    std::vector<float> xn(size_t(rows * d));  // [rows][n_embd]
    ops::rms_norm(x.data() + first * d, output_norm_, xn.data(), rows, d, cfg_.rms_eps);
    matmul(output_, xn.data(), rows, logits, pool);
  }

 private:
  void load_weights(const gguf::File& f, int64_t pattern) {
    const int64_t d = cfg_.n_embd, hd = cfg_.head_dim, nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd;
    tok_embd_ = ops::matrix(f, "token_embd.weight", d, cfg_.n_vocab);
    output_ = ops::optional_tensor(f, "output.weight") ? ops::matrix(f, "output.weight", d, cfg_.n_vocab) : tok_embd_;
    output_norm_ = ops::vector_f32(f, "output_norm.weight", d);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = "blk." + std::to_string(i) + ".";
      Gemma3Layer l{};
      l.sliding = i % pattern < pattern - 1;
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
      l.wq = ops::matrix(f, p + "attn_q.weight", d, nq);
      l.wk = ops::matrix(f, p + "attn_k.weight", d, nkv);
      l.wv = ops::matrix(f, p + "attn_v.weight", d, nkv);
      l.wo = ops::matrix(f, p + "attn_output.weight", nq, d);
      l.q_norm = ops::vector_f32(f, p + "attn_q_norm.weight", hd);
      l.k_norm = ops::vector_f32(f, p + "attn_k_norm.weight", hd);
      l.post_attn_norm = ops::vector_f32(f, p + "post_attention_norm.weight", d);
      l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
      l.gate = ops::matrix(f, p + "ffn_gate.weight", d, cfg_.n_ff);
      l.up = ops::matrix(f, p + "ffn_up.weight", d, cfg_.n_ff);
      l.down = ops::matrix(f, p + "ffn_down.weight", cfg_.n_ff, d);
      l.post_ffw_norm = ops::vector_f32(f, p + "post_ffw_norm.weight", d);
      layers_.push_back(l);
    }
  }

  // ggml-cpu evaluates GELU through a table indexed by the fp16 bits of the input, holding
  // fp16(gelu(x)). Reproducing it keeps us within float rounding of llama.cpp instead of
  // ~1e-3 away.
  void build_gelu_table() {
    gelu_table_.resize(65536);
    for (uint32_t i = 0; i < 65536; ++i)
      gelu_table_[i] = f16_to_f32(f32_to_f16(gelu_tanh_f32(f16_to_f32(f16_bits(i)))));
  }

  // u[i] = gelu(g[i]) * u[i], GELU through the fp16 table (saturated outside [-10, 10]).
  void gelu_gate(const float* g, float* u, int64_t n) const {
    for (int64_t i = 0; i < n; ++i) {
      const float v = g[i];
      if (v <= -10.0f) u[i] = 0.0f;
      else if (v >= 10.0f) u[i] = v * u[i];
      else u[i] = gelu_table_[f32_to_f16(v)] * u[i];
    }
  }

  void layer_forward(const Gemma3Layer& l, KvStore& kv, float* x, int64_t n, int32_t pos0, ThreadPool& pool) const {
    const int64_t d = cfg_.n_embd, hd = cfg_.head_dim;
    const int64_t nq = cfg_.n_head * hd, nkv = cfg_.n_head_kv * hd;
    std::vector<float> xn(size_t(n * d));                        // [n][n_embd] normed input
    std::vector<float> q(size_t(n * nq)), attn(size_t(n * nq));  // [n][n_head][hd]
    std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd]
    std::vector<float> o(size_t(n * d));                         // [n][n_embd] branch output
    ops::rms_norm(x, l.attn_norm, xn.data(), n, d, cfg_.rms_eps);
    matmul(l.wq, xn.data(), n, q.data(), pool);
    matmul(l.wk, xn.data(), n, k.data(), pool);
    matmul(l.wv, xn.data(), n, v.data(), pool);
    ops::rms_norm(q.data(), l.q_norm, q.data(), n * cfg_.n_head, hd, cfg_.rms_eps);
    ops::rms_norm(k.data(), l.k_norm, k.data(), n * cfg_.n_head_kv, hd, cfg_.rms_eps);
    const float base = l.sliding ? rope_base_swa_ : cfg_.rope_base;
    ops::rope(q.data(), n, cfg_.n_head, int32_t(hd), cfg_.n_rot, pos0, base, RopeType::neox);
    ops::rope(k.data(), n, cfg_.n_head_kv, int32_t(hd), cfg_.n_rot, pos0, base, RopeType::neox);
    for (float& e : q) e *= q_scale_;
    kv.append(k.data(), v.data(), int32_t(n));
    ops::attention(q.data(), kv, n, pos0, {cfg_.n_head, 1.0f, l.sliding ? window_ : 0}, attn.data(), pool);
    matmul(l.wo, attn.data(), n, o.data(), pool);
    ops::rms_norm(o.data(), l.post_attn_norm, o.data(), n, d, cfg_.rms_eps);
    ops::add_scaled(x, o.data(), n * d);

    std::vector<float> g(size_t(n * cfg_.n_ff)), u(size_t(n * cfg_.n_ff));  // [n][n_ff]
    ops::rms_norm(x, l.ffn_norm, xn.data(), n, d, cfg_.rms_eps);
    matmul(l.gate, xn.data(), n, g.data(), pool);
    matmul(l.up, xn.data(), n, u.data(), pool);
    gelu_gate(g.data(), u.data(), n * cfg_.n_ff);
    matmul(l.down, u.data(), n, o.data(), pool);
    ops::rms_norm(o.data(), l.post_ffw_norm, o.data(), n, d, cfg_.rms_eps);
    ops::add_scaled(x, o.data(), n * d);
  }

  ModelConfig cfg_;
  int32_t window_ = 0;             // sliding window (positions a query sees, itself included)
  float rope_base_swa_ = 10000.f;  // RoPE base of the sliding layers
  float q_scale_ = 1.f;            // multiplies Q after RoPE
  std::vector<float> gelu_table_;  // [65536] f32: fp16(gelu(x)) indexed by fp16 bits of x
  Matrix tok_embd_, output_;       // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;  // [n_embd]
  std::vector<Gemma3Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gemma3(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Gemma3Model>(f, arch);
}

}  // namespace ws
