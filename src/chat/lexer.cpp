#include "chat/lexer.h"

#include <cctype>

#include "chat/error.h"
#include "chat/text.h"

namespace ws::chat {

std::string normalize_newlines(const std::string& source, bool keep_trailing_newline) {
  // Jinja splits on \r\n|\r|\n and joins with \n (its newline_sequence).
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

enum class TagKind { var, block, comment };

// Python's str.rstrip() without arguments (Unicode whitespace), for `{%-`.
std::string rstrip_space(const std::string& s) { return text::strip(s, std::nullopt, false, true); }

class Lexer {
 public:
  Lexer(std::string src, const LexerOptions& opt) : src_(std::move(src)), opt_(opt) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_data();
    push(TokenType::eof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg, size_t at) const {
    auto [line, col] = where(at);
    throw TemplateError(TemplateErrorKind::syntax, msg, line, col);
  }

  std::pair<int, int> where(size_t at) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      const size_t mid = (lo + hi) / 2;
      (line_starts_[mid] <= at ? lo : hi) = mid;
    }
    return {static_cast<int>(lo + 1), static_cast<int>(at - line_starts_[lo] + 1)};
  }

  Token& push(TokenType type, std::string text, size_t at) {
    auto [line, col] = where(at);
    tokens_.push_back(Token{type, std::move(text), 0, 0.0, line, col});
    return tokens_.back();
  }

  bool starts(size_t at, const char* s) const { return src_.compare(at, std::char_traits<char>::length(s), s) == 0; }

  // Skips whitespace (Python's \s) at pos_, returns the new position.
  size_t skip_ws(size_t at) const {
    while (at < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[at]);
      if (c < 0x80) {
        if (!text::is_space(c)) break;
        ++at;
        continue;
      }
      // Multi-byte whitespace (U+00A0, U+2028, ...).
      size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
      const auto cps = text::decode(std::string_view(src_).substr(at, n));
      if (cps.size() != 1 || !text::is_space(cps[0])) break;
      at += n;
    }
    return at;
  }

  // Emits the text up to the next tag, applying the tag's leading whitespace control.
  void lex_data() {
    size_t start = std::string::npos;
    TagKind kind = TagKind::var;
    for (size_t i = src_.find('{', pos_); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      const char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') {
        start = i;
        kind = c == '{' ? TagKind::var : c == '%' ? TagKind::block : TagKind::comment;
        break;
      }
    }
    if (start == std::string::npos) {
      push(TokenType::text, src_.substr(pos_), pos_);
      pos_ = src_.size();
      return;
    }
    std::string data = src_.substr(pos_, start - pos_);
    const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
    const bool has_sign = sign == '-' || (sign == '+' && kind != TagKind::var);
    if (sign == '-') {
      data = rstrip_space(data);
    } else if (sign != '+' && opt_.lstrip_blocks && kind != TagKind::var) {
      // lstrip_blocks: drop spaces/tabs between the start of the line and a block tag.
      const size_t l_pos = data.rfind('\n') == std::string::npos ? 0 : data.rfind('\n') + 1;
      if (l_pos > 0 || line_starting_) {
        bool only_ws = l_pos < data.size();
        for (size_t k = l_pos; k < data.size(); ++k)
          if (data[k] != ' ' && data[k] != '\t') only_ws = false;
        if (only_ws) data.resize(l_pos);
      }
    }
    if (!data.empty()) push(TokenType::text, std::move(data), pos_);
    pos_ = start + 2 + (has_sign ? 1 : 0);
    if (kind == TagKind::comment) {
      lex_comment(start);
    } else if (kind == TagKind::block && try_raw(start)) {
      // handled
    } else {
      lex_tag(kind, start);
    }
  }

  // After a closing %} / #}: trim_blocks drops one newline; "-" drops all whitespace.
  void after_close(size_t end, char sign, bool block_like) {
    if (sign == '-') {
      end = skip_ws(end);
    } else if (sign != '+' && block_like && opt_.trim_blocks && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  void lex_comment(size_t start) {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos) fail("unclosed comment: missing '#}'", start);
    char sign = '\0';
    if (close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    after_close(close + 2, sign, true);
  }

  // {% raw %}...{% endraw %}: the body is literal text.
  bool try_raw(size_t start) {
    size_t p = skip_ws(pos_);
    if (!starts(p, "raw")) return false;
    p = skip_ws(p + 3);
    char sign = '\0';
    if (p < src_.size() && src_[p] == '-') sign = '-', ++p;
    if (!starts(p, "%}")) return false;
    p += 2;
    if (sign == '-') p = skip_ws(p);
    for (size_t q = src_.find("{%", p); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      const char open_sign = r < src_.size() ? src_[r] : '\0';
      if (open_sign == '-' || open_sign == '+') ++r;
      r = skip_ws(r);
      if (!starts(r, "endraw")) continue;
      r = skip_ws(r + 6);
      char close_sign = '\0';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) close_sign = src_[r], ++r;
      if (!starts(r, "%}")) continue;
      std::string body = src_.substr(p, q - p);
      if (open_sign == '-') body = rstrip_space(body);
      if (!body.empty()) push(TokenType::text, std::move(body), p);
      after_close(r + 2, close_sign, true);
      return true;
    }
    fail("unclosed raw block: missing '{% endraw %}'", start);
  }

  void lex_tag(TagKind kind, size_t start) {
    push(kind == TagKind::var ? TokenType::var_begin : TokenType::block_begin, "", start);
    const char* close = kind == TagKind::var ? "}}" : "%}";
    int depth = 0;  // bracket nesting: `}}` inside a dict literal is not the end
    for (;;) {
      pos_ = skip_ws(pos_);
      if (pos_ >= src_.size())
        fail(std::string("unexpected end of template: missing '") + close + "'", start);
      char sign = '\0';
      size_t p = pos_;
      if (src_[p] == '-' || (src_[p] == '+' && kind == TagKind::block)) sign = src_[p], ++p;
      if (depth <= 0 && starts(p, close)) {
        push(kind == TagKind::var ? TokenType::var_end : TokenType::block_end, "", pos_);
        after_close(p + 2, sign, kind == TagKind::block);
        return;
      }
      lex_token(depth);
    }
  }

  void lex_token(int& depth) {
    const size_t at = pos_;
    const char c = src_[at];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = at + 1;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      push(TokenType::name, src_.substr(at, e - at), at);
      pos_ = e;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string();
    } else {
      static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "<", ">",
                                  "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
      for (const char* op : ops) {
        if (starts(at, op)) {
          push(TokenType::op, op, at);
          pos_ += std::char_traits<char>::length(op);
          if (*op == '(' || *op == '[' || *op == '{') ++depth;
          if ((*op == ')' || *op == ']' || *op == '}') && op[1] == '\0') --depth;
          return;
        }
      }
      fail(std::string("unexpected character '") + c + "'", at);
    }
  }

  void lex_number() {
    const size_t at = pos_;
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p + 1])))))
        ++p;
      return p;
    };
    size_t e = digits(at);
    bool is_float = false;
    // `x.0.1` is attribute access: after a '.', only integers.
    const bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::op && tokens_.back().text == ".";
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) e = digits(q), is_float = true;
    }
    std::string spelling;
    for (size_t k = at; k < e; ++k)
      if (src_[k] != '_') spelling.push_back(src_[k]);
    Token& t = push(is_float ? TokenType::floating : TokenType::integer, spelling, at);
    if (is_float) {
      t.float_value = std::strtod(spelling.c_str(), nullptr);
    } else {
      errno = 0;
      const unsigned long long v = std::strtoull(spelling.c_str(), nullptr, 10);
      if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) fail("integer literal too large", at);
      t.int_value = static_cast<int64_t>(v);
    }
    pos_ = e;
  }

  // Python "unicode-escape" decoding of the literal body, as Jinja does.
  void lex_string() {
    const size_t at = pos_;
    const char quote = src_[at];
    std::string out;
    size_t p = at + 1;
    for (;;) {
      if (p >= src_.size()) fail("unterminated string literal", at);
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail("unterminated string literal", at);
      p = decode_escape(p, out);
    }
    push(TokenType::string, std::move(out), at);
    pos_ = p + 1;
  }

  size_t decode_escape(size_t p, std::string& out) {
    const char e = src_[p + 1];
    switch (e) {
      case 'n': out.push_back('\n'); return p + 2;
      case 't': out.push_back('\t'); return p + 2;
      case 'r': out.push_back('\r'); return p + 2;
      case '\\': out.push_back('\\'); return p + 2;
      case '\'': out.push_back('\''); return p + 2;
      case '"': out.push_back('"'); return p + 2;
      case 'b': out.push_back('\b'); return p + 2;
      case 'f': out.push_back('\f'); return p + 2;
      case 'v': out.push_back('\v'); return p + 2;
      case 'a': out.push_back('\a'); return p + 2;
      case '\n': return p + 2;  // line continuation
      case 'x': case 'u': case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (p + 2 + n > src_.size()) fail("truncated \\" + std::string(1, e) + " escape in string literal", p);
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const char h = src_[p + 2 + k];
          if (!std::isxdigit(static_cast<unsigned char>(h)))
            fail("truncated \\" + std::string(1, e) + " escape in string literal", p);
          cp = cp * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        if (cp > 0x10FFFF) fail("illegal Unicode character in string literal", p);
        text::append_utf8(out, cp);
        return p + 2 + n;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = 0;
          size_t k = p + 1;
          for (int d = 0; d < 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++d, ++k)
            cp = cp * 8 + (src_[k] - '0');
          text::append_utf8(out, cp);
          return k;
        }
        out.push_back('\\');  // unknown escapes stay literal, as in Python
        return p + 1;
    }
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexerOptions& options) {
  return Lexer(normalize_newlines(source, options.keep_trailing_newline), options).run();
}

}  // namespace ws::chat
