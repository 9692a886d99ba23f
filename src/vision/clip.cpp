// Loading an mmproj GGUF: hyper-parameters, tower and projector weights.
#include "vision/clip.h"

#include <cmath>
#include <cstring>

#include "models/ops.h"
#include "vision/tower_impl.h"

namespace ws::vision {
namespace {

int32_t require_positive(const gguf::File& f, const std::string& key) {
  const int64_t v = f.get_int(key, 0);
  if (v <= 0 || v > (1 << 20)) f.fail("key '" + key + "' is missing or not a positive size");
  return int32_t(v);
}

// A 2-D weight usable by matmul: the tensor's dtype must be supported.
Matrix weight(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows) {
  return ops::matrix(f, name, cols, rows);
}

ProjectorType read_projector_type(const gguf::File& f) {
  // Mixed vision + audio files (Gemma 4) name it under clip.vision.; llama.cpp falls back to that.
  std::string type = f.get_string("clip.projector_type");
  if (type.empty()) type = f.get_string("clip.vision.projector_type");
  if (type == "idefics3") return ProjectorType::idefics3;
  if (type == "lfm2") return ProjectorType::lfm2;
  if (type == "gemma3") return ProjectorType::gemma3;
  if (type == "qwen3vl_merger") return ProjectorType::qwen3vl_merger;
  if (type == "gemma4v") return ProjectorType::gemma4v;
  f.fail("projector type '" + type + "' is not supported (idefics3, lfm2, gemma3, qwen3vl_merger, gemma4v are)");
}

// The merge / pooling factor and the token limits of the dynamic-resolution families, as
// llama.cpp's load_hparams sets them.
void read_dynamic(const gguf::File& f, VisionHParams& h) {
  if (h.projector == ProjectorType::qwen3vl_merger) {
    // The graph hard-codes a 2 x 2 merge; the key only steers the position ids.
    h.scale_factor = int32_t(f.get_int("clip.vision.spatial_merge_size", 2));
    if (h.scale_factor != 2) f.fail("clip.vision.spatial_merge_size must be 2 for qwen3vl_merger");
    h.min_tokens = 8, h.max_tokens = 4096;
  } else {
    h.scale_factor = int32_t(f.get_int("clip.vision.projector.scale_factor", 3));  // Gemma 4's pooling kernel
    if (h.scale_factor <= 0 || h.scale_factor > 64) f.fail("clip.vision.projector.scale_factor must be 1..64");
    h.min_tokens = 40, h.max_tokens = 280;
  }
}

VisionHParams read_hparams(const gguf::File& f) {
  if (f.get_string("general.architecture") != "clip")
    f.fail("not a vision projector: general.architecture is '" + f.get_string("general.architecture") +
           "', expected 'clip'");
  if (!f.get_bool("clip.has_vision_encoder", false)) f.fail("this mmproj has no vision encoder");
  VisionHParams h;
  h.projector = read_projector_type(f);
  const bool dynamic = h.projector == ProjectorType::qwen3vl_merger || h.projector == ProjectorType::gemma4v;
  // llama.cpp's default: without clip.use_gelu the FFN uses quick GELU.
  h.gelu_quick = !f.get_bool("clip.use_gelu", false);
  h.image_size = require_positive(f, "clip.vision.image_size");
  h.patch_size = require_positive(f, "clip.vision.patch_size");
  h.n_embd = require_positive(f, "clip.vision.embedding_length");
  h.n_ff = require_positive(f, "clip.vision.feed_forward_length");
  h.n_layer = require_positive(f, "clip.vision.block_count");
  h.n_head = require_positive(f, "clip.vision.attention.head_count");
  h.projection_dim = require_positive(f, "clip.vision.projection_dim");
  if (h.n_embd % h.n_head != 0) f.fail("vision embedding_length is not a multiple of head_count");
  h.eps = float(f.get_float("clip.vision.attention.layer_norm_epsilon", 1e-6));
  if (dynamic) {
    read_dynamic(f, h);
  } else {
    if (h.image_size % h.patch_size != 0) f.fail("vision image_size is not a multiple of patch_size");
    // llama.cpp's default scale factor is 4 (the gemma3 converter writes it only when it differs).
    h.scale_factor = int32_t(f.get_int("clip.vision.projector.scale_factor", 4));
    if (h.scale_factor <= 0 || (h.image_size / h.patch_size) % h.scale_factor != 0)
      f.fail("clip.vision.projector.scale_factor must divide the patch grid");
  }
  h.preproc_image_size = int32_t(f.get_int("clip.vision.preproc_image_size", h.image_size));
  const auto mean = f.get_floats("clip.vision.image_mean"), stdv = f.get_floats("clip.vision.image_std");
  if (mean.size() == 3 && stdv.size() == 3)
    for (int c = 0; c < 3; ++c) {
      h.mean[c] = float(mean[size_t(c)]);
      h.std[c] = float(stdv[size_t(c)]);
      if (!(h.std[c] > 0)) f.fail("clip.vision.image_std must be positive");
    }
  return h;
}

}  // namespace

const char* projector_name(ProjectorType t) {
  switch (t) {
    case ProjectorType::idefics3: return "idefics3";
    case ProjectorType::lfm2: return "lfm2";
    case ProjectorType::gemma3: return "gemma3";
    case ProjectorType::qwen3vl_merger: return "qwen3vl_merger";
    case ProjectorType::gemma4v: return "gemma4v";
  }
  return "?";
}

VisionModel::~VisionModel() = default;

VisionModel::VisionModel(const gguf::File& f) : hp_(read_hparams(f)) {
  if (hp_.projector == ProjectorType::qwen3vl_merger) encoder_ = make_qwen3vl_encoder(f, hp_);
  else if (hp_.projector == ProjectorType::gemma4v) encoder_ = make_gemma4v_encoder(f, hp_);
  else load_siglip(f);
}

Matrix load_patch_kernel(const gguf::File& f, const std::string& name, int64_t E, int64_t K,
                         std::vector<uint16_t>& store) {
  const auto& pk = f.require_tensor(name);
  if (pk.n_elements() != E * K)
    f.fail("tensor '" + name + "' must have P*P*3*E = " + std::to_string(E * K) + " elements");
  store.resize(size_t(E * K));
  if (pk.type == DType::f32) {
    const float* src = ops::vector_f32(f, name, E * K);
    for (size_t i = 0; i < store.size(); ++i) store[i] = f32_to_f16(src[i]);
  } else if (pk.type == DType::f16) {
    std::memcpy(store.data(), pk.data, store.size() * 2);
  } else {
    f.fail("tensor '" + name + "' must be F32 or F16");
  }
  return Matrix{DType::f16, E, K, reinterpret_cast<const uint8_t*>(store.data())};
}

void VisionModel::load_siglip(const gguf::File& f) {
  tower_ = std::make_unique<Tower>();
  proj_ = std::make_unique<Projector>();
  const int64_t E = hp_.n_embd, F = hp_.n_ff, P = hp_.patch_size, K = 3 * P * P;
  Tower& tw = *tower_;
  tw.patch = load_patch_kernel(f, "v.patch_embd.weight", E, K, tw.patch_f16);
  tw.patch_bias = ops::vector_f32(f, "v.patch_embd.bias", E);
  const auto& pe = f.require_tensor("v.position_embd.weight");
  const int64_t n_pos = pe.ne.size() == 2 ? pe.ne[1] : 0;
  tw.pos_side = int32_t(std::lround(std::sqrt(double(n_pos))));
  if (pe.ne.size() != 2 || pe.ne[0] != E || int64_t(tw.pos_side) * tw.pos_side != n_pos)
    f.fail("tensor 'v.position_embd.weight' must be {E, side*side}");
  tw.pos = ops::vector_f32(f, "v.position_embd.weight", E * n_pos);
  // Old idefics3/gemma3 conversions swapped up and down; clip.cpp swaps them back.
  std::string up = "ffn_up", down = "ffn_down";
  const auto* d0 = f.find_tensor("v.blk.0.ffn_down.weight");
  if (hp_.projector != ProjectorType::lfm2 && d0 && !d0->ne.empty() && d0->ne[0] == E && F != E) std::swap(up, down);
  for (int32_t i = 0; i < hp_.n_layer; ++i) {
    const std::string p = "v.blk." + std::to_string(i) + ".";
    Tower::Layer l{};
    l.ln1_w = ops::vector_f32(f, p + "ln1.weight", E);
    l.ln1_b = ops::vector_f32(f, p + "ln1.bias", E);
    l.ln2_w = ops::vector_f32(f, p + "ln2.weight", E);
    l.ln2_b = ops::vector_f32(f, p + "ln2.bias", E);
    l.q = weight(f, p + "attn_q.weight", E, E);
    l.k = weight(f, p + "attn_k.weight", E, E);
    l.v = weight(f, p + "attn_v.weight", E, E);
    l.o = weight(f, p + "attn_out.weight", E, E);
    l.bq = ops::vector_f32(f, p + "attn_q.bias", E);
    l.bk = ops::vector_f32(f, p + "attn_k.bias", E);
    l.bv = ops::vector_f32(f, p + "attn_v.bias", E);
    l.bo = ops::vector_f32(f, p + "attn_out.bias", E);
    l.up = weight(f, p + up + ".weight", E, F);
    l.bup = ops::vector_f32(f, p + up + ".bias", F);
    l.down = weight(f, p + down + ".weight", F, E);
    l.bdown = ops::vector_f32(f, p + down + ".bias", E);
    tw.layers.push_back(l);
  }
  if (f.find_tensor("v.post_ln.weight")) {
    tw.post_w = ops::vector_f32(f, "v.post_ln.weight", E);
    tw.post_b = ops::vector_f32(f, "v.post_ln.bias", E);
  }
  load_projector(f);
}

void VisionModel::load_projector(const gguf::File& f) {
  const int64_t E = hp_.n_embd, T = hp_.projection_dim, s = hp_.scale_factor;
  Projector& pr = *proj_;
  switch (hp_.projector) {
    case ProjectorType::idefics3:
      pr.fc = weight(f, "mm.model.fc.weight", s * s * E, T);
      break;
    case ProjectorType::lfm2: {
      if (f.find_tensor("mm.input_norm.weight")) pr.in_w = ops::vector_f32(f, "mm.input_norm.weight", s * s * E);
      if (f.find_tensor("mm.input_norm.bias")) pr.in_b = ops::vector_f32(f, "mm.input_norm.bias", s * s * E);
      const auto& t1 = f.require_tensor("mm.1.weight");
      const int64_t hidden = t1.ne.size() == 2 ? t1.ne[1] : 0;
      pr.mm1 = weight(f, "mm.1.weight", s * s * E, hidden);
      pr.b1 = ops::vector_f32(f, "mm.1.bias", hidden);
      pr.mm2 = weight(f, "mm.2.weight", hidden, T);
      pr.b2 = ops::vector_f32(f, "mm.2.bias", T);
      break;
    }
    case ProjectorType::gemma3: {
      pr.soft_norm = ops::vector_f32(f, "mm.soft_emb_norm.weight", E);
      // Stored {T, E} (y = x W, output dim ne[0]); transposed once to the [T][E] rows matmul wants.
      const auto& t = f.require_tensor("mm.input_projection.weight");
      if (t.ne.size() != 2 || t.ne[0] != T || t.ne[1] != E)
        f.fail("tensor 'mm.input_projection.weight' must be {" + std::to_string(T) + ", " + std::to_string(E) + "}");
      if (t.type != DType::f32 && t.type != DType::f16) f.fail("tensor 'mm.input_projection.weight' must be F32 or F16");
      const size_t es = t.type == DType::f32 ? 4 : 2;
      pr.proj_t.resize(size_t(T * E) * es);
      for (int64_t e = 0; e < E; ++e)
        for (int64_t j = 0; j < T; ++j)
          std::memcpy(pr.proj_t.data() + size_t(j * E + e) * es, t.data + size_t(e * T + j) * es, es);
      pr.proj = Matrix{t.type, T, E, pr.proj_t.data()};
      break;
    }
    case ProjectorType::qwen3vl_merger:
    case ProjectorType::gemma4v:
      break;  // their own encoders (qwen3vl.cpp, gemma4v.cpp)
  }
}

}  // namespace ws::vision
