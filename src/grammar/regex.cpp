// JSON schema `pattern` (an ECMA-262 regular expression) -> a GBNF expression over the
// characters of a JSON string body. The practical subset: literals, '.', classes with
// ranges and negation, \d \w \s (and negations), groups, '|', and the quantifiers * + ?
// {m} {m,} {m,n}. The pattern must be anchored with ^ and $ (as llama.cpp requires):
// an unanchored pattern allows any text around the match, which no grammar should
// generate. Characters JSON must escape are produced in their escaped form.
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace ws::grammar {
namespace {

// Never produced raw inside a JSON string: the quote, the backslash, control characters.
constexpr const char* kJsonExcluded = "\"\\\\\\x00-\\x1F\\x7F";

class RegexConverter {
 public:
  RegexConverter(const std::string& re, const std::string& path) : re_(re), path_(path) {}

  std::string run() {
    if (re_.size() < 2 || re_.front() != '^' || re_.back() != '$' || (re_.size() >= 3 && re_[re_.size() - 2] == '\\'))
      fail(0, "the pattern must start with '^' and end with '$' (unanchored patterns are not supported)");
    p_ = 1;
    end_ = re_.size() - 1;
    std::string out = alternatives();
    if (p_ != end_) fail(p_, std::string("unexpected '") + re_[p_] + "'");
    return out;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw SchemaError("JSON schema at '" + path_ + "': pattern \"" + re_ + "\", offset " + std::to_string(at) + ": " + what);
  }
  bool more() const { return p_ < end_; }

  std::string alternatives() {
    std::string out = sequence();
    while (more() && re_[p_] == '|') {
      ++p_;
      out += " | " + sequence();
    }
    return out;
  }

  std::string sequence() {
    std::string out;
    while (more() && re_[p_] != '|' && re_[p_] != ')') {
      std::string a = atom();
      a += quantifier();
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? "\"\"" : out;
  }

  std::string quantifier() {
    if (!more()) return "";
    std::string q;
    const char c = re_[p_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++p_;
    } else if (c == '{') {
      const size_t close = re_.find('}', p_);
      if (close == std::string::npos || close >= end_) fail(p_, "unclosed '{'");
      q = re_.substr(p_, close - p_ + 1);
      for (char d : q.substr(1, q.size() - 2))
        if (!(d >= '0' && d <= '9') && d != ',') fail(p_, "malformed quantifier " + q);
      p_ = close + 1;
    }
    if (!q.empty() && more() && re_[p_] == '?') ++p_;  // lazy: the same language
    return q;
  }

  // A literal character as GBNF, escaped the way JSON writes it.
  static std::string literal(uint32_t c) {
    if (c == '"') return R"("\\\"")";
    if (c == '\\') return R"("\\\\")";
    if (c == '\n') return R"("\\n")";
    if (c == '\t') return R"("\\t")";
    if (c < 0x20) return "";  // caller fails
    std::string utf8;
    if (c < 0x80) utf8 += char(c);
    else if (c < 0x800) utf8 += char(0xC0 | (c >> 6)), utf8 += char(0x80 | (c & 0x3F));
    else utf8 += char(0xE0 | (c >> 12)), utf8 += char(0x80 | ((c >> 6) & 0x3F)), utf8 += char(0x80 | (c & 0x3F));
    return gbnf_literal(utf8);
  }

  // \d \w \s and their negations as class bodies (no brackets); empty if `e` is none.
  static std::string class_escape(char e) {
    switch (e) {
      case 'd': return "0-9";
      case 'w': return "a-zA-Z0-9_";
      case 's': return " ";  // tab and newline are escapes in JSON; see atom()
      default: return "";
    }
  }

  std::string atom() {
    const char c = re_[p_];
    if (c == '(') {
      if (++depth_ > 64) fail(p_, "groups nested deeper than 64");
      ++p_;
      if (re_.compare(p_, 2, "?:") == 0) p_ += 2;
      else if (more() && re_[p_] == '?') fail(p_, "lookaround and named groups are not supported");
      std::string inner = alternatives();
      if (!more() || re_[p_] != ')') fail(p_, "unclosed '('");
      ++p_;
      --depth_;
      return "(" + inner + ")";
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++p_;
      return "char";
    }
    if (c == '^' || c == '$') fail(p_, "anchors inside the pattern are not supported");
    if (c == '*' || c == '+' || c == '?' || c == '{') fail(p_, std::string("'") + c + "' has nothing to repeat");
    if (c == '\\') {
      if (p_ + 1 >= end_) fail(p_, "a trailing backslash");
      const char e = re_[p_ + 1];
      p_ += 2;
      if (e == 's') return R"(([ ] | "\\t" | "\\n" | "\\r"))";
      if (e == 'd' || e == 'w') return "[" + class_escape(e) + "]";
      if (e == 'D' || e == 'W' || e == 'S')
        return "[^" + class_escape(char(e - 'A' + 'a')) + (e == 'S' ? "" : "") + kJsonExcluded + "]";
      if (e == 'n') return literal('\n');
      if (e == 't') return literal('\t');
      if (std::isalnum(static_cast<unsigned char>(e))) fail(p_ - 2, std::string("unsupported escape '\\") + e + "'");
      return literal(uint32_t(static_cast<unsigned char>(e)));
    }
    return code_point_literal();
  }

  std::string code_point_literal() {
    const auto b = static_cast<unsigned char>(re_[p_]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    const std::string bytes = re_.substr(p_, len);
    p_ += len;
    if (len == 1 && b < 0x20) fail(p_ - 1, "a control character in the pattern");
    if (len == 1) return literal(b);
    return gbnf_literal(bytes);
  }

  // A bracket class copied into GBNF; a negated one also excludes what JSON must escape.
  std::string char_class() {
    const size_t open = p_++;
    std::string body;
    bool negated = false;
    if (more() && re_[p_] == '^') negated = true, ++p_;
    while (more() && re_[p_] != ']') {
      const char c = re_[p_];
      if (c == '\\') {
        if (p_ + 1 >= end_) fail(p_, "a trailing backslash");
        const char e = re_[p_ + 1];
        p_ += 2;
        const std::string esc = class_escape(e);
        if (!esc.empty()) body += esc;
        else if (std::isalnum(static_cast<unsigned char>(e))) fail(p_ - 2, std::string("unsupported escape '\\") + e + "' in a class");
        else if (e == '"' || e == '\\') fail(p_ - 2, "a quote or backslash inside a character class is not supported");
        else if (e == ']' || e == '[' || e == '-' || e == '^') body += std::string("\\") + e;
        else body += e;
        continue;
      }
      if (c == '"') fail(p_, "a quote inside a character class is not supported");
      if (static_cast<unsigned char>(c) < 0x20) fail(p_, "a control character in the pattern");
      body += c;
      ++p_;
    }
    if (!more()) fail(open, "unclosed '['");
    ++p_;
    if (negated) return "[^" + body + kJsonExcluded + "]";
    return "[" + body + "]";
  }

  const std::string& re_;
  const std::string& path_;
  size_t p_ = 0, end_ = 0;
  int depth_ = 0;  // open groups around p_ (the converter recurses once per level)
};

}  // namespace

std::string regex_to_gbnf(const std::string& pattern, const std::string& path) {
  return RegexConverter(pattern, path).run();
}

}  // namespace ws::grammar
