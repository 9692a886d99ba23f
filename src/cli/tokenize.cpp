// `warmstart tokenize`: prints the token ids of a text (and optionally the pieces) as
// JSON. Only the GGUF metadata and the tokenizer are loaded, so vocab-only files work.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ws::cli {
namespace {

struct TokenizeOptions {
  std::string model, text, file;
  bool special = false, no_bos = false, pieces = false;
};

// Length of the well-formed UTF-8 sequence at s[i] (no overlongs, surrogates or code
// points past U+10FFFF), or 0 when the byte there does not start one.
size_t valid_utf8_at(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t b = at(i);
  if (b < 0x80) return 1;
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) len = 2;
  else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + len > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  return len;
}

// A JSON string literal holding `s` byte-exactly: valid UTF-8 is copied, every byte that
// is not part of a valid sequence becomes \u00XX with the raw byte value.
std::string json_bytes(const std::string& s) {
  std::string out = "\"";
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = uint8_t(s[i]);
    const size_t len = valid_utf8_at(s, i);
    if (len == 0 || b < 0x20 || b == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(b));
      out += buf;
      ++i;
    } else if (b == '"' || b == '\\') {
      out += '\\';
      out += char(b);
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out + "\"";
}

int run_tokenize(const TokenizeOptions& o, bool have_text) {
  if (!have_text && o.file.empty()) throw std::runtime_error("give the text to tokenize with --text or --file");
  const std::string text = have_text ? o.text : read_file(o.file);
  const gguf::File f = gguf::File::open(o.model);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(f);
  const std::vector<Token> ids = tok->encode(text, /*add_special=*/!o.no_bos, o.special);
  std::string line = "[";
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
  std::printf("%s]\n", line.c_str());
  if (o.pieces) {
    line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + json_bytes(tok->token_to_piece(ids[i], true));
    std::printf("%s]\n", line.c_str());
  }
  return 0;
}

}  // namespace

Command add_tokenize(CLI::App& root) {
  auto o = std::make_shared<TokenizeOptions>();
  auto* app = root.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  app->add_option("-m,--model", o->model, "GGUF file with a tokenizer (a vocab-only file is enough)")->required();
  auto* text = app->add_option("--text", o->text, "text to tokenize");
  auto* file = app->add_option("--file", o->file, "file whose bytes are tokenized verbatim");
  text->excludes(file);
  app->add_flag("--special", o->special, "turn special-token texts (e.g. <|im_start|>) into their ids");
  app->add_flag("--no-bos", o->no_bos, "add no BOS/EOS at all (default: as the GGUF's add_bos/add_eos say)");
  app->add_flag("--pieces", o->pieces, "also print each token's bytes as a JSON array (invalid UTF-8 as \\u00XX)");
  return {app, [o, text] { return run_tokenize(*o, text->count() > 0); }};
}

}  // namespace ws::cli
