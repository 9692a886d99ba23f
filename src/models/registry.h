// Factories of the architecture files; load_model() (registry.cpp) maps
// general.architecture to them.
#pragma once
#include <memory>
#include <string>

#include "models/model.h"

namespace ws {

std::unique_ptr<Model> make_llama_family(const gguf::File& f, const std::string& arch);  // llama, qwen3

}  // namespace ws
