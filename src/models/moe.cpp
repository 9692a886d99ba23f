#include "models/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/ops.h"

namespace ws {
namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (int64_t v : ne) s += (s.size() > 1 ? ", " : "") + std::to_string(v);
  return s + "]";
}

// The n_expert slices of a 3-D GGUF tensor {cols, rows, n_expert}.
ExpertMatrices expert_matrices(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows,
                               int64_t n_expert, bool with_bias) {
  const auto& t = f.require_tensor(name + ".weight");
  if (t.ne.size() != 3 || t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != n_expert)
    f.fail("tensor '" + t.name + "' has shape " + shape_str(t.ne) + ", expected " + shape_str({cols, rows, n_expert}));
  if (!traits(t.type).supported)
    f.fail("tensor '" + t.name + "' has type " + dtype_name(t.type) + ", which warmstart cannot compute with yet");
  ExpertMatrices e;
  const size_t slice = size_t(rows) * row_bytes(t.type, cols);
  for (int64_t x = 0; x < n_expert; ++x) e.m.emplace_back(t.type, rows, cols, t.data + size_t(x) * slice);
  // Repacked like the dense matrices, all experts in one slice, and the mapped original
  // let go (RSS holds one copy). Decode reading the GGUF rows in place took 1.4-2x the
  // CPU time per token of the packed panels (qwen3moe bench F16: 41 vs 21 ms).
  e.m = pack_for_cpu(e.m, &f.packed_arena());
  if (e.m.front().packed) f.release_pages(t.data, t.nbytes);
  if (with_bias) e.bias = ops::optional_vector_f32(f, name + ".bias", rows * n_expert);
  return e;
}

// The activation of one expert's rows in place: g, u: [m][ff] -> u = act(g, u).
void expert_act(ExpertAct act, const float* g, float* u, int64_t count) {
  switch (act) {
    case ExpertAct::swiglu:
      return ops::swiglu(g, u, count);
    case ExpertAct::relu2:
      for (int64_t i = 0; i < count; ++i) u[i] = u[i] > 0.f ? u[i] * u[i] : 0.f;
      return;
    case ExpertAct::swiglu_oai: {
      constexpr float kAlpha = 1.702f, kLimit = 7.0f;
      for (int64_t i = 0; i < count; ++i) {
        const float x = std::min(g[i], kLimit);
        const float y = std::max(std::min(u[i], kLimit), -kLimit);
        u[i] = x / (1.0f + std::exp(kAlpha * (-x))) * (1.0f + y);
      }
      return;
    }
  }
}

// One expert (or the shared one) on m gathered rows: out = down(act(gate x, up x)) + biases.
// x: [m][n_embd], out: [m][n_embd].
void run_expert(const Matrix& gate, const float* gate_b, const Matrix& up, const float* up_b, const Matrix& down,
                const float* down_b, ExpertAct act, const float* x, int64_t m, float* out, ThreadPool& pool) {
  const int64_t ff = up.rows;
  std::vector<float> g(act == ExpertAct::relu2 ? 0 : size_t(m * ff)), u(size_t(m * ff));  // [m][ff]
  if (!g.empty()) ops::linear(gate, gate_b, x, m, g.data(), pool);
  ops::linear(up, up_b, x, m, u.data(), pool);
  expert_act(act, g.data(), u.data(), m * ff);
  ops::linear(down, down_b, u.data(), m, out, pool);
}

// Routed expert e on the m (token, rank) slots that chose it: gathers their rows of xn,
// runs the expert, writes each output row to y at its slot (t * k + j).
void run_routed(const MoeWeights& w, const MoeOptions& o, int64_t e, const int64_t* slots, int64_t m, const float* xn,
                float* y /*[n * k][n_embd]*/, ThreadPool& pool) {
  const int64_t d = w.router.cols, ff = w.up.m.front().rows, k = o.n_used;
  std::vector<float> xe(size_t(m * d)), ye(size_t(m * d));  // [m][n_embd] gathered rows, their outputs
  for (int64_t i = 0; i < m; ++i) std::copy_n(xn + (slots[i] / k) * d, d, xe.data() + i * d);
  const Matrix none;
  run_expert(w.gate.m.empty() ? none : w.gate.m[size_t(e)], w.gate.bias ? w.gate.bias + e * ff : nullptr,
             w.up.m[size_t(e)], w.up.bias ? w.up.bias + e * ff : nullptr, w.down.m[size_t(e)],
             w.down.bias ? w.down.bias + e * d : nullptr, o.act, xe.data(), m, ye.data(), pool);
  for (int64_t i = 0; i < m; ++i) std::copy_n(ye.data() + i * d, d, y + slots[i] * d);
}

// Routing of one token: the chosen experts best first and their weights.
void route(const MoeWeights& w, const MoeOptions& o, const float* logits /*[X]*/, int32_t* chosen /*[k]*/,
           float* weight /*[k]*/) {
  const int64_t X = w.n_expert(), k = o.n_used;
  std::vector<float> p(logits, logits + X);  // [X] gating scores
  if (o.gating == MoeGating::softmax) {
    const float mx = *std::max_element(p.begin(), p.end());
    double sum = 0;  // ggml's soft_max sums in double
    for (float& v : p) sum += v = std::exp(v - mx);
    const float inv = float(1.0 / sum);
    for (float& v : p) v *= inv;
  } else if (o.gating == MoeGating::sigmoid) {
    for (float& v : p) v = ops::sigmoid(v);
  }
  std::vector<int32_t> order(static_cast<size_t>(X));
  std::iota(order.begin(), order.end(), 0);
  const auto sel = [&](int32_t e) { return w.selection_bias ? p[size_t(e)] + w.selection_bias[e] : p[size_t(e)]; };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const float sa = sel(a), sb = sel(b);
    return sa > sb || (sa == sb && a < b);
  });
  for (int64_t j = 0; j < k; ++j) {
    chosen[j] = order[size_t(j)];
    weight[j] = p[size_t(chosen[j])];
  }
  if (o.gating == MoeGating::softmax_selected) {
    const float mx = *std::max_element(weight, weight + k);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += weight[j] = std::exp(weight[j] - mx);
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < k; ++j) weight[j] *= inv;
  } else if (o.normalize) {
    float sum = 0.f;
    for (int64_t j = 0; j < k; ++j) sum += weight[j];
    sum = std::max(sum, 6.103515625e-5f);
    for (int64_t j = 0; j < k; ++j) weight[j] /= sum;
  }
  if (o.scale != 0.f && o.scale != 1.f)
    for (int64_t j = 0; j < k; ++j) weight[j] *= o.scale;
}

}  // namespace

MoeWeights load_moe(const gguf::File& f, const std::string& p, int64_t n_embd, int64_t n_expert, int64_t n_ff_exp,
                    int64_t n_ff_shared, ExpertAct act) {
  MoeWeights w;
  w.router = ops::matrix(f, p + "ffn_gate_inp.weight", n_embd, n_expert);
  w.router_bias = ops::optional_vector_f32(f, p + "ffn_gate_inp.bias", n_expert);
  w.selection_bias = ops::optional_vector_f32(f, p + "exp_probs_b.bias", n_expert);
  if (act != ExpertAct::relu2) w.gate = expert_matrices(f, p + "ffn_gate_exps", n_embd, n_ff_exp, n_expert, true);
  w.up = expert_matrices(f, p + "ffn_up_exps", n_embd, n_ff_exp, n_expert, true);
  w.down = expert_matrices(f, p + "ffn_down_exps", n_ff_exp, n_embd, n_expert, true);
  if (n_ff_shared > 0) {
    if (act != ExpertAct::relu2) w.sh_gate = ops::matrix(f, p + "ffn_gate_shexp.weight", n_embd, n_ff_shared);
    w.sh_up = ops::matrix(f, p + "ffn_up_shexp.weight", n_embd, n_ff_shared);
    w.sh_down = ops::matrix(f, p + "ffn_down_shexp.weight", n_ff_shared, n_embd);
    w.sh_gate_inp = ops::optional_vector_f32(f, p + "ffn_gate_inp_shexp.weight", n_embd);
  }
  return w;
}

void moe_ffn(const MoeWeights& w, const MoeOptions& o, const float* xn, int64_t n, float* out, ThreadPool& pool) {
  const int64_t X = w.n_expert(), k = o.n_used, d = w.router.cols;
  std::vector<float> logits(size_t(n * X));  // [n][X] router logits
  ops::linear(w.router, w.router_bias, xn, n, logits.data(), pool);
  std::vector<int32_t> chosen(size_t(n * k));  // [n][k] experts, best first
  std::vector<float> weight(size_t(n * k));    // [n][k] their weights
  for (int64_t t = 0; t < n; ++t) route(w, o, logits.data() + t * X, chosen.data() + t * k, weight.data() + t * k);

  // The slots (t * k + j) grouped by expert, in slot order within each.
  std::vector<int64_t> first(size_t(X + 1), 0);  // [X + 1] start of each expert's slots
  std::vector<int64_t> slots(size_t(n * k));     // [n * k] slots by expert
  for (int64_t s = 0; s < n * k; ++s) ++first[size_t(chosen[size_t(s)] + 1)];
  for (int64_t e = 0; e < X; ++e) first[size_t(e + 1)] += first[size_t(e)];
  std::vector<int64_t> fill(first.begin(), first.end() - 1);  // [X] next free position
  for (int64_t s = 0; s < n * k; ++s) slots[size_t(fill[size_t(chosen[size_t(s)])]++)] = s;
  std::vector<int64_t> jobs;  // [active experts (+ 1: the shared expert, as -1)]
  for (int64_t e = 0; e < X; ++e)
    if (first[size_t(e + 1)] > first[size_t(e)]) jobs.push_back(e);
  const bool shared = w.sh_up.rows > 0;
  if (shared) jobs.push_back(-1);

  // Each expert once, on the rows that chose it (its weights stream once per batch). With
  // enough experts to share out, they run side by side, each on one thread with its
  // matmuls inline: one fork/join per layer instead of three per expert, which is what
  // decode (one-row matmuls) spent its time on, and every thread streams its own experts'
  // weights. Otherwise each expert's matmuls split their rows across the pool. The bits are
  // the same either way (the matmuls are thread-count invariant).
  std::vector<float> y(size_t(n * k * d));         // [n][k][n_embd] expert outputs
  std::vector<float> sh(shared ? size_t(n * d) : 0);  // [n][n_embd] shared expert output
  auto job = [&](int64_t e, ThreadPool& p) {
    if (e >= 0) {
      run_routed(w, o, e, slots.data() + first[size_t(e)], first[size_t(e + 1)] - first[size_t(e)], xn, y.data(), p);
    } else {
      run_expert(w.sh_gate, nullptr, w.sh_up, nullptr, w.sh_down, nullptr, o.act, xn, n, sh.data(), p);
    }
  };
  if (pool.size() > 1 && int64_t(jobs.size()) >= 2 * pool.size()) {
    pool.parallel_for(int64_t(jobs.size()), 1, [&](int64_t b, int64_t e) {
      ThreadPool inline_pool(1);  // runs on this thread, no workers
      for (int64_t i = b; i < e; ++i) job(jobs[size_t(i)], inline_pool);
    });
  } else {
    for (int64_t e : jobs) job(e, pool);
  }

  // out = sum_j w_j * y_j, in rank order (as ggml adds the weighted views), + shared expert.
  pool.parallel_for(n, ThreadPool::rows_grain(k * d), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o_t = out + t * d;
      for (int64_t j = 0; j < k; ++j) {
        const float wj = weight[size_t(t * k + j)];
        const float* yj = y.data() + (t * k + j) * d;
        for (int64_t i = 0; i < d; ++i) o_t[i] = j == 0 ? yj[i] * wj : o_t[i] + yj[i] * wj;
      }
      if (!shared) continue;
      float gate = 1.f;
      if (w.sh_gate_inp) {
        float dot = 0.f;
        for (int64_t i = 0; i < d; ++i) dot += w.sh_gate_inp[i] * xn[t * d + i];
        gate = ops::sigmoid(dot);
      }
      for (int64_t i = 0; i < d; ++i) o_t[i] += w.sh_gate_inp ? sh[size_t(t * d + i)] * gate : sh[size_t(t * d + i)];
    }
  });
}

}  // namespace ws
