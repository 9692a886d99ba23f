// Chat templates: Jinja2 templates as Hugging Face's apply_chat_template renders them
// (trim_blocks, lstrip_blocks, no trailing newline, immutable sandbox, json.dumps-based
// tojson, raise_exception and strftime_now globals, the {% generation %} tag).
//
// Pass contexts as nlohmann::ordered_json: templates tojson messages and tools, and
// Python keeps object keys in insertion order. A plain nlohmann::json sorts keys.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/error.h"
#include "chat/options.h"

namespace ws::chat {

class Value;

class ChatTemplate {
 public:
  // Throws TemplateError (syntax) with line/column when the template does not parse.
  static ChatTemplate parse(std::string source);

  // Renders with the object `context` as the template's variables. Throws TemplateError:
  // kind runtime for evaluation failures (with line/column), kind raised when the template
  // called raise_exception (what() is then the template's own message).
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
  std::string render(const nlohmann::json& context, const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  struct Impl;
  explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::string render_value(const Value& context, const RenderOptions& options) const;

  std::shared_ptr<const Impl> impl_;
};

}  // namespace ws::chat
