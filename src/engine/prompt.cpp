#include "engine/prompt.h"

namespace ws {

PromptTokens tokenize_prompt(const Tokenizer& tok, const std::string& text, std::span<const size_t> byte_ends) {
  PromptTokens p;
  p.tokens = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  // Byte offset in `text` where each token ends. A BOS the tokenizer added covers no text.
  std::vector<size_t> ends;  // [tokens]
  size_t off = 0;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    const bool added_bos = i == 0 && tok.add_bos() && p.tokens[0] == tok.bos() &&
                           text.compare(0, tok.token_to_piece(tok.bos(), true).size(),
                                        tok.token_to_piece(tok.bos(), true)) != 0;
    if (!added_bos) off += tok.token_to_piece(p.tokens[i], true).size();
    ends.push_back(off);
  }
  p.message_ends = token_positions(ends, byte_ends);
  return p;
}

std::vector<int32_t> token_positions(std::span<const size_t> token_ends, std::span<const size_t> byte_ends) {
  std::vector<int32_t> out;
  for (size_t b : byte_ends) {
    int32_t pos = 0;
    while (size_t(pos) < token_ends.size() && token_ends[size_t(pos)] <= b) ++pos;
    if (out.empty() || out.back() != pos) out.push_back(pos);
  }
  return out;
}

}  // namespace ws
