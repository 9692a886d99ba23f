#include "models/registry.h"

#include <string_view>

namespace ws {
namespace {

struct ArchEntry {
  std::string_view name;
  std::unique_ptr<Model> (*make)(const gguf::File&, const std::string&);
};
constexpr ArchEntry kArchs[] = {
    {"llama", make_llama_family},
    {"qwen3", make_llama_family},
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

}  // namespace ws
