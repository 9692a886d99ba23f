#include "tensor/quantize_policy.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

namespace ws {
namespace {

constexpr QuantTarget kTargets[] = {
    {FileType::mostly_q8_0, DType::q8_0, "Q8_0"},
    {FileType::mostly_q4_0, DType::q4_0, "Q4_0"},
    {FileType::mostly_q4_k_s, DType::q4_k, "Q4_K_S"},
    {FileType::mostly_q4_k_m, DType::q4_k, "Q4_K_M"},
    {FileType::mostly_q5_k_s, DType::q5_k, "Q5_K_S"},
    {FileType::mostly_q5_k_m, DType::q5_k, "Q5_K_M"},
    {FileType::mostly_q6_k, DType::q6_k, "Q6_K"},
    {FileType::mostly_f16, DType::f16, "F16"},
    {FileType::mostly_bf16, DType::bf16, "BF16"},
    {FileType::all_f32, DType::f32, "F32"},
};

bool is_quantized(DType t) { return traits(t).block_elems > 1; }
bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

enum class Category { token_embd, attn_q, attn_v, attn_k, attn_qkv, attn_kv_b, attn_output,
                      ffn_up, ffn_gate, ffn_down, output, other };

Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::token_embd;
  if (contains(name, "attn_qkv.weight")) return Category::attn_qkv;
  if (contains(name, "attn_kv_b.weight")) return Category::attn_kv_b;
  if (contains(name, "attn_v.weight")) return Category::attn_v;
  if (contains(name, "attn_k.weight")) return Category::attn_k;
  if (contains(name, "attn_q.weight")) return Category::attn_q;
  if (contains(name, "attn_output.weight")) return Category::attn_output;
  if (contains(name, "ffn_up")) return Category::ffn_up;
  if (contains(name, "ffn_gate")) return Category::ffn_gate;
  if (contains(name, "ffn_down")) return Category::ffn_down;
  return Category::other;
}

bool is_attn_v_like(Category c) {
  return c == Category::attn_v || c == Category::attn_qkv || c == Category::attn_kv_b;
}

// ggml_n_dims: dimensions up to the last one that is not 1.
int n_dims(const std::vector<int64_t>& ne) {
  int n = 1;
  for (size_t i = 0; i < ne.size(); ++i)
    if (ne[i] != 1) n = int(i + 1);
  return n;
}

int block_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// llama.cpp's counters over the tensors seen so far (in processing order).
struct State {
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
  bool tied = true;  // no output.weight: token_embd doubles as the LM head
};

// The LM head: output.weight, or token_embd.weight when it doubles as the head.
bool is_lm_head(const State& qs, Category cat) {
  return cat == Category::output || (qs.tied && cat == Category::token_embd);
}

// A few layers (first and last eighth, and every third in between) get more bits.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// The "mix" rules of llama_tensor_get_type_impl, restricted to the supported file types.
DType mix_type(State& qs, const TensorDesc& t, Category cat, const QuantTarget& target,
               const ModelFacts& m, DType new_type) {
  const FileType ft = target.ftype;
  const bool falcon = m.arch == "falcon";
  if (is_lm_head(qs, cat)) {
    const int64_t qk = traits(new_type).block_elems;
    if (falcon || t.ne[0] % qk != 0) return DType::q8_0;
    return new_type != DType::q8_0 ? DType::q6_k : new_type;
  }
  if (cat == Category::token_embd) return new_type;
  if (is_attn_v_like(cat)) {
    if ((ft == FileType::mostly_q4_k_m || ft == FileType::mostly_q5_k_m) &&
        use_more_bits(qs.i_attention_wv, qs.n_attention_wv))
      new_type = DType::q6_k;
    else if (ft == FileType::mostly_q4_k_s && qs.i_attention_wv < 4)
      new_type = DType::q5_k;
    // llama.cpp's LLM_TYPE_70B: 8 query heads share each attn_v, so it is cheap to upgrade.
    const bool is_70b = m.arch == "llama" && m.n_layer == 80 && m.n_head != m.n_head_kv;
    if (is_70b && new_type == DType::q4_k) new_type = DType::q5_k;
    if (m.n_expert == 8) new_type = DType::q8_0;
    ++qs.i_attention_wv;
    return new_type;
  }
  if (cat == Category::attn_k) return m.n_expert == 8 ? DType::q8_0 : new_type;
  if (cat == Category::ffn_down) {
    int i_layer = qs.i_ffn_down;
    if (m.n_expert > 1) i_layer = std::max(0, block_of(t.name));  // experts are not consecutive
    const int n_layer = m.n_layer;
    if (ft == FileType::mostly_q4_k_m) {
      if (falcon)
        new_type = i_layer < n_layer / 16 ? DType::q6_k
                   : use_more_bits(i_layer, n_layer) ? DType::q5_k : DType::q4_k;
      else if (use_more_bits(i_layer, n_layer))
        new_type = DType::q6_k;
    } else if (ft == FileType::mostly_q5_k_m && use_more_bits(i_layer, n_layer)) {
      new_type = DType::q6_k;
    } else if (ft == FileType::mostly_q4_k_s && !falcon && i_layer < n_layer / 8) {
      new_type = DType::q5_k;
    }
    ++qs.i_ffn_down;
    return new_type;
  }
  if (cat == Category::attn_output) {
    if (!falcon && m.n_expert == 8 &&
        (ft == FileType::mostly_q4_k_s || ft == FileType::mostly_q4_k_m))
      new_type = DType::q5_k;
    return new_type;
  }
  if (cat == Category::attn_qkv) {
    if (ft == FileType::mostly_q4_k_m) return DType::q5_k;
    if (ft == FileType::mostly_q5_k_m) return DType::q6_k;
  }
  return new_type;
}

// tensor_type_fallback: a row length the chosen type cannot hold. llama.cpp falls back
// to Q5_0 / Q5_1 for Q4_K / Q5_K, formats warmstart does not implement; Q8_0 is used
// instead (bigger, never less accurate). F16 when even 32 does not divide the row.
TensorPlan fallback(const TensorDesc& t, DType want) {
  TensorPlan p{want, false, ""};
  const int64_t ncols = t.ne[0];
  if (ncols % traits(want).block_elems == 0) return p;
  p.fallback = true;
  p.type = DType::q8_0;
  if (ncols % QK8_0 != 0) p.type = DType::f16;
  p.note = "row length " + std::to_string(ncols) + " is not a multiple of " +
           std::to_string(traits(want).block_elems) + " (" + dtype_name(want) + "); using " +
           dtype_name(p.type);
  return p;
}

}  // namespace

std::optional<QuantTarget> parse_quant_target(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  for (const auto& t : kTargets)
    if (u == t.name) return t;
  return std::nullopt;
}

std::string quant_target_names() {
  std::string out;
  for (const auto& t : kTargets) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names) {
  std::vector<size_t> idx(names.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const int la = block_of(names[a]), lb = block_of(names[b]);
    if (la != lb) return la < lb;
    return names[a] < names[b];
  });
  return idx;
}

bool tensor_allows_quantization(const TensorDesc& t) {
  if (n_dims(t.ne) < 2) return false;
  const std::string& name = t.name;
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  static constexpr const char* kKeep[] = {
      "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
      "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
      "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
      "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
      "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
      "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
      ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
      ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
  for (const char* k : kKeep)
    if (contains(name, k)) return false;
  // Positional embeddings and token types (BERT-style) stay as they are.
  return name != "position_embd.weight" && name != "token_types.weight";
}

std::vector<TensorPlan> plan_tensor_types(const std::vector<TensorDesc>& tensors,
                                          const QuantTarget& target, const ModelFacts& facts,
                                          const TypeOverrides& overrides) {
  State qs;
  for (const auto& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v_like(c)) ++qs.n_attention_wv;
    if (c == Category::output) qs.tied = false;
  }
  std::vector<TensorPlan> plans;
  plans.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!tensor_allows_quantization(t)) {
      plans.push_back({t.type, false, ""});
      continue;
    }
    const Category c = category_of(t.name);
    std::optional<DType> forced;  // --output-tensor-type / --token-embedding-type
    if (is_lm_head(qs, c)) forced = overrides.output;
    else if (c == Category::token_embd) forced = overrides.token_embd;
    if (forced) {
      plans.push_back(fallback(t, *forced));
      continue;
    }
    if (!is_quantized(target.default_type)) {
      plans.push_back({target.default_type, false, ""});
      continue;
    }
    const DType want = mix_type(qs, t, c, target, facts, target.default_type);
    plans.push_back(fallback(t, want));
  }
  return plans;
}

}  // namespace ws
