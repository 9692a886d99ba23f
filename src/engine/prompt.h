// From chat messages to prompt tokens with message boundaries (for checkpoint placement).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ws {

struct RenderedText {
  std::string text;
  std::vector<size_t> message_ends;  // byte offsets where each message ends
};

// ChatML (<|im_start|>role\ncontent<|im_end|>\n ...), the fixtures' template; used when a
// model has no template of its own.
RenderedText render_chatml(const nlohmann::json& messages, bool add_generation_prompt);

struct PromptTokens {
  std::vector<Token> tokens;
  std::vector<int32_t> message_ends;  // token positions (tokens fully before the byte offset)
};

// Tokenizes `text` (special tokens parsed, BOS/EOS as the model says) and maps byte offsets
// to token positions through the tokens' pieces.
PromptTokens tokenize_prompt(const Tokenizer& tok, const std::string& text, std::span<const size_t> byte_ends);

}  // namespace ws
