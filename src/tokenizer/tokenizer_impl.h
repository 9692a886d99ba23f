// Internal pieces shared by the tokenizer implementations (not part of the public API).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ws::tok_detail {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

// The BPE tokenizer models llama.cpp knows: "gpt2" (byte-level, pre-tokenizer from
// tokenizer.ggml.pre) and "gemma4" (always the gemma4 pre-tokenizer, no default ids).
enum class BpeModel { gpt2, gemma4 };

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const gguf::File& f, BpeModel model);  // bpe.cpp
std::unique_ptr<Tokenizer> make_spm_tokenizer(const gguf::File& f);  // spm.cpp

// Length of the UTF-8 sequence a lead byte announces; 1 for continuation/invalid bytes
// (so a tokenizer always advances), like llama.cpp's unicode_len_utf8.
inline size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[lead >> 4];
}

// Re-encodes `text` as valid UTF-8: every byte that does not start a well-formed
// sequence becomes U+FFFD, as llama.cpp's unicode_cpts_from_utf8 does before BPE.
std::string sanitize_utf8(std::string_view text);

// Appends the UTF-8 encoding of code point `cp` (must be valid).
void append_utf8(std::string& out, uint32_t cp);

// SentencePiece's stand-in for a space, U+2581 LOWER ONE EIGHTH BLOCK.
inline constexpr std::string_view k_space_marker = "\xE2\x96\x81";

// `s` with every occurrence of `from` (non-empty) replaced by `to`.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

}  // namespace ws::tok_detail
