#include "models/mamba2_mixer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "models/ops.h"
#include "models/registry.h"
#include "tensor/attn_kernels.h"

namespace ws {
namespace {

// Selective scan, head by head, token by token in order; y = C.s + D x.
//   xbc: [n][C] conv output (x | B | C), dt: [n][dt_stride] raw dt (first H columns),
//   s: [H][P][N] state (updated), y: [n][d_inner].
void selective_scan(const Mamba2Weights& w, const Mamba2Dims& d, const float* xbc, const float* dt, int64_t dt_stride,
                    int64_t n, float* s, float* y, ThreadPool& pool) {
  const int64_t C = d.conv_channels(), P = d.head_dim(), N = d.d_state, di = d.d_inner;
  const int64_t heads_per_group = d.n_heads / d.n_groups;
  const Isa isa = detected_isa();
  pool.parallel_for(d.n_heads, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t g = h / heads_per_group;
      float* sh = s + h * P * N;  // [P][N]
      for (int64_t t = 0; t < n; ++t) {
        const float* x = xbc + t * C + h * P;       // [P]
        const float* B = xbc + t * C + di + g * N;  // [N]
        const float* Cv = xbc + t * C + di + d.n_groups * N + g * N;  // [N]
        const float dts = ops::softplus(dt[t * dt_stride + h] + w.dt_bias[h]);
        const float dA = std::exp(dts * w.a[h]);
        float* yt = y + t * di + h * P;
        for (int64_t p = 0; p < P; ++p) {
          const float x_dt = x[p] * dts;
          // Vectorised over the state dims; the order is fixed per token (see ssm_row_update).
          const float acc = ssm_row_update(sh + p * N, B, Cv, dA, x_dt, N, isa);
          yt[p] = acc + x[p] * w.d[h];
        }
      }
    }
  });
}

}  // namespace

Mamba2Dims read_mamba2_dims(const gguf::File& f, const std::string& arch, int32_t n_embd) {
  const ArchKeys k(f, arch);
  Mamba2Dims d;
  d.n_embd = n_embd;
  d.d_inner = int32_t(k.require_int("ssm.inner_size"));
  d.d_state = int32_t(k.require_int("ssm.state_size"));
  d.n_heads = int32_t(k.require_int("ssm.time_step_rank"));
  d.n_groups = int32_t(k.get_int("ssm.group_count", 1));
  d.d_conv = int32_t(k.require_int("ssm.conv_kernel"));
  const std::string a = arch + ".ssm.";
  if (d.d_inner % d.n_heads)
    f.fail(a + "inner_size " + std::to_string(d.d_inner) + " is not a multiple of " + a +
                          "time_step_rank " + std::to_string(d.n_heads));
  if (d.n_groups <= 0 || d.n_heads % d.n_groups || d.d_inner % d.n_groups)
    f.fail(a + "group_count " + std::to_string(d.n_groups) + " must divide time_step_rank " +
                          std::to_string(d.n_heads) + " and inner_size " + std::to_string(d.d_inner));
  return d;
}

Mamba2Weights load_mamba2_weights(const gguf::File& f, const std::string& p, const Mamba2Dims& d) {
  Mamba2Weights w{};
  w.in_proj = ops::matrix(f, p + "ssm_in.weight", d.n_embd, d.in_rows());
  w.out_proj = ops::matrix(f, p + "ssm_out.weight", d.d_inner, d.n_embd);
  w.conv_w = ops::vector_f32(f, p + "ssm_conv1d.weight", int64_t(d.conv_channels()) * d.d_conv);
  w.conv_b = ops::optional_tensor(f, p + "ssm_conv1d.bias") ? ops::vector_f32(f, p + "ssm_conv1d.bias", d.conv_channels())
                                                          : nullptr;
  w.dt_bias = ops::vector_f32(f, p + "ssm_dt.bias", d.n_heads);
  w.a = ops::vector_f32(f, p + "ssm_a", d.n_heads);
  w.d = ops::vector_f32(f, p + "ssm_d", d.n_heads);
  w.norm = ops::vector_f32(f, p + "ssm_norm.weight", d.d_inner);
  return w;
}

std::vector<size_t> mamba2_state_sizes(const Mamba2Dims& d) {
  return {size_t(d.d_conv - 1) * size_t(d.conv_channels()),
          size_t(d.n_heads) * size_t(d.head_dim()) * size_t(d.d_state)};
}

void mamba2_mixer(const Mamba2Weights& w, const Mamba2Dims& d, size_t il, SeqSpan seqs, const float* xn, int64_t n,
                  float* out, float eps, ThreadPool& pool) {
  const int64_t di = d.d_inner, C = d.conv_channels(), rows = d.in_rows();
  std::vector<float> zxbcdt(size_t(n * rows));  // [n][z (d_inner) | xBC (C) | dt (H)]
  std::vector<float> xbc(size_t(n * C));        // [n][C] after conv + SiLU
  std::vector<float> y(size_t(n * di));         // [n][d_inner] scan output
  matmul(w.in_proj, xn, n, zxbcdt.data(), pool);
  for (const SeqRows& s : seqs)
    ops::causal_conv(w.conv_w, w.conv_b, d.d_conv, s.memory<RecurrentState>(il).buffer(0).data(),
                     zxbcdt.data() + s.row0 * rows + di, rows, s.n, C, xbc.data() + s.row0 * C, pool);
  ops::silu_rows(xbc.data(), n, C, pool);
  for (const SeqRows& s : seqs) {
    RecurrentState& state = s.memory<RecurrentState>(il);
    selective_scan(w, d, xbc.data() + s.row0 * C, zxbcdt.data() + s.row0 * rows + di + C, rows, s.n,
                   state.buffer(1).data(), y.data() + s.row0 * di, pool);
    state.advance(int32_t(s.n));
  }
  // Gate with SiLU(z), then RMSNorm each group of d_inner/G channels with its own weights.
  const int64_t gs = di / d.n_groups;
  pool.parallel_for(n, ThreadPool::rows_grain(di), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* yt = y.data() + t * di;
      ops::swiglu(zxbcdt.data() + t * rows, yt, di);
      for (int64_t g = 0; g < d.n_groups; ++g) ops::rms_norm(yt + g * gs, w.norm + g * gs, yt + g * gs, 1, gs, eps);
    }
  });
  matmul(w.out_proj, y.data(), n, out, pool);
}

std::unique_ptr<Model> make_mamba2_family(const gguf::File& f, const std::string& arch) {
  if (arch == "granitehybrid") return make_granite_hybrid(f, arch);
  if (arch == "nemotron_h" || arch == "nemotron_h_moe") return make_nemotron_h(f, arch);
  return make_mamba2(f, arch);
}

}  // namespace ws
