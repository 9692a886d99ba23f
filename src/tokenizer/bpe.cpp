// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the text is split by the
// pre-tokenizer regexes of `tokenizer.ggml.pre` (PCRE2, Unicode properties), each
// piece is mapped byte-by-byte to GPT-2's printable "bytes_to_unicode" alphabet, and
// merges are applied lowest rank first, as llama.cpp's llm_tokenizer_bpe does.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdio>
#include <initializer_list>
#include <queue>
#include <stdexcept>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace ws::tok_detail {
namespace {

// ---- pre-tokenizer regexes (the strings llama.cpp uses for each `pre` value) ----

constexpr const char* k_re_gpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* k_re_llama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* k_re_qwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* k_re_cjk = "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+";
constexpr const char* k_re_poro = " ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+";
// Tekken / GPT-4o use llama.cpp's lookahead rewrite of \p{Lu}/\p{Ll} so that results
// match it exactly (it treats every non-ASCII letter as both upper and lower case).
constexpr const char* k_re_tekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])"
    "([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* k_re_gpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]"
    "|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR]"
    "[eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* k_re_deepseek3 =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct PreConfig {
  std::vector<std::string> regexes;
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool known = true;
};

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

PreConfig pre_config(const std::string& pre) {
  PreConfig c;
  if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                   "dbrx", "smaug-bpe"})) {
    c.regexes = {k_re_llama3};
    c.ignore_merges = c.add_bos = !one_of(pre, {"dbrx", "smaug-bpe"});
  } else if (pre == "deepseek-llm") {
    c.regexes = {"[\r\n]",
                 "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF\xC7\x84-\xCA\x93"
                 "\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD\xBF\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C"
                 "\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83"
                 "\x85\xE1\x8E\xA0-\xE1\x8F\xB5\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF"
                 "\xE1\xB4\x80-\xE1\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1\xB8\x80-\xE1\xBC\x95\xE1"
                 "\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97\xE1\xBD"
                 "\x99\xE1\xBD\x9B\xE1\xBD\x9D\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC"
                 "\xE1\xBE\xBE\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-\xE1"
                 "\xBF\x9B\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84"
                 "\x87\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8"
                 "\xE2\x84\xAA-\xE2\x84\xAD\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85\x85-\xE2"
                 "\x85\x89\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1\xBE-\xE2\xB3\xA4\xE2\xB3\xAB-"
                 "\xE2\xB3\xAE\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D"
                 "\xAF\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E\x8B-\xEA\x9E\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86"
                 "\xEF\xAC\x93-\xEF\xAC\x97\xEF\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A\\x{10400}-\\x{1044f}"
                 "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}"
                 "\\x{1e900}-\\x{1e943}]+",
                 "\\s?[!-/:-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80\x9F\xE3\x80\x80-\xE3"
                 "\x80\x82]+",
                 "\\s+$", k_re_cjk, "\\p{N}+"};
    c.clean_spaces = false;
  } else if (pre == "deepseek-coder") {
    c.regexes = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", k_re_cjk, "\\p{N}"};
    c.clean_spaces = false;
  } else if (one_of(pre, {"deepseek-v3", "hunyuan-dense"})) {
    c.regexes = {"\\p{N}{1,3}", "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
                 k_re_deepseek3};
    c.clean_spaces = false;
  } else if (pre == "falcon") {
    c.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", k_re_gpt2, "[0-9][0-9][0-9]"};
  } else if (one_of(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    c.regexes = {"\\p{N}", k_re_gpt2};
    c.clean_spaces = !one_of(pre, {"command-r", "smollm"});
  } else if (one_of(pre, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                          "mellum", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais",
                          "trillion", "granite-docling"})) {
    c.regexes = {k_re_gpt2};
    c.clean_spaces = !one_of(pre, {"trillion", "granite-docling"});
  } else if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "stablelm2", "megrez", "hunyuan", "grok-2"})) {
    c.regexes = {k_re_qwen2};
    c.clean_spaces = one_of(pre, {"stablelm2", "megrez"});
  } else if (one_of(pre, {"poro-chat", "bloom", "gpt3-finnish"})) {
    c.regexes = {k_re_poro};
    c.clean_spaces = pre != "poro-chat";
  } else if (pre == "viking") {
    c.regexes = {k_re_poro, "\\p{N}"};
    c.clean_spaces = false;
  } else if (one_of(pre, {"glm4", "chatglm-bpe"})) {
    c.regexes = {k_re_llama3};
  } else if (pre == "tekken") {
    c.regexes = {k_re_tekken};
    c.clean_spaces = false;
    c.ignore_merges = c.add_bos = true;
  } else if (one_of(pre, {"gpt-4o", "llama4", "minimax-m2"})) {
    c.regexes = {k_re_gpt4o};
    c.clean_spaces = false;
  } else if (one_of(pre, {"bailingmoe", "bailingmoe2", "llada-moe"})) {
    c.regexes = {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                 "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
    c.clean_spaces = false;
  } else if (pre == "seed-coder") {
    c.regexes = {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}"
                 "| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    c.clean_spaces = false;
  } else {
    // "default", a missing key, and (like llama.cpp) any unrecognised name.
    c.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", k_re_gpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    c.known = pre == "default";
  }
  return c;
}

// ---- PCRE2 wrapper ----

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

class Regex {
 public:
  Regex(const std::string& pattern, const std::string& file) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // UCP: \s, \d, [[:..:]] and \b use Unicode properties, as the HF tokenizers' regexes expect.
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr));
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw std::runtime_error(file + ": pre-tokenizer regex does not compile at offset " + std::to_string(err_off) +
                               ": " + reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  }

  // Splits each fragment of `frags` (byte ranges of `text`) into matches and the gaps
  // between them, like llama.cpp's unicode_regex_split_stl: nothing is dropped.
  void split(std::string_view text, const std::vector<std::pair<size_t, size_t>>& frags,
             std::vector<std::pair<size_t, size_t>>& out) const {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    if (!md) throw std::bad_alloc();
    out.clear();
    for (auto [off, len] : frags) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + off);
      size_t start = 0, last = 0;
      while (start < len) {
        const int rc = pcre2_match(code_.get(), subject, len, start, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw std::runtime_error("pre-tokenizer regex failed (PCRE2 error " + std::to_string(rc) + ")");
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t s = ov[0], e = ov[1];
        if (e == s) {  // an empty match carries no text; step over one character
          start = s + utf8_len(uint8_t(text[off + s]));
          continue;
        }
        if (s > last) out.emplace_back(off + last, s - last);
        out.emplace_back(off + s, e - s);
        start = last = e;
      }
      if (last < len) out.emplace_back(off + last, len - last);
    }
  }

 private:
  std::unique_ptr<pcre2_code, CodeDeleter> code_;
};

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
  explicit BpeTokenizer(const gguf::File& f);
  std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(Token t, bool special) const override { return cached_piece(t, special); }

 private:
  void encode_text(std::string_view text, std::vector<Token>& out) const;
  void encode_word(const std::string& word, std::vector<Token>& out) const;
  int rank(std::string_view left, std::string_view right) const;

  std::vector<Regex> regexes_;  // applied one after another, each splitting the previous pieces
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> ranks_;  // "left right" -> merge rank
  bool ignore_merges_ = false;  // a pre-token that is itself a token is emitted without merging
};

BpeTokenizer::BpeTokenizer(const gguf::File& f) {
  const std::string pre = f.get_string("tokenizer.ggml.pre");
  PreConfig cfg = pre_config(pre);
  if (!cfg.known)
    std::fprintf(stderr, "warning: %s: %s pre-tokenizer '%s', using 'default' (as llama.cpp does)\n",
                 f.path().c_str(), pre.empty() ? "missing" : "unrecognised", pre.c_str());
  clean_spaces_ = cfg.clean_spaces;
  add_bos_ = cfg.add_bos;
  ignore_merges_ = cfg.ignore_merges;
  load_common(f, /*spm=*/false);

  if (!f.find("tokenizer.ggml.merges")) f.fail("tokenizer.ggml.merges is missing (the gpt2 tokenizer needs it)");
  const std::vector<std::string> merges = f.get_strings("tokenizer.ggml.merges");
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // Split at the first space after the first character, so a merge may start with ' '.
    if (merges[i].find(' ', 1) == std::string::npos) continue;
    ranks_.emplace(merges[i], int(i));  // first occurrence wins, like std::map::emplace
  }
  for (const std::string& re : cfg.regexes) regexes_.emplace_back(re, f.path());

  piece_cache_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto type = tok_detail::TokenType(token_types_[i]);
    if (type == TokenType::control || type == TokenType::unknown || type == TokenType::user_defined)
      piece_cache_[i] = pieces_[i];
    else if (type == TokenType::normal)
      piece_cache_[i] = decode_byte_level(pieces_[i]);
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
  const std::string text = sanitize_utf8(raw);
  std::vector<std::pair<size_t, size_t>> frags = {{0, text.size()}}, next;  // byte ranges of `text`
  for (const Regex& re : regexes_) {
    re.split(text, frags, next);
    frags.swap(next);
  }
  const ByteAlphabet& ab = byte_alphabet();
  std::string word;  // the pre-token in the byte alphabet
  for (auto [off, len] : frags) {
    word.clear();
    for (size_t i = off; i < off + len; ++i) word += ab.encode[uint8_t(text[i])];
    encode_word(word, out);
  }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<Token>& out) const {
  if (word.empty()) return;
  if (ignore_merges_)
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
    // No token for the symbol: llama.cpp falls back to single-byte tokens where they exist.
    for (char ch : piece)
      if (Token id = text_to_token(std::string_view(&ch, 1)); id >= 0) out.push_back(id);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(const gguf::File& f) { return std::make_unique<BpeTokenizer>(f); }

}  // namespace ws::tok_detail
