// Pre-tokenizers of byte-level BPE vocabularies: what each value of `tokenizer.ggml.pre`
// means to llama.cpp (regexes and tokenizer flags), and the regex splitter that applies
// them the way llama.cpp's unicode_regex_split does.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ws::tok_detail {

// Everything a `tokenizer.ggml.pre` value decides, following llama.cpp's llama-vocab.cpp.
struct PreConfig {
  std::vector<std::string> regexes;  // applied one after another, each splitting the previous pieces
  bool clean_spaces = true;          // detokenizer post-processing (clean_up_tokenization_spaces)
  bool ignore_merges = false;        // a pre-token that is itself a token is emitted whole
  bool add_bos = false;              // default of add_bos_token (the GGUF key overrides it)
  bool force_add_bos = false;        // Gemma 4: BOS is added even when the GGUF says false
  bool no_default_bos = false;       // ChatGLM: no BOS id unless the GGUF names one
  // SentencePiece-style BPE (Gemma 4, Sarvam): spaces become U+2581 before splitting, the
  // pieces stay raw UTF-8 (no GPT-2 byte alphabet) and byte fallback uses <0xXX> tokens.
  bool spm_style = false;
  bool whole_newline_runs = false;  // Gemma 4: a run of '\n' that is a token is not merged
};

// The configuration llama.cpp gives `pre`; nullopt for a value it does not know (or that
// needs a tokenizer this engine does not have). An empty value is llama.cpp's 'default'.
std::optional<PreConfig> pre_config(std::string_view pre);

// A list of pre-tokenizer regexes compiled once (PCRE2, UTF + Unicode properties).
class RegexSplitter {
 public:
  // Throws std::runtime_error naming `origin` when a regex does not compile.
  RegexSplitter(const std::vector<std::string>& regexes, const std::string& origin);
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  ~RegexSplitter();

  // Byte ranges (offset, length) of `text` (valid UTF-8) after every regex has split it.
  // As in llama.cpp, matches and the gaps between them are both kept, so the ranges cover
  // the whole text; an empty match still marks a boundary.
  std::vector<std::pair<size_t, size_t>> split(std::string_view text) const;

 private:
  class Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace ws::tok_detail
