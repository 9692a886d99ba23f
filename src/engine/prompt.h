// From rendered prompt text to prompt tokens with message boundaries (for checkpoint
// placement). The rendering itself is src/chat/'s (chat/chat_prompt.h), a layer the
// engine does not use: it takes the text and the byte offsets where messages end.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ws {

struct PromptTokens {
  std::vector<Token> tokens;
  std::vector<int32_t> message_ends;  // token positions (tokens fully before the byte offset)
};

// Tokenizes `text` (special tokens parsed, BOS/EOS as the model says) and maps byte offsets
// to token positions through the tokens' pieces.
PromptTokens tokenize_prompt(const Tokenizer& tok, const std::string& text, std::span<const size_t> byte_ends);

}  // namespace ws
