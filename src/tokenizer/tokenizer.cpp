// Parts shared by every tokenizer: loading the vocabulary and special ids from GGUF,
// special-token partitioning, detokenization and streaming. The behaviour follows
// llama.cpp's llama-vocab.cpp so that token ids match its test vectors exactly.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <stdexcept>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace ws {
namespace tok_detail {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t b = uint8_t(text[i]);
    // Decoding is as lenient as llama.cpp's (no overlong check): only the lead byte's
    // length and the continuation bytes' 10xxxxxx pattern are checked.
    size_t len = 0;
    uint32_t cp = 0;
    if (b < 0x80) len = 1, cp = b;
    else if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1F;
    else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0F;
    else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const uint8_t c = uint8_t(text[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    // Surrogates and code points past U+10FFFF cannot be re-encoded as valid UTF-8.
    if (ok && (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok) {
      append_utf8(out, cp);
      i += len;
    } else {
      append_utf8(out, 0xFFFD);
      i += 1;
    }
  }
  return out;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos)).append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace tok_detail

using tok_detail::TokenType;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  const gguf::Value* model = f.find("tokenizer.ggml.model");
  if (!model) f.fail("no tokenizer in this file (tokenizer.ggml.model is missing)");
  const std::string& name = model->as_string();
  if (name == "gpt2") return tok_detail::make_bpe_tokenizer(f, tok_detail::BpeModel::gpt2);
  if (name == "gemma4") return tok_detail::make_bpe_tokenizer(f, tok_detail::BpeModel::gemma4);
  if (name == "llama") return tok_detail::make_spm_tokenizer(f);
  f.fail("unsupported tokenizer model '" + name +
         "' (supported: 'gpt2' = byte-level BPE, 'gemma4' = BPE over SentencePiece-style text, "
         "'llama' = SentencePiece BPE)");
}

namespace {

// Token texts llama.cpp recognises as end-of-turn / end-of-generation markers.
constexpr std::array<std::string_view, 10> k_eot_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
constexpr std::array<std::string_view, 15> k_eog_texts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    "<eos>", "<turn|>", "<|tool_response>"};  // the last three: Gemma 4
constexpr std::array<std::string_view, 4> k_fim_pad_texts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"};
constexpr std::array<std::string_view, 5> k_fim_rep_texts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                                             "<REPO>", "<reponame>"};
// FIM prefix/suffix/middle texts llama.cpp recognises (Qwen, StarCoder-style, Granite,
// DeepSeek, CodeLlama, GLM-4.5).
constexpr std::array<std::string_view, 7> k_fim_pre_texts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>"};
constexpr std::array<std::string_view, 7> k_fim_suf_texts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>"};
constexpr std::array<std::string_view, 7> k_fim_mid_texts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>"};

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

void Tokenizer::load_common(const gguf::File& f, Token default_bos, Token default_eos) {
  pieces_ = f.get_strings("tokenizer.ggml.tokens");
  if (pieces_.empty()) f.fail("tokenizer.ggml.tokens is missing or empty");
  const size_t n = pieces_.size();
  const std::vector<double> scores = f.get_floats("tokenizer.ggml.scores");
  const std::vector<int64_t> types = f.get_ints("tokenizer.ggml.token_type");
  if (!scores.empty() && scores.size() != n)
    f.fail("tokenizer.ggml.scores has " + std::to_string(scores.size()) + " entries for " + std::to_string(n) + " tokens");
  if (!types.empty() && types.size() != n)
    f.fail("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " + std::to_string(n) +
           " tokens");
  scores_.assign(n, 0.0f);
  token_types_.assign(n, int32_t(TokenType::normal));
  rstrip_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    // An empty token text would match everywhere; llama.cpp renames it the same way.
    if (pieces_[i].empty()) pieces_[i] = "[EMPTY_" + std::to_string(i) + "]";
    token_to_id_[pieces_[i]] = Token(i);  // a duplicate text maps to its last id, as in llama.cpp
    if (!scores.empty()) scores_[i] = float(scores[i]);
    if (!types.empty()) token_types_[i] = (types[i] >= 0 && types[i] <= 6) ? int32_t(types[i]) : 0;
  }
  add_space_prefix_ = f.get_bool("tokenizer.ggml.add_space_prefix", add_space_prefix_);
  bos_ = default_bos;
  eos_ = default_eos;
  read_special_ids(f);
  build_special_cache(f);
}

namespace {
// types: [n_vocab] i32 TokenType per token; id in range.
void set_type(std::vector<int32_t>& types, Token id, TokenType t) { types[size_t(id)] = int32_t(t); }
}  // namespace

void Tokenizer::read_special_ids(const gguf::File& f) {
  const size_t n = pieces_.size();
  Token eom = -1;
  fim_ = {};
  auto read_id = [&](const char* key, Token& id) {
    const int64_t v = f.get_int(key, -1);
    if (v >= 0 && uint64_t(v) < n) id = Token(v);
    else if (v >= 0) std::fprintf(stderr, "warning: %s: %s = %lld is out of range, ignored\n", f.path().c_str(), key, (long long)v);
  };
  read_id("tokenizer.ggml.bos_token_id", bos_);
  read_id("tokenizer.ggml.eos_token_id", eos_);
  read_id("tokenizer.ggml.eot_token_id", eot_);
  read_id("tokenizer.ggml.eom_token_id", eom);
  read_id("tokenizer.ggml.fim_pre_token_id", fim_.pre);
  read_id("tokenizer.ggml.fim_suf_token_id", fim_.suf);
  read_id("tokenizer.ggml.fim_mid_token_id", fim_.mid);
  // llama.cpp's older names for the first three.
  if (fim_.pre < 0) read_id("tokenizer.ggml.prefix_token_id", fim_.pre);
  if (fim_.suf < 0) read_id("tokenizer.ggml.suffix_token_id", fim_.suf);
  if (fim_.mid < 0) read_id("tokenizer.ggml.middle_token_id", fim_.mid);
  read_id("tokenizer.ggml.fim_pad_token_id", fim_.pad);
  read_id("tokenizer.ggml.fim_rep_token_id", fim_.rep);
  read_id("tokenizer.ggml.fim_sep_token_id", fim_.sep);
  add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token", add_bos_);
  add_eos_ = f.get_bool("tokenizer.ggml.add_eos_token", add_eos_);
  if (force_add_bos_) add_bos_ = true;  // llama.cpp's Gemma 4 workaround (its GGUFs say false)
  if (bos_ >= Token(n)) bos_ = -1;  // the default id does not exist in a tiny vocabulary
  if (eos_ >= Token(n)) eos_ = -1;
  // Refused at load, as llama.cpp does, rather than at the first encode.
  if (add_bos_ && bos_ < 0)
    f.fail("tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  if (add_eos_ && eos_ < 0)
    f.fail("tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");

  // llama.cpp finds end-of-turn style tokens by their text and forces them to CONTROL,
  // which also changes how they tokenize (not matched unless parse_special) and print.
  auto find_first = [&](const auto& texts, Token& id) {
    if (id >= 0) return;
    for (std::string_view t : texts)
      if (Token found = text_to_token(t); found >= 0) {
        id = found;
        set_type(token_types_, found, TokenType::control);
        return;
      }
  };
  find_first(k_eot_texts, eot_);
  find_first(std::array<std::string_view, 1>{"<|eom_id|>"}, eom);
  find_first(k_fim_pad_texts, fim_.pad);
  find_first(k_fim_rep_texts, fim_.rep);
  find_first(std::array<std::string_view, 1>{"<|file_sep|>"}, fim_.sep);
  // Prefix/suffix/middle by text too, but keeping their token type: they are not
  // end-of-generation tokens, and retyping them would change how prompts tokenize.
  auto find_keeping_type = [&](const auto& texts, Token& id) {
    for (std::string_view t : texts)
      if (id < 0) id = text_to_token(t);
  };
  find_keeping_type(k_fim_pre_texts, fim_.pre);
  find_keeping_type(k_fim_suf_texts, fim_.suf);
  find_keeping_type(k_fim_mid_texts, fim_.mid);
  collect_end_of_generation(eom);
}

// The tokens that end generation: the ids read above and every end-of-turn text the
// vocabulary has (forced to CONTROL, as llama.cpp does).
void Tokenizer::collect_end_of_generation(Token eom) {
  eog_.clear();
  auto add_eog = [&](Token id) {
    if (id >= 0 && std::find(eog_.begin(), eog_.end(), id) == eog_.end()) eog_.push_back(id);
  };
  add_eog(fim_.pad);
  add_eog(fim_.rep);
  add_eog(fim_.sep);
  for (std::string_view t : k_eog_texts)
    if (Token id = text_to_token(t); id >= 0) {
      add_eog(id);
      set_type(token_types_, id, TokenType::control);
    }
  // gpt-oss (harmony) markers are always printed, like user-defined tokens.
  for (std::string_view t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
    if (Token id = text_to_token(t); id >= 0) set_type(token_types_, id, TokenType::user_defined);
  add_eog(eos_);
  add_eog(eot_);
  add_eog(eom);
  // Harmony: with <|return|> and <|call|> present, <|end|> ends a message, not the turn.
  const Token ret = text_to_token("<|return|>"), call = text_to_token("<|call|>"), end = text_to_token("<|end|>");
  if (ret >= 0 && call >= 0 && end >= 0 && is_eog(ret) && is_eog(call) && is_eog(end)) {
    eog_.erase(std::find(eog_.begin(), eog_.end(), end));
    set_type(token_types_, end, TokenType::user_defined);
  }
}

void Tokenizer::build_special_cache(const gguf::File& f) {
  special_cache_.clear();
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto t = TokenType(token_types_[i]);
    if (t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown)
      special_cache_.push_back(Token(i));
  }
  std::stable_sort(special_cache_.begin(), special_cache_.end(),
                   [&](Token a, Token b) { return pieces_[size_t(a)].size() > pieces_[size_t(b)].size(); });

  // Phi-3: text right after a special token loses its leading whitespace (llama.cpp keys
  // this on general.name).
  std::string name = f.get_string("general.name");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (Token id : special_cache_) rstrip_[size_t(id)] = 1;
    if (Token id = text_to_token("</s>"); id >= 0) rstrip_[size_t(id)] = 1;
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
      if (Token id = text_to_token(t); id >= 0) rstrip_[size_t(id)] = 0;
  }
}

Token Tokenizer::text_to_token(std::string_view s) const {
  auto it = token_to_id_.find(s);
  return it == token_to_id_.end() ? -1 : it->second;
}

std::vector<Tokenizer::Fragment> Tokenizer::partition_special(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;  // the fragment list after splitting at one special token
  for (Token id : special_cache_) {
    const auto type = TokenType(token_types_[size_t(id)]);
    // User-defined tokens are split out even without parse_special (as HF tokenizers do).
    if (!parse_special && (type == TokenType::control || type == TokenType::unknown)) continue;
    const std::string& sp = pieces_[size_t(id)];
    next.clear();
    for (const Fragment& fr : frags) {
      if (fr.token >= 0) {
        next.push_back(fr);
        continue;
      }
      size_t off = fr.offset, len = fr.length;
      while (len > 0) {
        const size_t pos = text.substr(off, len).find(sp);
        if (pos == std::string_view::npos) break;
        if (pos > 0) next.push_back({-1, off, pos});
        next.push_back({id, 0, 0});
        off += pos + sp.size();
        len -= pos + sp.size();
        if (rstrip_[size_t(id)])
          while (len > 0 && is_ascii_space(text[off])) ++off, --len;
      }
      if (len > 0) next.push_back({-1, off, len});
    }
    frags.swap(next);
  }
  return frags;
}

const std::string& Tokenizer::cached_piece(Token t, bool special) const {
  static const std::string empty;
  if (t < 0 || size_t(t) >= piece_cache_.size())
    throw std::out_of_range("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                            std::to_string(piece_cache_.size()) + ")");
  const auto type = TokenType(token_types_[size_t(t)]);
  if (!special && (type == TokenType::control || type == TokenType::unknown)) return empty;
  return piece_cache_[size_t(t)];
}

namespace {

// llama.cpp's clean_spaces post-processing of detokenized text (BPE vocabularies of the
// GPT-2 lineage): " ?" -> "?", " ' " -> "'", " 's" -> "'s", and so on.
std::string clean_spaces(const std::string& in) {
  std::string a;  // pass 1: no space before ? ! . ,
  for (size_t i = 0; i < in.size(); ++i) {
    const char x = in[i];
    if (i > 0 && in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a += x;
  }
  std::string b;  // pass 2: a lone apostrophe between spaces loses both spaces
  bool skipped_prev = false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    const char prev = (i == 0 || skipped_prev) ? '\0' : a[i - 1];
    skipped_prev = false;
    b += x;
    if (i > 0 && x == '\'' && i + 1 < a.size() && prev == ' ' && a[i + 1] == ' ') {
      b.erase(b.size() - 2, 1);  // the space before the apostrophe
      ++i;                       // and the one after it
      skipped_prev = true;
    }
  }
  std::string c;  // pass 3: contractions 's 'm 're 've attach to the previous word
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      const bool attach = (x1 == 's' || x1 == 'm') ||
                          (x1 != 't' && x1 != 'd' && ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')));
      if (attach) c.pop_back();
    }
    c += x;
  }
  return c;
}

}  // namespace

std::string Tokenizer::decode(std::span<const Token> tokens, bool special) const {
  std::string out;
  // SentencePiece adds a space in front of the text; the first piece gives it back.
  bool strip_space = add_space_prefix_;
  for (Token t : tokens) {
    const std::string piece = token_to_piece(t, special);
    if (strip_space && !piece.empty() && piece[0] == ' ') out.append(piece, 1);
    else out += piece;
    strip_space = false;
  }
  return clean_spaces_ ? clean_spaces(out) : out;
}

bool Tokenizer::is_eog(Token t) const { return t >= 0 && std::find(eog_.begin(), eog_.end(), t) != eog_.end(); }

bool Tokenizer::is_control(Token t) const {
  return t >= 0 && size_t(t) < token_types_.size() && token_types_[size_t(t)] == int32_t(TokenType::control);
}

namespace {

// Number of bytes at the end of `s` that start a UTF-8 character not yet complete.
size_t incomplete_tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const uint8_t c = uint8_t(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: its lead is further back
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes (or nothing): invalid, pass it through
}

}  // namespace

std::string StreamDecoder::push(Token t) {
  pending_ += tok_.token_to_piece(t, special_);
  const size_t keep = incomplete_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace ws
