// Mamba-1: every layer is x += mixer(RMSNorm(x)), the mixer a causal depthwise conv
// followed by a selective scan with a per-channel diagonal state. Each layer's memory is
// one RecurrentState holding two buffers: the conv tail and the SSM state. Recurrences
// run token by token in a fixed order, so results never depend on the micro-batch split.
#include <cmath>
#include <vector>

#include "models/decoder.h"
#include "models/registry.h"

namespace ws {
namespace {

struct MambaLayer {
  const float* attn_norm;  // [n_embd]
  Matrix in;               // [2*d_inner, n_embd]: x then z
  const float* conv_w;     // [d_inner][d_conv]: tap k of channel c at c*d_conv + k (k = d_conv-1 is the current token)
  const float* conv_b;     // [d_inner]
  Matrix x_proj;           // [dt_rank + 2*d_state, d_inner]: dt, B, C
  Matrix dt_proj;          // [d_inner, dt_rank]
  const float* dt_b;       // [d_inner]
  const float* a;          // [d_inner][d_state]: A = -exp(A_log), as stored
  const float* d;          // [d_inner]
  Matrix out;              // [n_embd, d_inner]
};

class MambaModel final : public Decoder {
 public:
  MambaModel(const gguf::File& f, const std::string& arch) : Decoder(read_common_config(f, arch)) {
    const ArchKeys keys(f, arch);
    cfg_.rope_type = RopeType::none;
    d_inner_ = keys.require_int("ssm.inner_size");
    d_state_ = keys.require_int("ssm.state_size");
    dt_rank_ = keys.require_int("ssm.time_step_rank");
    d_conv_ = keys.require_int("ssm.conv_kernel");
    if (f.get_int(arch + ".ssm.dt_b_c_rms", 0) != 0)
      f.fail(arch + ".ssm.dt_b_c_rms = true (Falcon-Mamba style dt/B/C norms) is not supported yet");
    load_weights(f);
  }

 private:
  std::unique_ptr<LayerState> layer_memory(size_t, const MemoryOptions&) const override {
    // buffer 0: conv tail [d_conv-1][d_inner], buffer 1: SSM state [d_inner][d_state]
    return recurrent_memory({size_t((d_conv_ - 1) * d_inner_), size_t(d_inner_ * d_state_)});
  }

  void layer_forward(size_t il, float* x, LayerPass& p) const override {
    pre_norm(x, layers_[il].attn_norm, p, [&](const float* xn, float* out) {
      mixer(layers_[il], il, p, xn, out);
    });
  }

  void load_weights(const gguf::File& f) {
    const int64_t de = cfg_.n_embd;
    emb_ = ops::load_embeddings(f, cfg_);
    for (int32_t i = 0; i < cfg_.n_layer; ++i) {
      const std::string p = layer_prefix(i);
      MambaLayer l{};
      l.attn_norm = ops::vector_f32(f, p + "attn_norm.weight", de);
      l.in = ops::matrix(f, p + "ssm_in.weight", de, 2 * d_inner_);
      l.conv_w = ops::vector_f32(f, p + "ssm_conv1d.weight", d_conv_ * d_inner_);
      l.conv_b = ops::vector_f32(f, p + "ssm_conv1d.bias", d_inner_);
      l.x_proj = ops::matrix(f, p + "ssm_x.weight", d_inner_, dt_rank_ + 2 * d_state_);
      l.dt_proj = ops::matrix(f, p + "ssm_dt.weight", dt_rank_, d_inner_);
      l.dt_b = ops::vector_f32(f, p + "ssm_dt.bias", d_inner_);
      l.a = ops::vector_f32(f, p + "ssm_a", d_state_ * d_inner_);
      l.d = ops::vector_f32(f, p + "ssm_d", d_inner_);
      l.out = ops::matrix(f, p + "ssm_out.weight", d_inner_, de);
      layers_.push_back(l);
    }
  }

  // The selective scan: per channel c, s = s*exp(dt*A) + dt*x*B, y = C.s + D*x, then
  // y *= silu(z). Channels are independent, so they may run on any thread.
  void scan(const MambaLayer& l, std::span<float> ssm, const float* xs, const float* dt, const float* xdb,
            const float* xz, float* y, int64_t n, ThreadPool& pool) const {
    const int64_t di = d_inner_, ns = d_state_, nx = dt_rank_ + 2 * d_state_;
    pool.parallel_for(di, 16, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        float* s = ssm.data() + c * ns;
        const float* a = l.a + c * ns;
        for (int64_t t = 0; t < n; ++t) {
          const float* b = xdb + t * nx + dt_rank_;
          const float* cc = b + ns;
          const float dtp = ops::softplus(dt[t * di + c] + l.dt_b[c]);
          const float x_dt = xs[t * di + c] * dtp;
          float sum = 0.0f;
          for (int64_t j = 0; j < ns; ++j) {
            s[j] = s[j] * std::exp(dtp * a[j]) + b[j] * x_dt;
            sum += s[j] * cc[j];
          }
          const float yc = sum + xs[t * di + c] * l.d[c];
          y[t * di + c] = yc * ops::silu(xz[t * 2 * di + di + c]);
        }
      }
    });
  }

  // u: [n][n_embd] normed input, out: [n][n_embd] mixer output. Each sequence convolves and
  // scans its own rows from its own state (layer il's memory).
  void mixer(const MambaLayer& l, size_t il, const LayerPass& p, const float* u, float* out) const {
    const int64_t n = p.n;
    ThreadPool& pool = p.pool;
    const int64_t di = d_inner_, nx = dt_rank_ + 2 * d_state_;
    std::vector<float> xz(size_t(n * 2 * di));  // [n][2*d_inner]: x then z
    std::vector<float> xs(size_t(n * di));      // [n][d_inner] conv + SiLU output
    std::vector<float> xdb(size_t(n * nx));     // [n][dt_rank + 2*d_state]: dt, B, C
    std::vector<float> dtr(size_t(n * dt_rank_));  // [n][dt_rank] low-rank dt, contiguous for matmul
    std::vector<float> dt(size_t(n * di));      // [n][d_inner] dt before bias and softplus
    std::vector<float> y(size_t(n * di));       // [n][d_inner] gated scan output
    matmul(l.in, u, n, xz.data(), pool);
    for (const SeqRows& s : p.seqs)
      ops::causal_conv(l.conv_w, l.conv_b, d_conv_, s.memory<RecurrentState>(il).buffer(0).data(),
                       xz.data() + s.row0 * 2 * di, 2 * di, s.n, di, xs.data() + s.row0 * di, pool);
    ops::silu_rows(xs.data(), n, di, pool);
    matmul(l.x_proj, xs.data(), n, xdb.data(), pool);
    for (int64_t t = 0; t < n; ++t) std::copy_n(xdb.data() + t * nx, dt_rank_, dtr.data() + t * dt_rank_);
    matmul(l.dt_proj, dtr.data(), n, dt.data(), pool);
    for (const SeqRows& s : p.seqs) {
      RecurrentState& st = s.memory<RecurrentState>(il);
      const int64_t r = s.row0;
      scan(l, st.buffer(1), xs.data() + r * di, dt.data() + r * di, xdb.data() + r * nx, xz.data() + r * 2 * di,
           y.data() + r * di, s.n, pool);
      st.advance(int32_t(s.n));
    }
    matmul(l.out, y.data(), n, out, pool);
  }

  int64_t d_inner_ = 0, d_state_ = 0, dt_rank_ = 0, d_conv_ = 0;
  std::vector<MambaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_mamba(const gguf::File& f, const std::string& arch) {
  return std::make_unique<MambaModel>(f, arch);
}

}  // namespace ws
