#include "models/registry.h"

#include <algorithm>
#include <string_view>

#include "memory/state.h"

namespace ws {
namespace {

struct ArchEntry {
  std::string_view name;
  std::unique_ptr<Model> (*make)(const gguf::File&, const std::string&);
};
constexpr ArchEntry kArchs[] = {
    {"llama", make_llama_family},
    {"qwen2", make_llama_family},
    {"qwen3", make_llama_family},
    {"qwen3moe", make_llama_family},
    {"mamba2", make_mamba2_family},
    {"granitehybrid", make_mamba2_family},
    {"nemotron_h", make_mamba2_family},
    {"nemotron_h_moe", make_mamba2_family},
    {"gemma3", make_gemma3},
    {"gemma4", make_gemma4},
    {"gpt-oss", make_gpt_oss},
    {"mamba", make_mamba},
    {"lfm2", make_lfm2},
    {"lfm2moe", make_lfm2},
    {"qwen35", make_qwen35},
    {"qwen35moe", make_qwen35},
};

}  // namespace

std::unique_ptr<Model> load_model(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch.empty()) f.fail("missing required key 'general.architecture'");
  std::string known;
  for (const auto& a : kArchs) {
    if (a.name == arch) return a.make(f, arch);
    known += (known.empty() ? "" : ", ") + std::string(a.name);
  }
  f.fail("unsupported architecture '" + arch + "' (supported: " + known + ")");
}

uint64_t model_identity(const gguf::File& f) {
  // Header (metadata + tensor index) and the first bytes of every tensor: different
  // weights of the same shape (another seed, another quantization) get another identity.
  const auto bytes = f.bytes();
  uint64_t h = hash_bytes(bytes.data(), std::min<size_t>(f.data_offset(), bytes.size()), bytes.size());
  for (const auto& t : f.tensors()) h = hash_bytes(t.data, std::min<uint64_t>(t.nbytes, 256), h);
  return h;
}

}  // namespace ws
