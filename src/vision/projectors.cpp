// Preprocessing + chunk layout of every projector family (what mtmd does before the tower),
// and the projection of the SigLIP-style towers' output to language-model embeddings.
#include <cmath>
#include <cstring>

#include "models/ops.h"
#include "vision/clip.h"
#include "vision/tower_impl.h"

namespace ws::vision {
namespace {

// y += b per row; y: [n][d].
void add_bias(float* y, const float* b, int64_t n, int64_t d) {
  if (b)
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < d; ++i) y[t * d + i] += b[i];
}

// Pixel (un)shuffle: m[Y * mx + X][(dy * s + dx) * E + e] = vit[(s*Y + dy) * nx + s*X + dx][e],
// zero where the grid is not a multiple of s. vit: [ny][nx][E] -> m: [my * mx][s*s*E].
std::vector<float> pixel_shuffle(const std::vector<float>& vit, int32_t nx, int32_t ny, int32_t E, int32_t s) {
  const int32_t mx = (nx + s - 1) / s, my = (ny + s - 1) / s;
  std::vector<float> m(size_t(mx) * size_t(my) * size_t(s * s) * size_t(E), 0.f);
  for (int32_t Y = 0; Y < my; ++Y)
    for (int32_t X = 0; X < mx; ++X)
      for (int32_t dy = 0; dy < s; ++dy)
        for (int32_t dx = 0; dx < s; ++dx) {
          const int32_t y = s * Y + dy, x = s * X + dx;
          if (y >= ny || x >= nx) continue;
          std::copy_n(vit.data() + (size_t(y) * size_t(nx) + size_t(x)) * size_t(E), E,
                      m.data() + ((size_t(Y) * size_t(mx) + size_t(X)) * size_t(s * s) + size_t(dy * s + dx)) * size_t(E));
        }
  return m;
}

// s x s average pooling: m[Y * mx + X] = mean of the block; vit: [ny][nx][E].
std::vector<float> avg_pool(const std::vector<float>& vit, int32_t nx, int32_t ny, int32_t E, int32_t s) {
  const int32_t mx = nx / s, my = ny / s;
  std::vector<float> m(size_t(mx) * size_t(my) * size_t(E), 0.f);  // [my*mx][E]
  for (int32_t Y = 0; Y < my; ++Y)
    for (int32_t X = 0; X < mx; ++X) {
      float* out = m.data() + (size_t(Y) * size_t(mx) + size_t(X)) * size_t(E);
      for (int32_t dy = 0; dy < s; ++dy)
        for (int32_t dx = 0; dx < s; ++dx) {
          const float* in = vit.data() + (size_t(s * Y + dy) * size_t(nx) + size_t(s * X + dx)) * size_t(E);
          for (int32_t e = 0; e < E; ++e) out[e] += in[e];
        }
      for (int32_t e = 0; e < E; ++e) out[e] /= float(s * s);
    }
  return m;
}

LayoutItem text(std::string t) { return LayoutItem{LayoutItem::kText, std::move(t), -1, false}; }
LayoutItem piece(std::string t) { return LayoutItem{LayoutItem::kPiece, std::move(t), -1, false}; }
LayoutItem embd(int32_t entry, bool non_causal = false) { return LayoutItem{LayoutItem::kEmbeddings, "", entry, non_causal}; }

}  // namespace

std::pair<int32_t, int32_t> dyn_target_size(int32_t w, int32_t h, int32_t a, int64_t min_px, int64_t max_px) {
  auto round_by = [a](float x) { return int32_t(std::round(x / float(a))) * a; };
  auto floor_by = [a](float x) { return int32_t(std::floor(x / float(a))) * a; };
  auto ceil_by = [a](double x) { return int32_t(std::ceil(x / double(a))) * a; };
  int32_t wb = std::max(a, round_by(float(w))), hb = std::max(a, round_by(float(h)));
  if (int64_t(wb) * hb > max_px) {
    const float beta = std::sqrt(float(h) * float(w) / float(max_px));
    hb = std::max(a, floor_by(float(h) / beta));
    wb = std::max(a, floor_by(float(w) / beta));
  } else if (int64_t(wb) * hb < min_px) {
    const float beta = std::sqrt(float(min_px) / (float(h) * float(w)));
    hb = ceil_by(double(float(h) * beta));
    wb = ceil_by(double(float(w) * beta));
  }
  return {wb, hb};
}

PreparedImage VisionModel::prepare(const RgbImage& img) const {
  const int32_t S = hp_.image_size;
  PreparedImage out;
  auto add_entry = [&](const RgbImage& im) {
    out.entries.push_back(PixelEntry{im.width, im.height, normalize_planar(im, hp_.mean, hp_.std)});
    return int32_t(out.entries.size() - 1);
  };
  switch (hp_.projector) {
    case ProjectorType::idefics3: {
      // Tiles of the image resized (bicubic, padded) to whole tiles, then a global view.
      const double L = hp_.preproc_image_size;
      const double scale = std::min(L / img.width, L / img.height);
      const int32_t rw = int32_t(std::ceil(img.width * scale / S)) * S;
      const int32_t rh = int32_t(std::ceil(img.height * scale / S)) * S;
      const RgbImage refined = resize(img, rw, rh, ResizeAlgo::bicubic, /*pad=*/true);
      const int32_t rows = rh / S, cols = rw / S;
      for (int32_t r = 0; r < rows; ++r)
        for (int32_t c = 0; c < cols; ++c) {
          out.layout.push_back(text("<fake_token_around_image><row_" + std::to_string(r + 1) + "_col_" +
                                    std::to_string(c + 1) + ">"));
          out.layout.push_back(embd(add_entry(crop(refined, c * S, r * S, S, S))));
          if (c == cols - 1 && r < rows - 1) out.layout.push_back(text("\n"));
        }
      out.layout.push_back(piece("\n\n"));
      out.layout.push_back(piece("<fake_token_around_image>"));
      out.layout.push_back(piece("<global-img>"));
      out.layout.push_back(embd(add_entry(resize(img, S, S, ResizeAlgo::bilinear, /*pad=*/false))));
      out.layout.push_back(text("<fake_token_around_image>"));
      break;
    }
    case ProjectorType::lfm2: {
      // Large images would be tiled into 512-pixel tiles by llama.cpp; here they are
      // downscaled to the maximum area instead (a documented simplification).
      const int32_t a = hp_.patch_size * hp_.scale_factor;
      const auto [w, h] = dyn_target_size(img.width, img.height, a, int64_t(64) * a * a, int64_t(256) * a * a);
      out.layout.push_back(text("<|image_start|>"));
      out.layout.push_back(piece("<|img_thumbnail|>"));
      out.layout.push_back(embd(add_entry(resize(img, w, h, ResizeAlgo::bilinear, /*pad=*/false))));
      out.layout.push_back(text("<|image_end|>"));
      break;
    }
    case ProjectorType::gemma3:
      out.layout.push_back(text("<start_of_image>"));
      out.layout.push_back(embd(add_entry(resize(img, S, S, ResizeAlgo::bilinear, /*pad=*/true)), /*non_causal=*/true));
      out.layout.push_back(text("<end_of_image>"));
      break;
    case ProjectorType::qwen3vl_merger:
    case ProjectorType::gemma4v: {
      // Dynamic resolution: sides multiples of patch * merge, token count within the limits,
      // resized (bilinear, aspect kept, black padding) as one entry.
      const int32_t a = hp_.patch_size * hp_.scale_factor;
      const int64_t a2 = int64_t(a) * a;
      const auto [w, h] = dyn_target_size(img.width, img.height, a, hp_.min_tokens * a2, hp_.max_tokens * a2);
      const bool gemma = hp_.projector == ProjectorType::gemma4v;
      out.layout.push_back(text(gemma ? "<|image>" : "<|vision_start|>"));
      out.layout.push_back(embd(add_entry(resize(img, w, h, ResizeAlgo::bilinear, /*pad=*/true)), /*non_causal=*/gemma));
      out.layout.push_back(text(gemma ? "<image|>" : "<|vision_end|>"));
      break;
    }
  }
  return out;
}

std::pair<int32_t, int32_t> VisionModel::token_grid(const PixelEntry& e) const {
  if (hp_.projector == ProjectorType::qwen3vl_merger)
    return {e.width / (2 * hp_.patch_size), e.height / (2 * hp_.patch_size)};
  return {int32_t(tokens_for(e)), 1};
}

int64_t VisionModel::tokens_for(const PixelEntry& e) const {
  const int32_t s = hp_.scale_factor;
  const int64_t nx = e.width / hp_.patch_size, ny = e.height / hp_.patch_size;
  if (hp_.projector == ProjectorType::gemma3 || hp_.projector == ProjectorType::gemma4v) return (nx / s) * (ny / s);
  return ((nx + s - 1) / s) * ((ny + s - 1) / s);
}

std::vector<float> VisionModel::project(const std::vector<float>& vit, int32_t nx, int32_t ny, ThreadPool& pool) const {
  const Projector& pr = *proj_;
  const int32_t E = hp_.n_embd, s = hp_.scale_factor, T = hp_.projection_dim;
  std::vector<float> out;  // [n_tokens][T]
  if (hp_.projector == ProjectorType::gemma3) {
    if (nx % s != 0 || ny % s != 0) throw std::invalid_argument("gemma3: the patch grid is not a multiple of the pool size");
    std::vector<float> m = avg_pool(vit, nx, ny, E, s);  // [n][E]
    const int64_t n = int64_t(m.size()) / E;
    ops::rms_norm(m.data(), pr.soft_norm, m.data(), n, E, hp_.eps);
    out.resize(size_t(n) * size_t(T));
    matmul(pr.proj, m.data(), n, out.data(), pool);
    return out;
  }
  const std::vector<float> m = pixel_shuffle(vit, nx, ny, E, s);  // [n][s*s*E]
  const int64_t width = int64_t(s) * s * E, n = int64_t(m.size()) / width;
  out.resize(size_t(n) * size_t(T));
  if (hp_.projector == ProjectorType::idefics3) {
    matmul(pr.fc, m.data(), n, out.data(), pool);
    return out;
  }
  // lfm2: LayerNorm with a fixed eps of 1e-5 (not the tower's), then a 2-layer GELU MLP.
  std::vector<float> mn(m.size());  // [n][s*s*E]
  layer_norm(m.data(), pr.in_w, pr.in_b, mn.data(), n, width, 1e-5f);
  std::vector<float> hidden(size_t(n * pr.mm1.rows));  // [n][H]
  matmul(pr.mm1, mn.data(), n, hidden.data(), pool);
  add_bias(hidden.data(), pr.b1, n, pr.mm1.rows);
  for (float& v : hidden) v = ops::gelu_ggml(v);
  matmul(pr.mm2, hidden.data(), n, out.data(), pool);
  add_bias(out.data(), pr.b2, n, T);
  return out;
}

}  // namespace ws::vision
