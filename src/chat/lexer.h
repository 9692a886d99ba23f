// Tokenizer for Jinja templates with Hugging Face's settings: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, whitespace control with - and +.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ws::chat {

enum class TokenType {
  text,         // literal template text (after whitespace control)
  var_begin,    // {{
  var_end,      // }}
  block_begin,  // {%
  block_end,    // %}
  name,
  string,
  integer,
  floating,
  op,           // operators and punctuation; `text` holds the spelling
  eof,
};

struct Token {
  TokenType type;
  std::string text;  // name, decoded string literal, operator spelling, or template text
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
  int column = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws TemplateError(syntax) with line/column on unterminated tags, strings or comments.
std::vector<Token> tokenize(const std::string& source, const LexerOptions& options = {});

// Jinja normalises line endings (\r\n, \r and the other str.splitlines() separators
// become \n) and drops one trailing newline unless keep_trailing_newline.
std::string normalize_newlines(const std::string& source, bool keep_trailing_newline);

}  // namespace ws::chat
