#include "models/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace ws::ops {

void rms_norm(const float* x, const float* w, float* y, int64_t n, int64_t d, float eps) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    double sum = 0;  // double like ggml, so long rows lose nothing
    for (int64_t i = 0; i < d; ++i) sum += double(xr[i]) * xr[i];
    const float mean = float(sum / double(d));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < d; ++i) yr[i] = w ? (xr[i] * scale) * w[i] : xr[i] * scale;
  }
}

void swiglu(const float* g, float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = g[i] / (1.0f + std::exp(-g[i])) * x[i];
}

void add_scaled(float* a, const float* b, int64_t n, float scale) {
  if (scale == 1.f) {
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] += b[i] * scale;
  }
}

void rope(float* x, int64_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_rot, int32_t pos0,
          float base, RopeType type) {
  if (type == RopeType::none || n_rot <= 0) return;
  const float theta_scale = std::pow(base, -2.0f / float(n_rot));
  std::vector<float> cos_sin(static_cast<size_t>(n_rot));  // [n_rot/2][2]: cos, sin per rotated pair
  for (int64_t t = 0; t < n_tokens; ++t) {
    // theta_i = pos * theta_scale^i, built by repeated multiplication in f32 as GGUF
    // runtimes do, so the angles match theirs to the last bit.
    float theta = float(pos0 + t);
    for (int32_t i = 0; i < n_rot / 2; ++i) {
      cos_sin[2 * i] = std::cos(theta);
      cos_sin[2 * i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int32_t i = 0; i < n_rot / 2; ++i) {
        const int32_t a = type == RopeType::norm ? 2 * i : i;
        const int32_t b = type == RopeType::norm ? 2 * i + 1 : i + n_rot / 2;
        const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

namespace {

// One query head against n_kv cells: out[head_dim] = softmax(scale * q.K) V.
void attend_one(const float* q, const float* keys, const float* values, size_t stride, int32_t n_kv,
                int32_t head_dim, float scale, float* scores /*[n_kv]*/, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j < n_kv; ++j) {
    const float* k = keys + j * stride;
    float dot = 0.f;
    for (int32_t d = 0; d < head_dim; ++d) dot += q[d] * k[d];
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double sum = 0;
  for (int32_t j = 0; j < n_kv; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv = float(1.0 / sum);
  std::fill(out, out + head_dim, 0.f);
  for (int32_t j = 0; j < n_kv; ++j) {
    const float p = scores[j] * inv;
    const float* v = values + j * stride;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

}  // namespace

void attention(const float* q, const KvStore& kv, int64_t n_tokens, int32_t pos0, const AttentionParams& p,
               float* out, ThreadPool& pool) {
  const int32_t hd = kv.head_dim();
  const int32_t n_kv_heads = kv.n_kv_heads();
  const int32_t group = p.n_head / n_kv_heads;
  const int32_t p_end = pos0 + int32_t(n_tokens);
  // The oldest key any query of this batch can see.
  const int32_t p_begin = p.window > 0 ? std::max(kv.first_position(), pos0 - p.window + 1) : kv.first_position();
  const int32_t n_cells = p_end - p_begin;
  // keys/values: [n_kv_heads][n_cells][head_dim] f32, gathered once per call so the
  // inner loops read contiguous rows whatever the storage (pages, window, f16).
  std::vector<float> keys(size_t(n_kv_heads) * n_cells * hd), values(keys.size());
  for (int32_t g = 0; g < n_kv_heads; ++g) {
    kv.read_keys(g, p_begin, p_end, keys.data() + size_t(g) * n_cells * hd);
    kv.read_values(g, p_begin, p_end, values.data() + size_t(g) * n_cells * hd);
  }
  const int64_t n_jobs = n_tokens * p.n_head;
  pool.parallel_for(n_jobs, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(n_cells));  // [n_cells] f32 scratch
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / p.n_head;
      const int32_t h = int32_t(job % p.n_head);
      const int32_t g = h / group;
      const int32_t pos = pos0 + int32_t(t);
      // Visible keys: [first, pos] (causal), limited to the window.
      const int32_t first = p.window > 0 ? std::max(p_begin, pos - p.window + 1) : p_begin;
      const size_t off = size_t(g) * n_cells * hd + size_t(first - p_begin) * hd;
      attend_one(q + (t * p.n_head + h) * hd, keys.data() + off, values.data() + off, size_t(hd), pos - first + 1,
                 hd, p.scale, scores.data(), out + (t * p.n_head + h) * hd);
    }
  });
}

const gguf::TensorInfo* optional_tensor(const gguf::File& f, const std::string& name) {
  return f.find_tensor(name);
}

Matrix matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows) {
  const auto& t = f.require_tensor(name);
  if (t.ne.size() != 2 || t.ne[0] != cols || t.ne[1] != rows)
    f.fail("tensor '" + name + "' has shape [" + std::to_string(t.ne[0]) +
           (t.ne.size() > 1 ? ", " + std::to_string(t.ne[1]) : "") + (t.ne.size() > 2 ? ", ..." : "") +
           "], expected [" + std::to_string(cols) + ", " + std::to_string(rows) + "]");
  if (!traits(t.type).supported)
    f.fail("tensor '" + name + "' has type " + dtype_name(t.type) + ", which warmstart cannot compute with yet");
  return Matrix{t.type, rows, cols, t.data};
}

const float* vector_f32(const gguf::File& f, const std::string& name, int64_t n) {
  const auto& t = f.require_tensor(name);
  if (t.n_elements() != n)
    f.fail("tensor '" + name + "' has " + std::to_string(t.n_elements()) + " elements, expected " + std::to_string(n));
  if (t.type != DType::f32) f.fail("tensor '" + name + "' must be F32, found " + dtype_name(t.type));
  // GGUF data offsets are aligned (>= 32 bytes), so the f32 view is aligned.
  return reinterpret_cast<const float*>(t.data);
}

}  // namespace ws::ops
