// Tokenizers read from GGUF metadata: BPE (byte-level gpt2-style with the pre-tokenizer
// of `tokenizer.ggml.pre`, or gemma4's over SentencePiece-style text) and
// SentencePiece-style (llama).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"

namespace ws {

using Token = int32_t;

// Fill-in-the-middle tokens (-1: the model has none): prefix, suffix, middle, padding,
// repository name and file separator.
struct FimTokens {
  Token pre = -1, suf = -1, mid = -1, pad = -1, rep = -1, sep = -1;
};

class Tokenizer {
 public:
  // Throws std::runtime_error naming the file and the unsupported model/pre value.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f);
  virtual ~Tokenizer() = default;

  // add_special: BOS/EOS as the GGUF's add_bos_token/add_eos_token say.
  // parse_special: control/user-defined token texts in `text` become their ids.
  virtual std::vector<Token> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
  // Raw bytes of a token (byte tokens decoded, SPM '▁' -> ' '); control tokens give
  // their text only when `special` is true.
  virtual std::string token_to_piece(Token t, bool special) const = 0;
  std::string decode(std::span<const Token> tokens, bool special = false) const;

  int32_t n_vocab() const { return int32_t(pieces_.size()); }
  const std::string& raw_piece(Token t) const { return pieces_.at(size_t(t)); }  // as stored in GGUF
  Token bos() const { return bos_; }
  Token eos() const { return eos_; }
  Token eot() const { return eot_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  const FimTokens& fim() const { return fim_; }
  bool is_eog(Token t) const;  // end of generation (eos, eot, eom and the like)
  bool is_control(Token t) const;

 protected:
  // A piece of the input after special-token partitioning: either a special token
  // (token >= 0) or the raw text [offset, offset + length) still to be tokenized.
  struct Fragment {
    Token token = -1;
    size_t offset = 0, length = 0;
  };
  // Heterogeneous lookup so string_views can be looked up without a copy.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // Reads the vocabulary, special ids and flags common to every model type, the way
  // llama.cpp's vocab loader does. Subclasses set their defaults for add_bos_,
  // add_space_prefix_, clean_spaces_ and force_add_bos_ first; GGUF keys override them
  // here. The default ids are llama.cpp's per tokenizer model (-1: none).
  void load_common(const gguf::File& f, Token default_bos, Token default_eos);
  void read_special_ids(const gguf::File& f);     // bos/eos/eot/FIM ids, add_* flags, the EOG set
  void collect_end_of_generation(Token eom);      // eog_ (and token types) from the ids read
  void build_special_cache(const gguf::File& f);  // special_cache_ and the phi-3 rstrip flags
  // Splits `text` at special-token texts, longest first, as llama.cpp does: control and
  // unknown tokens only when parse_special, user-defined tokens always.
  std::vector<Fragment> partition_special(std::string_view text, bool parse_special) const;
  Token text_to_token(std::string_view s) const;  // -1 when `s` is no token
  // Shared body of token_to_piece once piece_cache_ is filled by the subclass.
  const std::string& cached_piece(Token t, bool special) const;

  std::vector<std::string> pieces_;     // [n_vocab]
  std::vector<int32_t> token_types_;    // [n_vocab] GGUF token_type (1 normal, 3 control, ...), after llama.cpp's fix-ups
  std::vector<float> scores_;           // [n_vocab] SPM merge scores (0 when absent)
  std::vector<uint8_t> rstrip_;         // [n_vocab] 1: whitespace right after this special token is dropped (phi-3)
  std::vector<std::string> piece_cache_;  // [n_vocab] bytes of each token as printed with special=true
  std::vector<Token> special_cache_;    // control/user-defined/unknown ids, longest text first
  std::unordered_map<std::string, Token, StringHash, std::equal_to<>> token_to_id_;
  Token bos_ = -1, eos_ = -1, eot_ = -1;
  FimTokens fim_;
  std::vector<Token> eog_;
  bool add_bos_ = false, add_eos_ = false;
  bool force_add_bos_ = false;     // add_bos_ stays true whatever the GGUF says (Gemma 4)
  bool add_space_prefix_ = false;  // SPM: prepend ' ' to text that starts the input or follows a special token
  bool clean_spaces_ = false;      // decode: drop spaces before punctuation like llama.cpp's clean_spaces
};

// Streams text token by token without ever emitting half a UTF-8 character.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false) : tok_(tok), special_(special) {}
  std::string push(Token t);  // complete characters available so far
  std::string flush();        // whatever is left (invalid bytes passed through)

 private:
  const Tokenizer& tok_;
  bool special_;
  std::string pending_;
};

}  // namespace ws
