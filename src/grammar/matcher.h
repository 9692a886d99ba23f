// Matching text against a grammar, byte by byte, and the token-level constraint the
// sampler uses: which tokens of a vocabulary can come next, and advancing on one.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/sampling.h"
#include "grammar/grammar.h"

namespace ws {
class Tokenizer;
}

namespace ws::grammar {

// A pushdown position: the elements still to match, innermost last. The top is always a
// character set (rule references are expanded eagerly); an empty stack is a complete match.
using Stack = std::vector<const Element*>;

// Every live parse (an ambiguous grammar keeps several) and a UTF-8 character in progress.
// The stack set is shared between states until a whole character advances it, so copying
// a state (to try a token) is cheap.
struct MatchState {
  std::shared_ptr<const std::vector<Stack>> stacks;
  uint32_t partial = 0;  // bits of the code point read so far
  uint8_t left = 0;      // continuation bytes still expected
  uint8_t length = 0;    // bytes of the character in progress (to refuse overlong forms)
};

// Remembers, for one grammar, which stack set each (stack set, code point) step leads to.
// Stack sets are interned (one object per content), so inside a string, where a character
// leads back to the same set, a full mask costs a lookup per trie node instead of a
// rebuilt set. Bounded: cleared when it grows past kMaxSets.
class StepMemo {
 public:
  using Set = std::shared_ptr<const std::vector<Stack>>;
  static constexpr size_t kMaxSets = 1 << 16;
  // The canonical object for this content (`s` itself the first time).
  Set intern(Set s);
  // nullptr on a miss; `found` says whether there was an entry (whose value may be null:
  // the step is refused).
  const Set* find(const void* from, uint32_t cp) const;
  void store(const void* from, uint32_t cp, Set to);

 private:
  struct SetHash {
    size_t operator()(const std::vector<Stack>& v) const;
  };
  struct StepHash {
    size_t operator()(const std::pair<const void*, uint32_t>& k) const {
      return std::hash<const void*>{}(k.first) ^ (size_t(k.second) * 0x9E3779B97F4A7C15ull);
    }
  };
  std::unordered_map<std::vector<Stack>, Set, SetHash> sets_;
  std::unordered_map<std::pair<const void*, uint32_t>, Set, StepHash> steps_;  // keys: interned sets only
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {}

  MatchState initial() const;
  // Advances `in` by one byte into `out`; false (out unspecified) when no parse accepts it.
  // With `memo`, `in.stacks` must be interned in it (initial() and advance() with the same
  // memo keep it so).
  bool advance(const MatchState& in, uint8_t byte, MatchState& out, StepMemo* memo = nullptr) const;
  // Advances `st` by every byte of `bytes`; on false `st` is unchanged.
  bool accept(MatchState& st, std::string_view bytes, StepMemo* memo = nullptr) const;
  // Whether the text so far is a complete sentence of the grammar.
  static bool can_end(const MatchState& st);
  // Whether the whole of `text` is a sentence of the grammar.
  bool matches(std::string_view text) const;

  const Grammar& grammar() const { return *g_; }

 private:
  void expand(Stack s, std::vector<Stack>& out) const;
  bool advance_code_point(const MatchState& in, uint32_t cp, MatchState& out, StepMemo* memo) const;

  std::shared_ptr<const Grammar> g_;
};

// A vocabulary as the grammar sees it: each token's bytes (empty: never allowed, e.g. a
// control token) and its end-of-generation flag, with the tokens sorted by bytes so that a
// full mask walks shared prefixes once. Built once per model and shared.
class TokenVocab {
 public:
  TokenVocab(std::vector<std::string> pieces, std::vector<uint8_t> eog);
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tok);

  size_t size() const { return pieces_.size(); }
  const std::string& piece(int32_t t) const { return pieces_[size_t(t)]; }
  bool is_eog(int32_t t) const { return eog_[size_t(t)] != 0; }

 private:
  friend class GrammarFilter;
  std::vector<std::string> pieces_;  // [n_vocab] bytes
  std::vector<uint8_t> eog_;         // [n_vocab] 1: end of generation
  std::vector<int32_t> sorted_;      // non-empty, non-EOG token ids in byte order
  std::vector<uint32_t> lcp_;        // [sorted_] common prefix length with the previous one
};

// Grammar + vocabulary: the constraint a request puts on its sampler.
class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocab> vocab)
      : matcher_(std::move(g)), vocab_(std::move(vocab)) {}
  std::unique_ptr<TokenFilter> start() const override;

 private:
  Matcher matcher_;
  std::shared_ptr<const TokenVocab> vocab_;
};

// The per-generation state: a token is allowed iff all its bytes can be consumed; an
// end-of-generation token iff the grammar can end here.
class GrammarFilter : public TokenFilter {
 public:
  GrammarFilter(const Matcher& m, std::shared_ptr<const TokenVocab> vocab)
      : m_(m), vocab_(std::move(vocab)), state_(m.initial()) {}
  bool allows(int32_t token) override;
  void allowed(std::vector<uint8_t>& mask) override;
  void accept(int32_t token) override;
  const MatchState& state() const { return state_; }

 private:
  const Matcher& m_;
  std::shared_ptr<const TokenVocab> vocab_;
  MatchState state_;
  std::vector<MatchState> levels_;  // allowed(): state after each byte of the current prefix
  StepMemo memo_;
};

}  // namespace ws::grammar
