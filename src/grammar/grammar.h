// GBNF grammars (the format of llama.cpp's grammars/README.md): parsing into rules of
// alternatives of element sequences, with repetition operators rewritten into helper rules
// so that the matcher only ever sees character sets and rule references.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ws::grammar {

// A malformed grammar: the message names the line:column and what was expected there.
class GrammarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CharRange {
  uint32_t lo, hi;  // inclusive code points
};

struct Element {
  enum class Kind : uint8_t { end, rule_ref, chars };
  Kind kind = Kind::end;
  bool negated = false;            // chars: matches every code point outside `ranges`
  uint32_t rule = 0;               // rule_ref: index into Grammar::rules
  std::vector<CharRange> ranges;   // chars

  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (used for a partial UTF-8 sequence).
  bool matches_any(uint32_t lo, uint32_t hi) const;
};

struct Rule {
  std::string name;
  // Each alternative is a sequence ending with a Kind::end element, so a position inside
  // an alternative always points at a valid element.
  std::vector<std::vector<Element>> alts;
};

class Grammar {
 public:
  // Throws GrammarError (position and expectation) for a malformed grammar, an undefined
  // rule, a missing root rule or left recursion (which the matcher could not expand).
  static Grammar parse(std::string_view gbnf, std::string_view root = "root");

  const std::vector<Rule>& rules() const { return rules_; }
  uint32_t root() const { return root_; }

 private:
  friend class Parser;
  std::vector<Rule> rules_;
  uint32_t root_ = 0;
};

// The GBNF string literal (quotes included) that matches exactly `text` (UTF-8).
std::string gbnf_literal(std::string_view text);

}  // namespace ws::grammar
