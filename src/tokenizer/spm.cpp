// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): spaces become U+2581 '▁',
// the text starts as one symbol per UTF-8 character, and adjacent symbols whose
// concatenation is a token are merged highest score first. Characters that end up
// without a token fall back to the <0xNN> byte tokens (llama.cpp's llm_tokenizer_spm).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <queue>
#include <stdexcept>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace ws::tok_detail {
namespace {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const gguf::File& f);
  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(Token t, bool special) const override { return cached_piece(t, special); }

 private:
  void encode_text(const std::string& text, std::vector<Token>& out) const;

  std::array<Token, 256> byte_tokens_{};  // byte -> its <0xNN> token (or the 1-char token), -1 if none
  Token unk_ = 0;
};

SpmTokenizer::SpmTokenizer(const gguf::File& f) {
  add_bos_ = true;
  add_eos_ = false;
  add_space_prefix_ = true;
  clean_spaces_ = false;
  load_common(f, /*default_bos=*/1, /*default_eos=*/2);
  unk_ = Token(f.get_int("tokenizer.ggml.unknown_token_id", 0));
  if (unk_ < 0 || unk_ >= n_vocab()) unk_ = -1;

  static constexpr char hex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
    Token id = text_to_token(name);
    if (id < 0) id = text_to_token(std::string(1, char(b)));
    byte_tokens_[size_t(b)] = id;
  }

  piece_cache_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto type = TokenType(token_types_[i]);
    const std::string& text = pieces_[i];
    if (type == TokenType::control || type == TokenType::unknown || type == TokenType::user_defined) {
      piece_cache_[i] = text;
    } else if (type == TokenType::normal) {
      piece_cache_[i] = replace_all(text, k_space_marker, " ");
    } else if (type == TokenType::byte) {
      if (text.size() != 6 || text.compare(0, 3, "<0x") != 0)
        f.fail("byte token " + std::to_string(i) + " is '" + text + "', expected the form <0xNN>");
      piece_cache_[i] = std::string(1, char(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
    }
  }
}

std::vector<Token> SpmTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<Token> out;
  if (add_special && add_bos_) {
    if (bos_ < 0) throw std::runtime_error("the tokenizer asks for a BOS token but has no valid bos_token_id");
    out.push_back(bos_);
  }
  // SentencePiece prefixes a space to the text, and llama.cpp also to text that follows a
  // special token, so that "<s>Hello" and "Hello" tokenize the word the same way.
  bool after_special = true;
  for (const Fragment& fr : partition_special(text, parse_special)) {
    if (fr.token >= 0) {
      out.push_back(fr.token);
      after_special = true;
      continue;
    }
    std::string piece = (add_space_prefix_ && after_special) ? " " : "";
    piece.append(text.substr(fr.offset, fr.length));
    encode_text(replace_all(piece, " ", k_space_marker), out);
    after_special = false;
  }
  if (add_special && add_eos_) {
    if (eos_ < 0) throw std::runtime_error("the tokenizer asks for an EOS token but has no valid eos_token_id");
    out.push_back(eos_);
  }
  return out;
}

void SpmTokenizer::encode_text(const std::string& text, std::vector<Token>& out) const {
  struct Symbol {
    int prev, next;
    size_t start, len;  // bytes of `text`; len 0 once merged into the left neighbour
  };
  struct Candidate {
    float score;
    int left, right;
    size_t left_len, right_len;  // lengths when queued; a change means the pair is stale
  };
  auto lower = [](const Candidate& a, const Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);  // best score, then leftmost
  };
  std::vector<Symbol> syms;  // one per UTF-8 character at first
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len(uint8_t(text[off])), text.size() - off);
    syms.push_back({int(syms.size()) - 1, off + len < text.size() ? int(syms.size()) + 1 : -1, off, len});
    off += len;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(lower)> queue(lower);
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Symbol &a = syms[size_t(l)], &b = syms[size_t(r)];
    const Token id = text_to_token(std::string_view(text).substr(a.start, a.len + b.len));
    if (id >= 0) queue.push({scores_[size_t(id)], l, r, a.len, b.len});
  };
  for (int i = 1; i < int(syms.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol &a = syms[size_t(c.left)], &b = syms[size_t(c.right)];
    if (a.len == 0 || b.len == 0 || a.len != c.left_len || b.len != c.right_len) continue;
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (b.next >= 0) syms[size_t(b.next)].prev = c.left;
    try_pair(a.prev, c.left);
    try_pair(c.left, a.next);
  }
  for (const Symbol& s : syms) {
    if (s.len == 0) continue;
    const std::string_view piece = std::string_view(text).substr(s.start, s.len);
    if (Token id = text_to_token(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // Only single characters can lack a token (merges only form tokens): spell them in bytes.
    for (char ch : piece) {
      const Token id = byte_tokens_[uint8_t(ch)];
      if (id >= 0) out.push_back(id);
      else if (unk_ >= 0) out.push_back(unk_);
      else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", unsigned(uint8_t(ch)));
        throw std::runtime_error(std::string("the vocabulary has no byte token for ") + hex + " and no unknown token");
      }
    }
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(const gguf::File& f) { return std::make_unique<SpmTokenizer>(f); }

}  // namespace ws::tok_detail
