// Chat messages -> prompt text with message boundaries, through the model's own chat
// template (GGUF tokenizer.chat_template or --chat-template FILE), rendered by the
// Jinja interpreter in src/chat/. ChatML only when the model has no template.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/prompt.h"
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
  RenderedText render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools) const;
  bool uses_model_template() const { return tmpl_ != nullptr; }

 private:
  std::unique_ptr<chat::ChatTemplate> tmpl_;
  const Tokenizer& tok_;
  std::string bos_text_, eos_text_;
};

}  // namespace ws::server
