// Qwen3.5 dense (qwen35): a hybrid of gated delta net (GDN) layers and gated full
// attention every `full_attention_interval` layers. Every layer is
//   h = x + mixer(RMSNorm(x, attn_norm)),  x = h + SwiGLU(RMSNorm(h, post_attention_norm)).
// Full attention layers keep paged KV; GDN layers keep one RecurrentState holding the
// causal-conv tail and the delta-net state matrix of every v-head. The recurrence runs
// token by token in a fixed order, so a token's result never depends on the micro-batch.
// qwen35moe (Qwen3.5-35B-A3B): the same mixers; every FFN is a softmax-routed mixture of
// experts plus a shared expert gated by sigmoid(ffn_gate_inp_shexp . u).
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/decoder.h"
#include "models/moe.h"
#include "models/registry.h"

namespace ws {
namespace {

struct GdnShape {
  int32_t n_k_heads = 0;  // Gk: q/k heads (ssm.group_count)
  int32_t n_v_heads = 0;  // Hv: v heads (ssm.time_step_rank)
  int32_t dk = 0;         // key/query length per head (ssm.state_size)
  int32_t dv = 0;         // value length per head (ssm.inner_size / Hv)
  int32_t conv_k = 0;     // causal conv kernel length (ssm.conv_kernel)
  int64_t qk_dim() const { return int64_t(n_k_heads) * dk; }
  int64_t v_dim() const { return int64_t(n_v_heads) * dv; }
  int64_t conv_ch() const { return 2 * qk_dim() + v_dim(); }  // [q, k, v] channels of attn_qkv
};

struct Qwen35Layer {
  bool full_attn = false;
  const float* attn_norm;        // [n_embd]
  const float* post_norm;        // [n_embd] post_attention_norm, before the FFN
  ops::AttnWeights attn;         // gated full attention: attn_q yields per head [query (hd), gate (hd)]
  // Gated delta net.
  Matrix wqkv;                   // [conv_ch, n_embd]
  Matrix wz;                     // [Hv * dv, n_embd] attn_gate: the output gate z
  Matrix wbeta, walpha;          // [Hv, n_embd]
  const float* conv_w;           // [conv_ch][conv_k] f32 (ggml {conv_k, conv_ch})
  const float* dt_bias;          // [Hv]
  const float* ssm_a;            // [Hv] = -exp(A_log)
  const float* ssm_norm;         // [dv]
  Matrix wssm_out;               // [n_embd, Hv * dv]
  ops::SwigluFfn ffn;            // qwen35
  MoeWeights moe;                // qwen35moe
};

class Qwen35Model final : public Decoder {
 public:
  Qwen35Model(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    cfg_.rope_type = RopeType::neox;  // IMROPE with equal position components == NEOX over n_rot dims
    const ArchKeys keys(f, arch);
    if (arch == "qwen35moe") {
      n_expert_ = keys.require_int("expert_count");
      n_ff_exp_ = keys.require_int("expert_feed_forward_length");
      n_ff_shared_ = keys.get_int("expert_shared_feed_forward_length", 0);
      moe_opts_.n_used = int32_t(keys.require_int("expert_used_count"));
      if (moe_opts_.n_used > n_expert_) f.fail(arch + ".expert_used_count exceeds expert_count");
      cfg_.n_ff_per_layer.assign(size_t(cfg_.n_layer), 1);  // no dense FFN: feed_forward_length is not written
    }
    require_attention_and_ffn(f, cfg_);
    interval_ = int32_t(keys.require_int("full_attention_interval"));
    gdn_.n_k_heads = int32_t(keys.require_int("ssm.group_count"));
    gdn_.n_v_heads = int32_t(keys.require_int("ssm.time_step_rank"));
    gdn_.dk = int32_t(keys.require_int("ssm.state_size"));
    gdn_.conv_k = int32_t(keys.require_int("ssm.conv_kernel"));
    const int64_t inner = keys.require_int("ssm.inner_size");
    if (inner % gdn_.n_v_heads != 0 || gdn_.n_v_heads % gdn_.n_k_heads != 0)
      f.fail(arch + ": ssm.inner_size " + std::to_string(inner) + " / time_step_rank " +
             std::to_string(gdn_.n_v_heads) + " / group_count " + std::to_string(gdn_.n_k_heads) + " are inconsistent");
    gdn_.dv = int32_t(inner / gdn_.n_v_heads);
    emb_ = ops::load_embeddings(f, cfg_);
    attn_ = ops::attention_options(cfg_);
    read_mrope_sections(f, keys);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(load_layer(f, i));
  }

 private:
  // llama.cpp runs qwen35 with interleaved M-RoPE (IMROPE): text rows carry equal position
  // components, which is plain NEOX RoPE, but image rows get distinct height / width components
  // in these sections (Batch::positions). Without the key only text is sensible.
  void read_mrope_sections(const gguf::File& f, const ArchKeys& keys) {
    const auto sec = keys.get_ints("rope.dimension_sections");
    if (sec.empty()) return;
    int64_t sum = 0;
    for (size_t i = 0; i < sec.size() && i < 4; ++i) {
      if (sec[i] < 0) f.fail(cfg_.arch + ".rope.dimension_sections must not be negative");
      attn_.rope.sections[i] = int32_t(sec[i]);
      sum += sec[i];
    }
    if (sec.size() > 4 || sum <= 0 || sum > cfg_.head_dim)  // ggml's limit: sections fit in a head
      f.fail(cfg_.arch + ".rope.dimension_sections must hold at most 4 sections totalling 1.." +
             std::to_string(cfg_.head_dim) + " (the head size)");
    cfg_.mrope = true;
  }

  std::unique_ptr<LayerState> layer_memory(size_t il, const MemoryOptions& opts) const override {
    if (layers_[il].full_attn) return full_kv_memory(cfg_.n_head_kv, cfg_.head_dim, opts);
    // buffer 0: conv tail [conv_k-1][conv_ch]; buffer 1: S [Hv][dk][dv]
    return recurrent_memory({size_t(gdn_.conv_k - 1) * size_t(gdn_.conv_ch()),
                             size_t(gdn_.n_v_heads) * size_t(gdn_.dk) * size_t(gdn_.dv)});
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    const Qwen35Layer& l = layers_[il];
    pre_norm(x, l.attn_norm, p, [&](const float* xn, float* out) {
      if (l.full_attn) attention(l, il, xn, p, out);
      else delta_net(l, il, xn, p, out);
    });
    pre_norm(x, l.post_norm, p, [&](const float* xn, float* out) {
      if (n_expert_ > 0) moe_ffn(l.moe, moe_opts_, xn, p.n, out, p.pool);
      else ops::swiglu_ffn(l.ffn, xn, p.n, out, p.pool);
    });
  }

  Qwen35Layer load_layer(const gguf::File& f, int32_t i) const {
    const std::string p = layer_prefix(i);
    const int64_t d = cfg_.n_embd;
    Qwen35Layer l{};
    l.full_attn = (i + 1) % interval_ == 0;
    l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", d);
    l.post_norm = ops::vector_f32(f, p + "post_attention_norm.weight", d);
    if (l.full_attn) {
      l.attn = ops::load_attention(f, p, d, cfg_.n_head, cfg_.n_head_kv, cfg_.head_dim, /*qk_norm=*/true,
                                   /*q_factor=*/2);
    } else {
      const int64_t hv = gdn_.n_v_heads;
      l.wqkv = ops::matrix(f, p + "attn_qkv.weight", d, gdn_.conv_ch());
      l.wz = ops::matrix(f, p + "attn_gate.weight", d, gdn_.v_dim());
      l.wbeta = ops::matrix(f, p + "ssm_beta.weight", d, hv);
      l.walpha = ops::matrix(f, p + "ssm_alpha.weight", d, hv);
      l.conv_w = ops::vector_f32(f, p + "ssm_conv1d.weight", gdn_.conv_ch() * gdn_.conv_k);
      l.dt_bias = ops::vector_f32(f, p + "ssm_dt.bias", hv);
      l.ssm_a = ops::vector_f32(f, p + "ssm_a", hv);
      l.ssm_norm = ops::vector_f32(f, p + "ssm_norm.weight", gdn_.dv);
      l.wssm_out = ops::matrix(f, p + "ssm_out.weight", gdn_.v_dim(), d);
    }
    if (n_expert_ > 0) l.moe = load_moe(f, p, d, n_expert_, n_ff_exp_, n_ff_shared_, ExpertAct::swiglu);
    else l.ffn = ops::load_swiglu(f, p, d, cfg_.n_ff);
    return l;
  }

  // Gated full attention: out = attn_output(attention(q, k, v) * sigmoid(gate)). out: [n][n_embd].
  // Each sequence attends over its own KV (layer il), rotated at its batch's M-RoPE positions
  // when it has them (image rows and the text after).
  void attention(const Qwen35Layer& l, size_t il, const float* xn, const LayerPass& p, float* out) const {
    const int64_t n = p.n;
    ThreadPool& pool = p.pool;
    const int64_t hd = cfg_.head_dim, nh = cfg_.n_head, nq = nh * hd, nkv = cfg_.n_head_kv * hd;
    std::vector<float> qg(size_t(n * 2 * nq));                   // [n][n_head][query hd | gate hd]
    std::vector<float> q(size_t(n * nq)), gate(size_t(n * nq));  // [n][n_head][hd]
    std::vector<float> attn(size_t(n * nq));                     // [n][n_head][hd]
    std::vector<float> k(size_t(n * nkv)), v(size_t(n * nkv));   // [n][n_kv][hd]
    matmul(l.attn.wq, xn, n, qg.data(), pool);
    matmul(l.attn.wk, xn, n, k.data(), pool);
    matmul(l.attn.wv, xn, n, v.data(), pool);
    for (int64_t r = 0; r < n * nh; ++r) {  // de-interleave the per-head [query, gate] pairs
      std::copy_n(qg.data() + r * 2 * hd, hd, q.data() + r * hd);
      std::copy_n(qg.data() + r * 2 * hd + hd, hd, gate.data() + r * hd);
    }
    for (const SeqRows& s : p.seqs)
      ops::attend(l.attn, attn_, s.memory<FullKvState>(il), q.data() + s.row0 * nq, k.data() + s.row0 * nkv,
                  v.data() + s.row0 * nkv, s.n, s.pos0, attn.data() + s.row0 * nq, pool, s.batch->positions);
    for (int64_t i = 0; i < n * nq; ++i) attn[i] *= ops::sigmoid(gate[i]);
    matmul(l.attn.wo, attn.data(), n, out, pool);
  }

  // The delta-rule recurrence of v-head h over n tokens, in token order:
  //   S <- S*exp(g); delta = beta*(v - S^T k); S <- S + k delta^T; o = S^T q / sqrt(dk).
  // S: [dk][dv]; qkv: [n][conv_ch] after conv (q, k L2-normalised); o: [n][Hv][dv].
  void recur_head(int32_t h, float* S, const float* qkv, const float* beta, const float* g, int64_t n,
                  float* o) const {
    const int64_t dk = gdn_.dk, dv = gdn_.dv, ch = gdn_.conv_ch(), hv = gdn_.n_v_heads;
    const int64_t hk = h % gdn_.n_k_heads;  // v-heads tile the q/k heads
    const float scale = 1.0f / std::sqrt(float(dk));
    for (int64_t t = 0; t < n; ++t) {
      const float* q = qkv + t * ch + hk * dk;
      const float* k = qkv + t * ch + gdn_.qk_dim() + hk * dk;
      const float* v = qkv + t * ch + 2 * gdn_.qk_dim() + h * dv;
      const float decay = std::exp(g[t * hv + h]), b = beta[t * hv + h];
      ops::delta_rule_token(S, k, q, v, decay, b, scale, dk, dv, o + (t * hv + h) * dv);
    }
  }

  // Gated delta net mixer; each sequence updates its own memory of layer il (conv tail, S)
  // and advances it by its rows. out: [n][n_embd].
  void delta_net(const Qwen35Layer& l, size_t il, const float* xn, const LayerPass& p, float* out) const {
    const int64_t n = p.n;
    ThreadPool& pool = p.pool;
    const int64_t ch = gdn_.conv_ch(), hv = gdn_.n_v_heads, dv = gdn_.dv, vd = gdn_.v_dim();
    std::vector<float> qkv(size_t(n * ch));                      // [n][conv_ch]: q [Gk][dk], k [Gk][dk], v [Hv][dv]
    std::vector<float> z(size_t(n * vd));                        // [n][Hv][dv] output gate
    std::vector<float> beta(size_t(n * hv)), g(size_t(n * hv));  // [n][Hv]
    std::vector<float> o(size_t(n * vd));                        // [n][Hv][dv] recurrence output
    matmul(l.wqkv, xn, n, qkv.data(), pool);
    matmul(l.wz, xn, n, z.data(), pool);
    matmul(l.wbeta, xn, n, beta.data(), pool);
    matmul(l.walpha, xn, n, g.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < hv; ++h) {
        float& b = beta[size_t(t * hv + h)];
        float& a = g[size_t(t * hv + h)];
        b = ops::sigmoid(b);
        a = ops::softplus(a + l.dt_bias[h]) * l.ssm_a[h];
      }
    }
    for (const SeqRows& s : p.seqs) {
      float* rows = qkv.data() + s.row0 * ch;
      ops::causal_conv(l.conv_w, nullptr, gdn_.conv_k, s.memory<RecurrentState>(il).buffer(0).data(), rows, ch, s.n,
                       ch, rows, pool);
    }
    ops::silu_rows(qkv.data(), n, ch, pool);
    for (int64_t t = 0; t < n; ++t) {  // q and k are the first 2*Gk rows of dk in each token's row
      ops::l2_norm(qkv.data() + t * ch, 2 * gdn_.n_k_heads, gdn_.dk, cfg_.rms_eps);
    }
    for (const SeqRows& s : p.seqs) {
      RecurrentState& rs = s.memory<RecurrentState>(il);
      float* S = rs.buffer(1).data();  // [Hv][dk][dv]
      const int64_t r = s.row0;
      // v-heads are independent; each one runs its tokens in order on one thread.
      pool.parallel_for(hv, 1, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h)
          recur_head(int32_t(h), S + h * gdn_.dk * dv, qkv.data() + r * ch, beta.data() + r * hv, g.data() + r * hv,
                     s.n, o.data() + r * vd);
      });
      rs.advance(int32_t(s.n));
    }
    ops::rms_norm(o.data(), l.ssm_norm, o.data(), n * hv, dv, cfg_.rms_eps);
    ops::swiglu(z.data(), o.data(), n * vd);  // o *= silu(z)
    matmul(l.wssm_out, o.data(), n, out, pool);
  }

  GdnShape gdn_;
  int32_t interval_ = 0;  // every interval-th layer is full attention
  ops::AttnOptions attn_;
  int64_t n_expert_ = 0, n_ff_exp_ = 0, n_ff_shared_ = 0;  // qwen35moe
  MoeOptions moe_opts_;  // softmax gating, weights normalised, no scale
  std::vector<Qwen35Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen35(const gguf::File& f, const std::string& arch) {
  return std::make_unique<Qwen35Model>(f, arch);
}

}  // namespace ws
