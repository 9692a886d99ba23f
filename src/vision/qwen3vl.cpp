// Qwen3-VL / Qwen3.5 vision (projector qwen3vl_merger; shared/fixtures/README.md 8.10): the
// still image through both temporal patch kernels, a learned position grid resized to the
// patch grid, pre-LN blocks with a fused QKV and 2-D rotary positions, a LayerNorm and an MLP
// merger over 2 x 2 patch blocks. Patches are kept in merge-block order from the start, as
// llama.cpp's graph reorders them: attention does not care about row order, the traces then
// match the golden's, and the merge is a plain reshape.
#include <algorithm>
#include <cmath>

#include "models/ops.h"
#include "vision/tower_impl.h"

namespace ws::vision {
namespace {

struct Qwen3vlLayer {
  const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;  // [E] LayerNorm
  Matrix qkv;                                  // [3E][E]: rows q, k, v; head h = rows h*d.. of each
  const float* bqkv;                           // [3E]
  Matrix o;                                    // [E][E]
  const float* bo;                             // [E]
  Matrix up, down;                             // [F][E], [E][F] (GELU MLP, no gate)
  const float *bup, *bdown;                    // [F], [E] (optional)
};

// The patch order of the graph: ViT row r = 4 (Y (nx/2) + X) + 2 dy + dx is patch
// (py, px) = (2Y + dy, 2X + dx). Returns the raster index py * nx + px of each row.
std::vector<int32_t> merge_block_order(int32_t nx, int32_t ny) {
  std::vector<int32_t> order;  // [nx*ny]
  order.reserve(size_t(nx) * size_t(ny));
  for (int32_t Y = 0; Y < ny / 2; ++Y)
    for (int32_t X = 0; X < nx / 2; ++X)
      for (int32_t dy = 0; dy < 2; ++dy)
        for (int32_t dx = 0; dx < 2; ++dx) order.push_back((2 * Y + dy) * nx + 2 * X + dx);
  return order;
}

// The position table G x G -> ny x nx, bilinear with aligned corners as ggml_interpolate
// computes it (source coordinate i / ((n-1)/(G-1)) in f32, clamped neighbours). pos: [G*G][E].
std::vector<float> interpolate_aligned(const float* pos, int32_t G, int32_t E, int32_t nx, int32_t ny) {
  auto source = [G](int32_t i, int32_t n, int32_t& i0, int32_t& i1, float& f) {
    const float sf = n > 1 && G > 1 ? float(n - 1) / float(G - 1) : float(n) / float(G);
    const float s = float(i) / sf;
    i0 = int32_t(std::floor(s));
    f = std::max(0.0f, std::min(s - float(i0), 1.0f));
    i1 = std::max(0, std::min(i0 + 1, G - 1));
    i0 = std::max(0, std::min(i0, G - 1));
  };
  std::vector<float> out(size_t(nx) * size_t(ny) * size_t(E));  // [ny][nx][E]
  for (int32_t oy = 0; oy < ny; ++oy) {
    int32_t y0, y1;
    float dy;
    source(oy, ny, y0, y1, dy);
    for (int32_t ox = 0; ox < nx; ++ox) {
      int32_t x0, x1;
      float dx;
      source(ox, nx, x0, x1, dx);
      auto at = [&](int32_t y, int32_t x) { return pos + (size_t(y) * size_t(G) + size_t(x)) * size_t(E); };
      const float *a = at(y0, x0), *b = at(y0, x1), *c = at(y1, x0), *d = at(y1, x1);
      float* o = out.data() + (size_t(oy) * size_t(nx) + size_t(ox)) * size_t(E);
      for (int32_t e = 0; e < E; ++e)
        o[e] = a[e] * (1 - dx) * (1 - dy) + b[e] * dx * (1 - dy) + c[e] * (1 - dx) * dy + d[e] * dx * dy;
    }
  }
  return out;
}

// ggml's VISION rope (sections d/4 x 4, position planes [row, col, row, col]): pair
// (j, j + d/2) of each head turns by component c = j / (d/4) of the planes times
// 10000^(-4 k / d), k counted from the start of the section (each section restarts).
// x: [n][H][d]; row, col: [n].
void rope_vision(float* x, int64_t n, int32_t n_head, int32_t d, const int32_t* row, const int32_t* col) {
  const int32_t half = d / 2, sect = std::max(1, d / 4);
  const float theta_scale = std::pow(10000.0f, -2.0f / float(half));
  std::vector<float> cs(static_cast<size_t>(d));  // [d/2][2] f32 cos, sin of each pair
  for (int64_t t = 0; t < n; ++t) {
    const float base[4] = {float(row[t]), float(col[t]), float(row[t]), float(col[t])};
    float theta[4] = {base[0], base[1], base[2], base[3]};
    for (int32_t j = 0; j < half; ++j) {
      const int32_t c = std::min(3, j / sect);
      if (j % sect == 0) theta[c] = base[c];  // independent sections start over
      cs[size_t(2 * j)] = std::cos(theta[c]);
      cs[size_t(2 * j + 1)] = std::sin(theta[c]);
      for (float& th : theta) th *= theta_scale;
    }
    for (int32_t h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * d;
      for (int32_t j = 0; j < half; ++j) {
        const float c = cs[size_t(2 * j)], s = cs[size_t(2 * j + 1)], x0 = v[j], x1 = v[j + half];
        v[j] = x0 * c - x1 * s;
        v[j + half] = x0 * s + x1 * c;
      }
    }
  }
}

class Qwen3vlEncoder final : public VisionEncoder {
 public:
  Qwen3vlEncoder(const gguf::File& f, const VisionHParams& hp) : hp_(hp) {
    const int64_t E = hp.n_embd, F = hp.n_ff, P = hp.patch_size, T = hp.projection_dim;
    k0_ = load_patch_kernel(f, "v.patch_embd.weight", E, 3 * P * P, k0_f16_);
    k1_ = load_patch_kernel(f, "v.patch_embd.weight.1", E, 3 * P * P, k1_f16_);
    patch_bias_ = ops::vector_f32(f, "v.patch_embd.bias", E);
    const auto& pe = f.require_tensor("v.position_embd.weight");
    const int64_t n_pos = pe.ne.size() == 2 ? pe.ne[1] : 0;
    pos_side_ = int32_t(std::lround(std::sqrt(double(n_pos))));
    if (pe.ne.size() != 2 || pe.ne[0] != E || int64_t(pos_side_) * pos_side_ != n_pos)
      f.fail("tensor 'v.position_embd.weight' must be {E, side*side}");
    pos_ = ops::vector_f32(f, "v.position_embd.weight", E * n_pos);
    for (const auto& t : f.tensors())
      if (t.name.find("deepstack") != std::string::npos)
        f.fail("qwen3vl_merger: deepstack layers ('" + t.name + "') are not supported: they widen the embeddings "
               "beyond what a Qwen3.5 language model takes");
    for (int32_t i = 0; i < hp.n_layer; ++i) {
      const std::string p = "v.blk." + std::to_string(i) + ".";
      layers_.push_back(Qwen3vlLayer{
          ops::vector_f32(f, p + "ln1.weight", E), ops::vector_f32(f, p + "ln1.bias", E),
          ops::vector_f32(f, p + "ln2.weight", E), ops::vector_f32(f, p + "ln2.bias", E),
          ops::matrix(f, p + "attn_qkv.weight", E, 3 * E), ops::vector_f32(f, p + "attn_qkv.bias", 3 * E),
          ops::matrix(f, p + "attn_out.weight", E, E), ops::vector_f32(f, p + "attn_out.bias", E),
          ops::matrix(f, p + "ffn_up.weight", E, F), ops::matrix(f, p + "ffn_down.weight", F, E),
          ops::optional_vector_f32(f, p + "ffn_up.bias", F), ops::optional_vector_f32(f, p + "ffn_down.bias", E)});
    }
    post_w_ = ops::optional_vector_f32(f, "v.post_ln.weight", E);  // HF merger.norm; llama.cpp skips it when absent
    post_b_ = ops::optional_vector_f32(f, "v.post_ln.bias", E);
    mm0_ = ops::matrix(f, "mm.0.weight", 4 * E, 4 * E);
    b0_ = ops::vector_f32(f, "mm.0.bias", 4 * E);
    mm2_ = ops::matrix(f, "mm.2.weight", 4 * E, T);
    b2_ = ops::vector_f32(f, "mm.2.bias", T);
  }

  std::vector<float> encode(const PixelEntry& e, ThreadPool& pool, EncodeTrace* trace) const override {
    const int32_t P = hp_.patch_size, E = hp_.n_embd, nx = e.width / P, ny = e.height / P;
    if (e.width % (2 * P) != 0 || e.height % (2 * P) != 0)
      throw std::invalid_argument("qwen3vl_merger: image entry of " + std::to_string(e.width) + " x " +
                                  std::to_string(e.height) + " is not a whole number of 2 x 2 patch blocks");
    const std::vector<int32_t> order = merge_block_order(nx, ny);
    const int64_t n = int64_t(order.size());
    std::vector<float> x = embed_patches(e, order, pool);  // [n][E] residual stream, block order
    if (trace) trace->patch_embd_plus_pos = x;
    // [n] patch coordinates: the rotary positions
    std::vector<int32_t> row(static_cast<size_t>(n)), col(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) row[size_t(r)] = order[size_t(r)] / nx, col[size_t(r)] = order[size_t(r)] % nx;
    for (const auto& l : layers_) block(l, x.data(), n, row.data(), col.data(), pool);
    if (post_w_) layer_norm(x.data(), post_w_, post_b_, x.data(), n, E, hp_.eps);
    if (trace) trace->vit_out = x;
    // Merge: the four rows of a block side by side ([n/4][4E]) are already contiguous.
    const int64_t m = n / 4;
    std::vector<float> hidden(size_t(m * 4 * E));            // [m][4E]
    std::vector<float> out(size_t(m * hp_.projection_dim));  // [m][T], raster on the merged grid
    ops::linear(mm0_, b0_, x.data(), m, hidden.data(), pool);
    vit_activation(hidden.data(), int64_t(hidden.size()), /*gelu_quick=*/false);  // the merger's GELU is fixed
    ops::linear(mm2_, b2_, hidden.data(), m, out.data(), pool);
    return out;
  }

 private:
  // conv(x, K0) + conv(x, K1) (each an fp16 convolution, as ggml's im2col path), + bias,
  // + the (resized) position grid; rows in merge-block `order`. -> [n][E].
  std::vector<float> embed_patches(const PixelEntry& e, const std::vector<int32_t>& order, ThreadPool& pool) const {
    const int32_t P = hp_.patch_size, E = hp_.n_embd, nx = e.width / P, ny = e.height / P;
    const int64_t n = int64_t(order.size()), K = int64_t(3) * P * P;
    const std::vector<float> raster = im2col(e, P);  // [n][K] raster order
    std::vector<float> patches(raster.size());       // [n][K] block order
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(raster.data() + int64_t(order[size_t(r)]) * K, K, patches.data() + r * K);
    std::vector<float> x(size_t(n * E)), c1(size_t(n * E));  // [n][E] the two temporal convolutions
    patch_conv(k0_, patches.data(), n, x.data(), pool);
    patch_conv(k1_, patches.data(), n, c1.data(), pool);
    std::vector<float> resized;  // [ny][nx][E] when the grid differs from the stored one
    const float* pos = pos_;
    if (nx != pos_side_ || ny != pos_side_) {
      resized = interpolate_aligned(pos_, pos_side_, E, nx, ny);
      pos = resized.data();
    }
    for (int64_t r = 0; r < n; ++r) {
      float* xr = x.data() + r * E;
      const float* pr = pos + int64_t(order[size_t(r)]) * E;
      for (int32_t i = 0; i < E; ++i) xr[i] = ((xr[i] + c1[size_t(r * E + i)]) + patch_bias_[i]) + pr[i];
    }
    return x;
  }

  // x += attn_out(attention(rope(q), rope(k), v)); x += ffn_down(GELU(ffn_up(LN2(x)))). x: [n][E].
  void block(const Qwen3vlLayer& l, float* x, int64_t n, const int32_t* row, const int32_t* col,
             ThreadPool& pool) const {
    const int32_t E = hp_.n_embd, H = hp_.n_head, d = E / H;
    std::vector<float> a(size_t(n * E)), qkv(size_t(n * 3 * E));        // [n][E] normed input, [n][3E]
    std::vector<float> q(a.size()), k(a.size()), v(a.size()), o(a.size());  // [n][E]
    std::vector<float> ff(size_t(n * hp_.n_ff));                         // [n][F]
    layer_norm(x, l.ln1_w, l.ln1_b, a.data(), n, E, hp_.eps);
    ops::linear(l.qkv, l.bqkv, a.data(), n, qkv.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      const float* src = qkv.data() + t * 3 * E;
      std::copy_n(src, E, q.data() + t * E);
      std::copy_n(src + E, E, k.data() + t * E);
      std::copy_n(src + 2 * E, E, v.data() + t * E);
    }
    rope_vision(q.data(), n, H, d, row, col);
    rope_vision(k.data(), n, H, d, row, col);
    vit_attention(q.data(), k.data(), v.data(), n, H, d, 1.0f / std::sqrt(float(d)), a.data(), pool);
    ops::linear(l.o, l.bo, a.data(), n, o.data(), pool);
    ops::add_scaled(x, o.data(), n * E);
    layer_norm(x, l.ln2_w, l.ln2_b, a.data(), n, E, hp_.eps);
    ops::linear(l.up, l.bup, a.data(), n, ff.data(), pool);
    vit_activation(ff.data(), int64_t(ff.size()), hp_.gelu_quick);
    ops::linear(l.down, l.bdown, ff.data(), n, o.data(), pool);
    ops::add_scaled(x, o.data(), n * E);
  }

  VisionHParams hp_;
  std::vector<uint16_t> k0_f16_, k1_f16_;  // [E][3*P*P] f16 bits: the two temporal kernels
  Matrix k0_, k1_;                         // F16 views of them
  const float* patch_bias_ = nullptr;      // [E]
  const float* pos_ = nullptr;             // [G*G][E], row gy * G + gx
  int32_t pos_side_ = 0;                   // G
  std::vector<Qwen3vlLayer> layers_;
  const float *post_w_ = nullptr, *post_b_ = nullptr;  // [E] LayerNorm before the merge (optional)
  Matrix mm0_, mm2_;                                   // [4E][4E], [T][4E]
  const float *b0_ = nullptr, *b2_ = nullptr;          // [4E], [T]
};

}  // namespace

std::unique_ptr<VisionEncoder> make_qwen3vl_encoder(const gguf::File& f, const VisionHParams& hp) {
  return std::make_unique<Qwen3vlEncoder>(f, hp);
}

}  // namespace ws::vision
