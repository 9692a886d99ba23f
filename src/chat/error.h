// Errors raised while parsing or rendering a chat template.
#pragma once

#include <stdexcept>
#include <string>

namespace ws::chat {

enum class TemplateErrorKind {
  syntax,   // the template text does not parse
  runtime,  // evaluation failed (type error, undefined attribute, limit exceeded, ...)
  raised,   // the template called raise_exception(msg); what() is the template's message
};

// Thrown by ChatTemplate::parse / render. line/column are 1-based; 0 when unknown.
class TemplateError : public std::runtime_error {
 public:
  TemplateError(TemplateErrorKind kind, const std::string& message, int line = 0, int column = 0)
      : std::runtime_error(format(kind, message, line, column)),
        kind_(kind), detail_(message), line_(line), column_(column) {}

  TemplateErrorKind kind() const { return kind_; }
  // The message without the location prefix.
  const std::string& detail() const { return detail_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  static std::string format(TemplateErrorKind kind, const std::string& message, int line, int column) {
    // raise_exception messages are meant for the API user verbatim (as Hugging Face does).
    if (kind == TemplateErrorKind::raised || line <= 0) return message;
    std::string where = "template line " + std::to_string(line);
    if (column > 0) where += ", column " + std::to_string(column);
    return where + ": " + message;
  }

  TemplateErrorKind kind_;
  std::string detail_;
  int line_;
  int column_;
};

// Internal: a failure inside a value operation that does not know its template position.
// The interpreter catches it at the innermost expression and rethrows a TemplateError there.
struct ValueError {
  std::string message;
};

}  // namespace ws::chat
