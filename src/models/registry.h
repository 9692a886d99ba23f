// Factories of the architecture files; load_model() (registry.cpp) maps
// general.architecture to them.
#pragma once
#include <memory>
#include <string>

#include "models/model.h"

namespace ws {

std::unique_ptr<Model> make_llama_family(const gguf::File& f, const std::string& arch);  // llama, qwen2, qwen3, qwen3moe
std::unique_ptr<Model> make_mamba2_family(const gguf::File& f, const std::string& arch);  // mamba2, granitehybrid, nemotron_h(_moe)
std::unique_ptr<Model> make_gemma3(const gguf::File& f, const std::string& arch);          // gemma3
std::unique_ptr<Model> make_gemma4(const gguf::File& f, const std::string& arch);          // gemma4
std::unique_ptr<Model> make_gpt_oss(const gguf::File& f, const std::string& arch);         // gpt-oss
std::unique_ptr<Model> make_mamba(const gguf::File& f, const std::string& arch);           // mamba
std::unique_ptr<Model> make_lfm2(const gguf::File& f, const std::string& arch);          // lfm2, lfm2moe
std::unique_ptr<Model> make_qwen35(const gguf::File& f, const std::string& arch);        // qwen35, qwen35moe

}  // namespace ws
