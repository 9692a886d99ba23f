// Chat messages -> prompt text with message boundaries, through the model's own chat
// template (GGUF tokenizer.chat_template or --chat-template FILE). A thin adapter over
// chat::PromptRenderer (chat/chat_prompt.h), the entry point the CLI uses too: this file
// only reads the special texts off the tokenizer and turns template errors into ApiError.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_prompt.h"
#include "server/chat_reply.h"
#include "tokenizer/tokenizer.h"

namespace ws::server {

// The BOS/EOS texts and add_bos flag of `tok`, as the chat templates are given them.
chat::SpecialTexts chat_special_texts(const Tokenizer& tok);

class ChatFormatter {
 public:
  // `template_source` empty: ChatML. A template that does not parse throws
  // ws::chat::TemplateError (the server refuses to start rather than fail every request).
  ChatFormatter(const std::string& template_source, const Tokenizer& tok);

  // chat::PromptRenderer::render with add_generation_prompt = true. Template errors become
  // ApiError: 400 when the template raised (it rejects these messages), 500 otherwise.
  chat::RenderedPrompt render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                              const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object()) const;
  bool uses_model_template() const { return renderer_.uses_model_template(); }
  // The template's tool-call and reasoning syntax (tool_calls.h).
  const TemplateDialect& dialect() const { return dialect_; }

 private:
  chat::PromptRenderer renderer_;
  TemplateDialect dialect_;
};

}  // namespace ws::server
