// Built-in chat templates by name, as llama-server's `--chat-template NAME` offers them
// (the names of llama.cpp's LLM_CHAT_TEMPLATES). Each is a Jinja template written to render
// exactly what llama.cpp's built-in C++ formatter (llm_chat_apply_template) produces for
// that name, so a user who moves from llama-server gets byte-identical prompts.
//
// Like llama.cpp's formatter they emit no BOS (the tokenizer adds it) and read only
// `messages` (role, content) and `add_generation_prompt`; some ignore the latter because
// llama.cpp's formatter does (llama2*, mistral-v7*, orion, minicpm, rwkv-world, ...).
// Content must be a string; a missing or null content renders as empty.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ws::chat {

// The Jinja source of the built-in template `name`, or nullptr when there is none.
// The string lives for the whole program.
const std::string* builtin_chat_template(std::string_view name);

// All built-in names, sorted (llama.cpp lists them in the same order).
std::vector<std::string> builtin_chat_template_names();

}  // namespace ws::chat
