// Which type each tensor of a model gets when quantizing to a llama.cpp "file type"
// (Q4_K_M, Q8_0, ...). Mirrors llama.cpp's llama-quant.cpp (tensor_allows_quantization,
// llama_tensor_get_type, tensor_type_fallback) for the file types warmstart can write, so
// `warmstart quantize` picks the same per-tensor types as `llama-quantize`.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace ws {

// llama.cpp's LLAMA_FTYPE values (stored as general.file_type).
enum class FileType : uint32_t {
  all_f32 = 0,
  mostly_f16 = 1,
  mostly_q4_0 = 2,
  mostly_q8_0 = 7,
  mostly_q4_k_s = 14,
  mostly_q4_k_m = 15,
  mostly_q5_k_s = 16,
  mostly_q5_k_m = 17,
  mostly_q6_k = 18,
  mostly_bf16 = 32,
};

struct QuantTarget {
  FileType ftype;
  DType default_type;  // the type most weight matrices get
  const char* name;    // canonical name, e.g. "Q4_K_M"
};

// Case-insensitive: Q8_0 Q4_0 Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K F16 BF16 F32.
std::optional<QuantTarget> parse_quant_target(const std::string& s);
// Comma-separated list of the accepted names, for error messages.
std::string quant_target_names();

struct ModelFacts {
  std::string arch;   // general.architecture
  int n_layer = 0;    // {arch}.block_count
  int n_expert = 0;   // {arch}.expert_count (0 = dense)
  int n_head = 0;     // {arch}.attention.head_count (first layer)
  int n_head_kv = 0;  // {arch}.attention.head_count_kv (first layer)
};

struct TensorDesc {
  std::string name;
  std::vector<int64_t> ne;  // ggml order
  DType type;               // type in the input file
};

struct TensorPlan {
  DType type;             // type to write
  bool fallback = false;  // the row length forced a different type than the mix asked for
  std::string note;       // human-readable reason when fallback is set
};

// The order llama.cpp processes (and writes) tensors in: tensors outside blocks first,
// then by block number, each group sorted by name. Returns indices into `names`.
std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names);

// llama-quantize's --token-embedding-type and --output-tensor-type: the types of
// token_embd.weight and of the LM head (output.weight, or token_embd.weight when tied),
// in place of the mix's choice. Mixed files (a BF16 embedding with Q4_K layers, ...).
struct TypeOverrides {
  std::optional<DType> token_embd;
  std::optional<DType> output;
};

// Per-tensor output types. `tensors` must already be in llama_tensor_order: the
// layer-dependent rules (use_more_bits) count attn_v / ffn_down tensors as they come.
std::vector<TensorPlan> plan_tensor_types(const std::vector<TensorDesc>& tensors,
                                          const QuantTarget& target, const ModelFacts& facts,
                                          const TypeOverrides& overrides = {});

// llama.cpp's rule for which tensors may change type at all.
bool tensor_allows_quantization(const TensorDesc& t);

}  // namespace ws
