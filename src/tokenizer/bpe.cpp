// BPE as llama.cpp's llm_tokenizer_bpe does it. Byte-level (tokenizer.ggml.model =
// "gpt2"): the text is split by the pre-tokenizer of `tokenizer.ggml.pre`, each piece is
// mapped byte-by-byte to GPT-2's printable "bytes_to_unicode" alphabet, and merges are
// applied lowest rank first. SentencePiece-style (model "gemma4", or pre "gemma4" /
// "sarvam-moe"): spaces become U+2581, pieces stay raw UTF-8, and characters without a
// token fall back to <0xXX> byte tokens.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <queue>
#include <stdexcept>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace ws::tok_detail {
namespace {

// ---- GPT-2 byte <-> printable code point mapping ----

struct ByteAlphabet {
  std::array<std::string, 256> encode;  // byte -> UTF-8 of its printable stand-in
  std::array<int16_t, 324> decode;      // stand-in code point -> byte, -1 if none
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet table = [] {
    ByteAlphabet t;
    t.decode.fill(-1);
    uint32_t next = 256;  // bytes that are not printable get code points from 256 on
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? b : next++;
      append_utf8(t.encode[b], cp);
      t.decode[cp] = int16_t(b);
    }
    return t;
  }();
  return table;
}

// Raw bytes of a byte-level token text. Characters outside the alphabet (tokens added
// by hand) are kept as their UTF-8, where llama.cpp would print an [UNK_BYTE_..] marker.
std::string decode_byte_level(const std::string& text) {
  const ByteAlphabet& ab = byte_alphabet();
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t b = uint8_t(text[i]);
    size_t len = std::min(utf8_len(b), text.size() - i);
    uint32_t cp = len == 1 ? b : (b & (0x7F >> len));
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(text[i + k]) & 0x3F);
    if (cp < ab.decode.size() && ab.decode[cp] >= 0 && (len > 1 || b < 0x80)) out += char(ab.decode[cp]);
    else out.append(text, i, len);
    i += len;
  }
  return out;
}

// ---- the tokenizer ----

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(const gguf::File& f, BpeModel model);
  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(Token t, bool special) const override { return cached_piece(t, special); }

 private:
  void read_merges(const gguf::File& f);
  void fill_piece_cache();
  void encode_text(std::string_view text, std::vector<Token>& out) const;
  void encode_word(const std::string& word, std::vector<Token>& out) const;
  int rank(std::string_view left, std::string_view right) const;

  std::unique_ptr<RegexSplitter> splitter_;
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> ranks_;  // "left right" -> merge rank
  std::array<Token, 256> byte_fallback_{};  // byte -> the token spelling it alone, -1 if none
  bool ignore_merges_ = false;       // a pre-token that is itself a token is emitted without merging
  bool spm_style_ = false;           // see PreConfig::spm_style
  bool whole_newline_runs_ = false;  // see PreConfig::whole_newline_runs
};

// llama.cpp reads a "gemma4" tokenizer as BPE with the gemma4 pre-tokenizer, whatever
// tokenizer.ggml.pre says, and with no default special ids (gpt2's default to 11).
std::string pre_name(const gguf::File& f, BpeModel model) {
  if (model == BpeModel::gemma4) return "gemma4";
  const std::string pre = f.get_string("tokenizer.ggml.pre");
  if (pre.empty())
    std::fprintf(stderr, "warning: %s: tokenizer.ggml.pre is missing, using 'default' as llama.cpp does\n",
                 f.path().c_str());
  return pre;
}

BpeTokenizer::BpeTokenizer(const gguf::File& f, BpeModel model) {
  const std::string pre = pre_name(f, model);
  const std::optional<PreConfig> cfg = pre_config(pre);
  if (!cfg)
    f.fail("unknown pre-tokenizer '" + pre + "' (tokenizer.ggml.pre); llama.cpp refuses it too, except 'kimi-k2', "
           "'afmoe' and 'whitespace', which this engine does not implement");
  clean_spaces_ = cfg->clean_spaces;
  add_bos_ = cfg->add_bos;
  force_add_bos_ = cfg->force_add_bos;
  ignore_merges_ = cfg->ignore_merges;
  spm_style_ = cfg->spm_style;
  whole_newline_runs_ = cfg->whole_newline_runs;
  const Token default_bos = (model == BpeModel::gemma4 || cfg->no_default_bos) ? -1 : 11;
  load_common(f, default_bos, model == BpeModel::gemma4 ? -1 : 11);
  read_merges(f);
  splitter_ = std::make_unique<RegexSplitter>(cfg->regexes, f.path());

  static constexpr char hex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
    byte_fallback_[size_t(b)] = spm_style_ ? text_to_token(name) : text_to_token(std::string(1, char(b)));
  }
  fill_piece_cache();
}

void BpeTokenizer::read_merges(const gguf::File& f) {
  if (!f.find("tokenizer.ggml.merges")) f.fail("tokenizer.ggml.merges is missing (a BPE tokenizer needs it)");
  const std::vector<std::string> merges = f.get_strings("tokenizer.ggml.merges");
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // Split at the first space after the first character, so a merge may start with ' '.
    if (merges[i].find(' ', 1) == std::string::npos) continue;
    ranks_.emplace(merges[i], int(i));  // first occurrence wins, like std::map::emplace
  }
}

void BpeTokenizer::fill_piece_cache() {
  piece_cache_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto type = TokenType(token_types_[i]);
    const std::string& text = pieces_[i];
    if (type == TokenType::control || type == TokenType::unknown || type == TokenType::user_defined)
      piece_cache_[i] = text;
    else if (type == TokenType::normal)
      piece_cache_[i] = spm_style_ ? replace_all(text, k_space_marker, " ") : decode_byte_level(text);
    else if (type == TokenType::byte && text.size() == 6 && text.compare(0, 3, "<0x") == 0)
      piece_cache_[i] = std::string(1, char(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
  }
}

int BpeTokenizer::rank(std::string_view left, std::string_view right) const {
  std::string key;  // "left right", the form merges are stored in
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(1, ' ').append(right);
  auto it = ranks_.find(key);
  return it == ranks_.end() ? -1 : it->second;
}

std::vector<Token> BpeTokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<Token> out;
  if (add_special && add_bos_) {
    if (bos_ < 0) throw std::runtime_error("the tokenizer asks for a BOS token but has no valid bos_token_id");
    out.push_back(bos_);
  }
  for (const Fragment& fr : partition_special(text, parse_special)) {
    if (fr.token >= 0) out.push_back(fr.token);
    else encode_text(text.substr(fr.offset, fr.length), out);
  }
  if (add_special && add_eos_) {
    if (eos_ < 0) throw std::runtime_error("the tokenizer asks for an EOS token but has no valid eos_token_id");
    out.push_back(eos_);
  }
  return out;
}

void BpeTokenizer::encode_text(std::string_view raw, std::vector<Token>& out) const {
  // PCRE2 in UTF mode needs valid UTF-8; llama.cpp turns bad bytes into U+FFFD too.
  std::string text = sanitize_utf8(raw);
  if (spm_style_) text = replace_all(text, " ", k_space_marker);
  const ByteAlphabet& ab = byte_alphabet();
  std::string word;  // the pre-token, in the byte alphabet unless SPM-style
  for (auto [off, len] : splitter_->split(text)) {
    if (spm_style_) {
      word.assign(text, off, len);
    } else {
      word.clear();
      for (size_t i = off; i < off + len; ++i) word += ab.encode[uint8_t(text[i])];
    }
    encode_word(word, out);
  }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<Token>& out) const {
  if (word.empty()) return;
  // Both shortcuts keep the pre-token whole when the vocabulary has it as one token.
  const bool whole = ignore_merges_ || (whole_newline_runs_ && word.find_first_not_of('\n') == std::string::npos);
  if (whole)
    if (Token id = text_to_token(word); id >= 0) {
      out.push_back(id);
      return;
    }
  struct Symbol {
    int prev, next;
    size_t start, len;  // bytes of `word`; len 0 once merged into the left neighbour
  };
  struct Candidate {
    int rank, left, right;
    size_t left_len, right_len;  // lengths when queued; a change means the pair is stale
  };
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);  // lowest rank, then leftmost
  };
  std::vector<Symbol> syms;  // one per UTF-8 character at first
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(utf8_len(uint8_t(word[off])), word.size() - off);
    syms.push_back({int(syms.size()) - 1, off + len < word.size() ? int(syms.size()) + 1 : -1, off, len});
    off += len;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Symbol &a = syms[size_t(l)], &b = syms[size_t(r)];
    const int rk = rank(std::string_view(word).substr(a.start, a.len), std::string_view(word).substr(b.start, b.len));
    if (rk >= 0) queue.push({rk, l, r, a.len, b.len});
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
    const std::string_view piece = std::string_view(word).substr(s.start, s.len);
    if (Token id = text_to_token(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    // No token for the symbol: llama.cpp falls back to byte tokens where they exist.
    for (char ch : piece)
      if (Token id = byte_fallback_[uint8_t(ch)]; id >= 0) out.push_back(id);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const gguf::File& f, BpeModel model) {
  return std::make_unique<BpeTokenizer>(f, model);
}

}  // namespace ws::tok_detail
