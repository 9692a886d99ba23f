// Gemma 4 (dense): Gemma 3's sandwich-normed blocks with
//   * a per-layer sliding / full pattern (a bool per layer), each kind with its own head dim,
//     KV head count, RoPE base; full layers rotate through rope_freqs divisors ("proportional"
//     RoPE) and may use the raw K projection as V (no attn_v);
//   * V RMS-normed per head without weight, attention scale 1 (Q/K norms carry the scale);
//   * KV sharing: the last attention.shared_kv_layers layers compute only Q and attend over the
//     cache of the last non-shared layer of their kind (llama.cpp's rule: n_kv-2 sliding,
//     n_kv-1 full). Their own memory is a zero-byte RecurrentState that only tracks position;
//   * per-layer embeddings (P = embedding_length_per_layer_input, 0 = none): a P-wide input per
//     token and layer, gated into the residual after the FFN;
//   * a per-layer output scale and a final tanh softcap of the logits.
// Both GELUs go through ggml-cpu's fp16 table (ops::gelu_gate), as in gemma3.
#include <cmath>
#include <string>
#include <vector>

#include "models/decoder.h"
#include "models/registry.h"

namespace ws {
namespace {

struct Gemma4Layer {
  bool sliding = false;                   // window-limited, SWA head dim / base, no rope_freqs
  int32_t kv_source = 0;                  // layer whose KV cache this one attends over (itself unless shared)
  int32_t head_dim = 0;                   // of this layer's kind
  const float* attn_norm = nullptr;       // [n_embd]
  Matrix wq;                              // [n_head * hd, n_embd]
  Matrix wk, wv;                          // [n_kv * hd, n_embd]; none in shared layers, no wv when K = V
  bool has_v = false;                     // attn_v present (else V is the raw K projection)
  Matrix wo;                              // [n_embd, n_head * hd]
  const float* q_norm = nullptr;          // [hd]
  const float* k_norm = nullptr;          // [hd], KV layers only
  const float* post_attn_norm = nullptr;  // [n_embd]
  const float* ffn_norm = nullptr;        // [n_embd]
  ops::SwigluFfn ffn;                     // gated by GELU, not SiLU; width per layer
  const float* post_ffw_norm = nullptr;   // [n_embd]
  Matrix inp_gate;                        // [P, n_embd] (P > 0 only)
  Matrix proj;                            // [n_embd, P]
  const float* post_norm = nullptr;       // [n_embd]
  float out_scale = 1.f;                  // layer_output_scale (1 when absent)
};

class Gemma4Model final : public Decoder {
 public:
  Gemma4Model(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = RopeType::neox;
    require_attention_and_ffn(f, cfg_);
    read_layout(f, keys);
    emb_ = ops::load_embeddings(f, cfg_);
    const int64_t d = cfg_.n_embd, lp = int64_t(cfg_.n_layer) * n_pl_;
    if (n_pl_ > 0) {
      pl_tok_embd_ = ops::matrix(f, "per_layer_token_embd.weight", lp, cfg_.n_vocab);
      pl_model_proj_ = ops::matrix(f, "per_layer_model_proj.weight", d, lp);
      pl_proj_norm_ = ops::vector_f32(f, "per_layer_proj_norm.weight", n_pl_);
    }
    rope_full_.freq_factors = ops::optional_vector_f32(f, "rope_freqs.weight", rope_full_.n_rot / 2);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
    embed_scale_ = std::sqrt(float(d));  // token rows only: image embeddings come ready to use
    non_causal_ok_ = true;               // image chunks attend bidirectionally
  }

 private:
  // Layer kinds, head dims, RoPE per kind, KV sharing, per-layer input width, softcap.
  void read_layout(const gguf::File& f, const ArchKeys& keys) {
    const std::string a = keys.arch() + ".";
    const auto pattern = keys.get_ints("attention.sliding_window_pattern");
    if (pattern.size() != size_t(cfg_.n_layer))
      f.fail("key '" + a + "attention.sliding_window_pattern' must hold one bool per layer (" +
             std::to_string(cfg_.n_layer) + "), found " + std::to_string(pattern.size()));
    for (int64_t v : pattern) sliding_.push_back(v != 0);
    window_ = int32_t(keys.get_int("attention.sliding_window", 0));
    hd_full_ = cfg_.head_dim;
    hd_swa_ = int32_t(keys.get_int("attention.key_length_swa", hd_full_));
    if (keys.get_int("attention.value_length", hd_full_) != hd_full_ ||
        keys.get_int("attention.value_length_swa", hd_swa_) != hd_swa_)
      f.fail("'" + a + "attention.value_length(_swa)' must equal key_length(_swa) (V is stored like K)");
    rope_full_ = {RopeType::neox, cfg_.n_rot, cfg_.rope_base};
    rope_swa_ = {RopeType::neox, int32_t(keys.get_int("rope.dimension_count_swa", hd_swa_)),
                 float(keys.get_float("rope.freq_base_swa", cfg_.rope_base))};
    if (rope_swa_.n_rot > hd_swa_ || rope_swa_.n_rot % 2)
      f.fail("'" + a + "rope.dimension_count_swa' " + std::to_string(rope_swa_.n_rot) + " is invalid");
    const int64_t shared = keys.get_int("attention.shared_kv_layers", 0);
    if (shared < 0 || shared > cfg_.n_layer)
      f.fail("'" + a + "attention.shared_kv_layers' " + std::to_string(shared) + " is out of range");
    n_kv_layers_ = cfg_.n_layer - int32_t(shared);
    n_pl_ = f.require(a + "embedding_length_per_layer_input").as_int();  // required; 0 = none
    if (n_pl_ < 0) f.fail("'" + a + "embedding_length_per_layer_input' must not be negative");
    // llama.cpp applies 30 when the key is absent; 0 disables the cap.
    softcap_ = float(keys.get_float("final_logit_softcapping", 30.0));
  }

  // The layer whose KV layer il reads: itself, or for a shared layer the last non-shared layer
  // of its kind as llama.cpp picks it (n_kv-2 if sliding, n_kv-1 if full).
  int32_t kv_source(const gguf::File& f, int32_t il) const {
    if (il < n_kv_layers_) return il;
    const int32_t src = n_kv_layers_ - (sliding_[size_t(il)] ? 2 : 1);
    if (src < 0 || sliding_[size_t(src)] != sliding_[size_t(il)])
      f.fail("layer " + std::to_string(il) + " shares KV (attention.shared_kv_layers) with layer " +
             std::to_string(src) + ", which is not a " + (sliding_[size_t(il)] ? "sliding" : "full") +
             "-attention layer with its own KV");
    return src;
  }

  Gemma4Layer load_layer(const gguf::File& f, int32_t i) const {
    const std::string p = layer_prefix(i);
    const int64_t d = cfg_.n_embd, h = cfg_.n_head, kv = cfg_.n_head_kv_per_layer[size_t(i)];
    Gemma4Layer l;
    l.sliding = sliding_[size_t(i)];
    if (l.sliding && window_ <= 0) f.fail("'" + cfg_.arch + ".attention.sliding_window' is required (sliding layers)");
    l.kv_source = kv_source(f, i);
    l.head_dim = l.sliding ? hd_swa_ : hd_full_;
    const int64_t hd = l.head_dim;
    l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
    l.wq = ops::matrix(f, p + "attn_q.weight", d, h * hd);
    l.q_norm = ops::vector_f32(f, p + "attn_q_norm.weight", hd);
    if (l.kv_source == i) {
      l.wk = ops::matrix(f, p + "attn_k.weight", d, kv * hd);
      l.k_norm = ops::vector_f32(f, p + "attn_k_norm.weight", hd);
      l.has_v = ops::optional_tensor(f, p + "attn_v.weight") != nullptr;
      if (l.has_v) l.wv = ops::matrix(f, p + "attn_v.weight", d, kv * hd);
    }
    l.wo = ops::matrix(f, p + "attn_output.weight", h * hd, d);
    l.post_attn_norm = ops::vector_f32(f, p + "post_attention_norm.weight", d);
    l.ffn_norm = ops::vector_f32(f, p + "ffn_norm.weight", d);
    l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff_per_layer[size_t(i)]);
    l.post_ffw_norm = ops::vector_f32(f, p + "post_ffw_norm.weight", d);
    if (n_pl_ > 0) {
      l.inp_gate = ops::matrix(f, p + "inp_gate.weight", d, n_pl_);
      l.proj = ops::matrix(f, p + "proj.weight", n_pl_, d);
      l.post_norm = ops::vector_f32(f, p + "post_norm.weight", d);
    }
    if (const float* s = ops::optional_vector_f32(f, p + "layer_output_scale.weight", 1)) l.out_scale = *s;
    return l;
  }

  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    const Gemma4Layer& l = layers_[il];
    // A shared layer holds no KV of its own, only its position.
    if (l.kv_source != int32_t(il)) return recurrent_memory({});
    const int32_t n_kv = cfg_.n_head_kv_per_layer[il];
    MemoryOptions o = opts;  // llama.cpp rotates a quantized cache only when every layer has one head_dim
    for (const Gemma4Layer& other : layers_) o.kv_types.rotate = o.kv_types.rotate && other.head_dim == l.head_dim;
    return l.sliding ? sliding_kv_memory(n_kv, l.head_dim, window_, o) : full_kv_memory(n_kv, l.head_dim, o);
  }

  // Per-layer inputs of the batch into p.extra: [n][n_layer][P] f32,
  // pl = (RMSNorm(proj_scale * per_layer_model_proj x, per_layer_proj_norm) + sqrt(P) * row) / sqrt(2)
  // per P-chunk, with x the scaled embedding and row the token's per_layer_token_embd row
  // (row 0 for image rows, as llama.cpp does). Same float steps as llama.cpp's graph.
  void begin_batch(const float* x, LayerPass& p) const override {
    if (n_pl_ == 0) return;
    const int64_t n = p.n, w = int64_t(cfg_.n_layer) * n_pl_;
    p.extra.resize(size_t(n * w));
    matmul(pl_model_proj_, x, n, p.extra.data(), p.pool);
    const float proj_scale = 1.0f / std::sqrt(float(cfg_.n_embd));
    for (float& v : p.extra) v *= proj_scale;
    ops::rms_norm(p.extra.data(), pl_proj_norm_, p.extra.data(), n * cfg_.n_layer, n_pl_, cfg_.rms_eps);
    const float tok_scale = std::sqrt(float(n_pl_)), in_scale = 1.0f / std::sqrt(2.0f);
    std::vector<float> row(static_cast<size_t>(w));  // [n_layer * P] f32 per-layer token embedding
    for (const SeqRows& s : p.seqs) {
      for (int64_t t = 0; t < s.n; ++t) {
        get_row(pl_tok_embd_, s.batch->embeddings ? 0 : s.batch->tokens[size_t(t)], row.data());
        float* e = p.extra.data() + (s.row0 + t) * w;
        for (int64_t i = 0; i < w; ++i) {
          const float tok = row[size_t(i)] * tok_scale;
          e[i] = (e[i] + tok) * in_scale;
        }
      }
    }
  }

  // x = (x + post_attn(attn) ; + post_ffw(ffn) ; + per-layer input) * layer_output_scale.
  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const Gemma4Layer& l = layers_[il];
    const int64_t n = p.n, d = cfg_.n_embd;
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      attention(il, l, xn, out, p);
      ops::rms_norm(out, l.post_attn_norm, out, n, d, cfg_.rms_eps);
    });
    pre_norm(x, l.ffn_norm, p, [&](const float* xn, float* out) {
      gelu_ffn(l, xn, out, p);
      ops::rms_norm(out, l.post_ffw_norm, out, n, d, cfg_.rms_eps);
    });
    if (n_pl_ > 0) per_layer_input(il, l, x, p);
    if (l.out_scale != 1.f)
      for (int64_t i = 0; i < n * d; ++i) x[i] *= l.out_scale;
  }

  // out = wo(attention(q, KV of l.kv_source)), each sequence against its own KV.
  // xn, out: [n][n_embd].
  void attention(size_t il, const Gemma4Layer& l, const float* xn, float* out, LayerPass& p) const {
    const int64_t n = p.n, hd = l.head_dim, nq = cfg_.n_head * hd;
    const ops::RopeParams& rope = l.sliding ? rope_swa_ : rope_full_;
    std::vector<float> q(size_t(n * nq)), a(size_t(n * nq));  // [n][n_head][hd] queries, attention output
    matmul(l.wq, xn, n, q.data(), p.pool);
    ops::rms_norm(q.data(), l.q_norm, q.data(), n * cfg_.n_head, hd, cfg_.rms_eps);
    for (const SeqRows& s : p.seqs) ops::rope(q.data() + s.row0 * nq, s.n, cfg_.n_head, int32_t(hd), s.pos0, rope);
    if (l.kv_source == int32_t(il))
      append_kv(l, il, xn, rope, p);
    else
      for (const SeqRows& s : p.seqs) s.memory<RecurrentState>(il).advance(int32_t(s.n));
    // The source layer ran earlier in this layer loop, so its cache already holds this batch.
    for (const SeqRows& s : p.seqs) {
      const KvStore& kv = s.memory<KvStore>(size_t(l.kv_source));
      const ops::AttentionParams ap{cfg_.n_head, 1.0f, l.sliding ? window_ : 0, s.batch->non_causal};
      ops::attention(q.data() + s.row0 * nq, kv, s.n, s.pos0, ap, a.data() + s.row0 * nq, p.pool);
    }
    matmul(l.wo, a.data(), n, out, p.pool);
  }

  // K = rope(RMSNorm_head(wk xn, k_norm)), V = RMSNorm_head(wv xn) without weight (the raw
  // K projection when the layer has no attn_v), appended to each sequence's KV of layer il.
  void append_kv(const Gemma4Layer& l, size_t il, const float* xn, const ops::RopeParams& rope, LayerPass& p) const {
    const KvStore& kv0 = p.seqs[0].memory<KvStore>(il);
    const int64_t n = p.n, n_kv = kv0.n_kv_heads(), row = kv0.row_size();
    std::vector<float> k(size_t(n * row)), v(k.size());  // [n][n_kv][hd] new keys, values
    matmul(l.wk, xn, n, k.data(), p.pool);
    if (l.has_v)
      matmul(l.wv, xn, n, v.data(), p.pool);
    else
      v = k;
    ops::rms_norm(k.data(), l.k_norm, k.data(), n * n_kv, l.head_dim, cfg_.rms_eps);
    ops::rms_norm(v.data(), nullptr, v.data(), n * n_kv, l.head_dim, cfg_.rms_eps);
    for (const SeqRows& s : p.seqs) {
      ops::rope(k.data() + s.row0 * row, s.n, int32_t(n_kv), l.head_dim, s.pos0, rope);
      s.memory<KvStore>(il).append(k.data() + s.row0 * row, v.data() + s.row0 * row, int32_t(s.n));
    }
  }

  // out = ffn_down(gelu(ffn_gate xn) * ffn_up xn). xn, out: [n][n_embd].
  static void gelu_ffn(const Gemma4Layer& l, const float* xn, float* out, LayerPass& p) {
    const int64_t n = p.n, ff = l.ffn.gate.rows;
    std::vector<float> g(size_t(n * ff)), u(size_t(n * ff));  // [n][n_ff] gate, up
    matmul(l.ffn.gate, xn, n, g.data(), p.pool);
    matmul(l.ffn.up, xn, n, u.data(), p.pool);
    p.pool.parallel_for(n, ThreadPool::rows_grain(ff), [&](int64_t t0, int64_t t1) {
      ops::gelu_gate(g.data() + t0 * ff, u.data() + t0 * ff, (t1 - t0) * ff);
    });
    matmul(l.ffn.down, u.data(), n, out, p.pool);
  }

  // x += RMSNorm(proj(gelu(inp_gate x) * pl[il]), post_norm); inp_gate sees the raw residual.
  void per_layer_input(size_t il, const Gemma4Layer& l, float* x, LayerPass& p) const {
    const int64_t n = p.n, d = cfg_.n_embd, w = int64_t(cfg_.n_layer) * n_pl_;
    std::vector<float> g(size_t(n * n_pl_)), gp(g.size());  // [n][P] gate, gated per-layer input
    matmul(l.inp_gate, x, n, g.data(), p.pool);
    for (int64_t t = 0; t < n; ++t) {
      const float* pl = p.extra.data() + t * w + int64_t(il) * n_pl_;
      std::copy(pl, pl + n_pl_, gp.data() + t * n_pl_);
    }
    ops::gelu_gate(g.data(), gp.data(), n * n_pl_);
    matmul(l.proj, gp.data(), n, p.out.data(), p.pool);
    ops::rms_norm(p.out.data(), l.post_norm, p.out.data(), n, d, cfg_.rms_eps);
    ops::add_scaled(x, p.out.data(), n * d);
  }

  // logits = cap * tanh(logits / cap), in llama.cpp's steps (scale by 1/cap, tanh, scale).
  void finish_logits(float* logits, int64_t rows) const override {
    if (softcap_ == 0.f) return;
    const float inv = 1.0f / softcap_;
    for (int64_t i = 0; i < rows * cfg_.n_vocab; ++i) logits[i] = std::tanh(logits[i] * inv) * softcap_;
  }

  std::vector<bool> sliding_;            // [n_layer] attention.sliding_window_pattern
  int32_t window_ = 0;                   // sliding window (positions a query sees, itself included)
  int32_t hd_full_ = 0, hd_swa_ = 0;     // head dims of full / sliding layers
  ops::RopeParams rope_full_;            // rope.freq_base over rope.dimension_count, rope_freqs divisors
  ops::RopeParams rope_swa_;             // rope.freq_base_swa over rope.dimension_count_swa
  int32_t n_kv_layers_ = 0;              // layers with their own KV (the rest share)
  int64_t n_pl_ = 0;                     // P: per-layer input width, 0 = no per-layer embeddings
  Matrix pl_tok_embd_;                   // [n_vocab, n_layer * P]
  Matrix pl_model_proj_;                 // [n_layer * P, n_embd]
  const float* pl_proj_norm_ = nullptr;  // [P]
  float softcap_ = 30.f;                 // final_logit_softcapping, 0 = none
  std::vector<Gemma4Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gemma4(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Gemma4Model>(f, arch);
}

}  // namespace ws
