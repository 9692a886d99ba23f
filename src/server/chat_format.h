// Chat messages -> prompt text with message boundaries, through the model's own chat
// template (GGUF tokenizer.chat_template or --chat-template FILE), rendered by the
// Jinja interpreter in src/chat/. ChatML only when the model has no template.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/prompt.h"
#include "server/chat_reply.h"
#include "tokenizer/tokenizer.h"

namespace ws::chat {
class ChatTemplate;
}

namespace ws::server {

class ChatFormatter {
 public:
  // `template_source` empty: ChatML. A template that does not parse throws
  // ws::chat::TemplateError (the server refuses to start rather than fail every request).
  ChatFormatter(const std::string& template_source, const Tokenizer& tok);
  ~ChatFormatter();
  ChatFormatter(const ChatFormatter&) = delete;
  ChatFormatter& operator=(const ChatFormatter&) = delete;

  // Renders with add_generation_prompt = true. Template errors become ApiError: 400 when
  // the template raised (it rejects these messages), 500 otherwise.
  // `kwargs` (chat_template_kwargs) are extra template variables, e.g. enable_thinking.
  // A conversation the template cannot render as sent (null content next to tool_calls,
  // arguments as a JSON string where it iterates an object) is rendered again normalised,
  // as llama-server's template polyfills do, instead of failing.
  RenderedText render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                      const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;
  bool uses_model_template() const { return tmpl_ != nullptr; }
  // The template's tool-call and reasoning syntax (tool_calls.h).
  const TemplateDialect& dialect() const { return dialect_; }

 private:
  std::unique_ptr<chat::ChatTemplate> tmpl_;
  const Tokenizer& tok_;
  std::string bos_text_, eos_text_;
  TemplateDialect dialect_;
};

}  // namespace ws::server
