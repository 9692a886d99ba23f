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

// Token positions of byte offsets: for each of `byte_ends`, how many leading tokens end at
// or before it (`token_ends[i]`: the byte offset token i ends at), consecutive duplicates
// dropped. Shared by tokenize_prompt and media prompts (engine/media_prompt.h).
std::vector<int32_t> token_positions(std::span<const size_t> token_ends, std::span<const size_t> byte_ends);

}  // namespace ws
