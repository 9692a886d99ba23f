#include "grammar/grammar.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace ws::grammar {

bool Element::matches(uint32_t cp) const {
  bool in = false;
  for (const CharRange& r : ranges)
    if (cp >= r.lo && cp <= r.hi) {
      in = true;
      break;
    }
  return in != negated;
}

bool Element::matches_any(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const CharRange& r : ranges)
      if (r.lo <= hi && r.hi >= lo) return true;
    return false;
  }
  // Negated: some point of [lo, hi] lies outside every range. Walk the ranges that cover
  // `lo` forward until a gap appears.
  uint32_t next = lo;
  bool moved = true;
  while (moved && next <= hi) {
    moved = false;
    for (const CharRange& r : ranges)
      if (next >= r.lo && next <= r.hi) {
        if (r.hi >= hi) return false;
        next = r.hi + 1;
        moved = true;
      }
  }
  return next <= hi;
}

namespace {

constexpr uint32_t kMaxRepeat = 100000;  // {m,n} bound: keeps the rewritten grammar small
constexpr int kMaxNesting = 256;         // parenthesised groups inside one another

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

// Recursive-descent parser; repetition is rewritten into helper rules as it is read.
class Parser {
 public:
  explicit Parser(std::string_view src) : s_(src) {}

  Grammar run(std::string_view root) {
    skip_space(true);
    while (p_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (size_t i = 0; i < g_.rules_.size(); ++i)
      if (!defined_[i]) fail(first_use_[i], "undefined rule '" + g_.rules_[i].name + "'");
    const auto it = ids_.find(std::string(root));
    if (it == ids_.end()) throw GrammarError("grammar: no rule named '" + std::string(root) + "' (the start rule)");
    g_.root_ = it->second;
    check_expansion();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    throw GrammarError("grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }
  bool eof() const { return p_ >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[p_]; }

  // Spaces, tabs and comments; newlines only where the rule may continue on the next line.
  void skip_space(bool newline_ok) {
    while (!eof()) {
      const char c = s_[p_];
      if (c == ' ' || c == '\t') {
        ++p_;
      } else if (c == '#') {
        while (!eof() && s_[p_] != '\n') ++p_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++p_;
      } else {
        break;
      }
    }
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    const auto [it, fresh] = ids_.emplace(name, uint32_t(g_.rules_.size()));
    if (fresh) {
      g_.rules_.push_back(Rule{name, {}});
      defined_.push_back(false);
      first_use_.push_back(at);
    }
    return it->second;
  }
  uint32_t helper_rule(const std::string& base) {
    std::string name;
    do name = base + "_" + std::to_string(helpers_++); while (ids_.count(name));
    const uint32_t id = rule_id(name, p_);
    defined_[id] = true;
    return id;
  }

  std::string parse_name() {
    const size_t start = p_;
    while (!eof() && is_name_char(s_[p_])) ++p_;
    return std::string(s_.substr(start, p_ - start));
  }

  void parse_rule() {
    const size_t at = p_;
    const std::string name = parse_name();
    if (name.empty()) fail(at, std::string("expected a rule name, got '") + peek() + "'");
    skip_space(false);
    if (s_.substr(p_, 3) != "::=") fail(p_, "expected '::=' after the rule name '" + name + "'");
    p_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, at);
    if (defined_[id]) fail(at, "rule '" + name + "' is defined twice");
    defined_[id] = true;
    current_ = name;
    parse_alternatives(id, false);
    skip_space(false);
    if (!eof() && peek() != '\n' && peek() != '\r')
      fail(p_, std::string("expected the end of rule '") + name + "' (a newline), got '" + peek() + "'");
  }

  void parse_alternatives(uint32_t rule, bool nested) {
    for (;;) {
      std::vector<Element> seq;
      parse_sequence(seq, nested);
      seq.push_back(Element{});  // Kind::end
      g_.rules_[rule].alts.push_back(std::move(seq));
      if (peek() != '|') return;
      ++p_;
      skip_space(true);
    }
  }

  void parse_sequence(std::vector<Element>& seq, bool nested) {
    for (;;) {
      const size_t start = seq.size();
      const char c = peek();
      if (c == '"') {
        parse_literal(seq);
      } else if (c == '[') {
        seq.push_back(parse_class());
      } else if (c == '.') {
        ++p_;
        seq.push_back(Element{Element::Kind::chars, true, 0, {}});  // negated empty set: any character
      } else if (c == '(') {
        const size_t open = p_++;
        // The parser recurses once per level; a bound keeps hostile input off the stack's end.
        if (++depth_ > kMaxNesting) fail(open, "groups nested deeper than " + std::to_string(kMaxNesting));
        skip_space(true);
        const uint32_t id = helper_rule(current_);
        parse_alternatives(id, true);
        --depth_;
        skip_space(true);
        if (peek() != ')') fail(open, "unclosed '(' (expected ')')");
        ++p_;
        seq.push_back(Element{Element::Kind::rule_ref, false, id, {}});
      } else if (c == '<') {
        fail(p_, "token references (<...>) are not supported");
      } else if (is_name_char(c)) {
        const size_t at = p_;
        const std::string name = parse_name();
        seq.push_back(Element{Element::Kind::rule_ref, false, rule_id(name, at), {}});
      } else {
        return;
      }
      skip_space(nested);
      if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') {
        parse_repetition(seq, start);
        skip_space(nested);
      }
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail(p_, "expected " + std::to_string(digits) + " hex digits in the escape");
      v = v * 16 + uint32_t(d);
      ++p_;
    }
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  uint32_t parse_char() {
    if (eof()) fail(p_, "unexpected end of the grammar");
    const unsigned char c = static_cast<unsigned char>(s_[p_]);
    if (c == '\\') {
      ++p_;
      const char e = peek();
      ++p_;
      switch (e) {
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': return uint32_t(e);
        default: fail(p_ - 2, std::string("unknown escape '\\") + e + "'");
      }
    }
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || p_ + size_t(len) > s_.size()) fail(p_, "invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) cp = (cp << 6) | (uint32_t(static_cast<unsigned char>(s_[p_ + size_t(i)])) & 0x3F);
    p_ += size_t(len);
    return cp;
  }

  void parse_literal(std::vector<Element>& seq) {
    const size_t open = p_++;
    while (peek() != '"') {
      if (eof() || peek() == '\n') fail(open, "unterminated string literal (expected '\"')");
      const uint32_t cp = parse_char();
      seq.push_back(Element{Element::Kind::chars, false, 0, {{cp, cp}}});
    }
    ++p_;
  }

  Element parse_class() {
    const size_t open = p_++;
    Element e{Element::Kind::chars, false, 0, {}};
    if (peek() == '^') e.negated = true, ++p_;
    while (peek() != ']') {
      if (eof() || peek() == '\n') fail(open, "unterminated character class (expected ']')");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (peek() == '-' && p_ + 1 < s_.size() && s_[p_ + 1] != ']') {
        ++p_;
        const size_t at = p_;
        hi = parse_char();
        if (hi < lo) fail(at, "character range end is below its start");
      }
      e.ranges.push_back({lo, hi});
    }
    ++p_;
    return e;
  }

  uint32_t parse_count() {
    const size_t at = p_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > kMaxRepeat) fail(at, "repetition count above " + std::to_string(kMaxRepeat));
      ++p_;
    }
    if (p_ == at) fail(at, "expected a number in the repetition {m,n}");
    return uint32_t(v);
  }

  // Rewrites seq[start..] (the last symbol) repeated by the operator at p_.
  void parse_repetition(std::vector<Element>& seq, size_t start) {
    if (start == seq.size()) fail(p_, std::string("'") + peek() + "' has nothing to repeat");
    uint32_t lo = 0, hi = UINT32_MAX;  // UINT32_MAX: unbounded
    const char op = s_[p_++];
    if (op == '+') lo = 1;
    else if (op == '?') hi = 1;
    else if (op == '{') {
      skip_space(true);
      if (peek() != ',') lo = parse_count();
      skip_space(true);
      if (peek() == ',') {
        ++p_;
        skip_space(true);
        if (peek() != '}') hi = parse_count();
      } else {
        hi = lo;
      }
      skip_space(true);
      if (peek() != '}') fail(p_, "expected '}' closing the repetition");
      ++p_;
      if (hi < lo) fail(p_ - 1, "repetition {m,n} with n < m");
    }
    // The repeated unit as one element: a symbol of several elements (a literal) gets a rule.
    Element unit;
    if (seq.size() - start == 1) {
      unit = seq.back();
    } else {
      const uint32_t id = helper_rule(current_);
      std::vector<Element> body(seq.begin() + ptrdiff_t(start), seq.end());
      body.push_back(Element{});
      g_.rules_[id].alts.push_back(std::move(body));
      unit = Element{Element::Kind::rule_ref, false, id, {}};
    }
    seq.resize(start);
    for (uint32_t i = 0; i < lo; ++i) seq.push_back(unit);
    if (hi == UINT32_MAX) {
      // R ::= unit R | (empty)
      const uint32_t id = helper_rule(current_);
      const Element self{Element::Kind::rule_ref, false, id, {}};
      g_.rules_[id].alts = {{unit, self, Element{}}, {Element{}}};
      seq.push_back(self);
    } else if (hi > lo) {
      // R_k ::= unit R_{k-1} | (empty), nested hi - lo deep.
      if (hi - lo > 64) bounded_units_.push_back({unit, p_});  // checked once nullability is known
      uint32_t inner = UINT32_MAX;
      for (uint32_t k = 0; k < hi - lo; ++k) {
        const uint32_t id = helper_rule(current_);
        std::vector<Element> body{unit};
        if (inner != UINT32_MAX) body.push_back(Element{Element::Kind::rule_ref, false, inner, {}});
        body.push_back(Element{});
        g_.rules_[id].alts = {std::move(body), {Element{}}};
        inner = id;
      }
      seq.push_back(Element{Element::Kind::rule_ref, false, inner, {}});
    }
  }

  // A rule that can reach itself without consuming a character would make the matcher's
  // expansion loop forever; llama.cpp rejects such grammars too.
  void check_expansion() const {
    const size_t n = g_.rules_.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : g_.rules_[r].alts) {
          bool all = true;
          for (const Element& e : alt)
            if (e.kind == Element::Kind::chars || (e.kind == Element::Kind::rule_ref && !nullable[e.rule])) all = false;
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    // A long {m,n} of something that can match nothing would make every expansion walk the
    // whole chain of optional copies (and recurse as deep).
    for (const auto& [unit, at] : bounded_units_)
      if (unit.kind == Element::Kind::rule_ref && nullable[unit.rule])
        fail(at, "a repetition {m,n} with n - m > 64 of something that can match nothing");
    std::vector<char> mark(n, 0);  // 0 unvisited, 1 on the path, 2 done
    std::function<void(size_t)> visit = [&](size_t r) {
      mark[r] = 1;
      for (const auto& alt : g_.rules_[r].alts)
        for (const Element& e : alt) {
          if (e.kind != Element::Kind::rule_ref) break;
          if (mark[e.rule] == 1)
            throw GrammarError("grammar: rule '" + g_.rules_[e.rule].name +
                               "' is left-recursive (it can reach itself before consuming a character)");
          if (mark[e.rule] == 0) visit(e.rule);
          if (!nullable[e.rule]) break;
        }
      mark[r] = 2;
    };
    for (size_t r = 0; r < n; ++r)
      if (mark[r] == 0) visit(r);
  }

  std::string_view s_;
  size_t p_ = 0;
  Grammar g_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;  // [rules] offset of the first reference (for "undefined rule")
  std::string current_;            // the rule being parsed (helper rules are named after it)
  uint32_t helpers_ = 0;
  int depth_ = 0;  // open '(' around p_
  std::vector<std::pair<Element, size_t>> bounded_units_;  // units of long {m,n} and where they were
};

Grammar Grammar::parse(std::string_view gbnf, std::string_view root) { return Parser(gbnf).run(root); }

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;  // UTF-8 bytes pass through: the parser reads code points
    }
  }
  return out + "\"";
}

}  // namespace ws::grammar
