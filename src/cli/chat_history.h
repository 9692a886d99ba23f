// The conversation `warmstart chat` keeps and the prompt it renders from it each turn,
// through chat::PromptRenderer (chat/chat_prompt.h), the entry point the server's
// ChatFormatter uses too, with the same special texts (server::chat_special_texts).
// Header-only so that the tests, which link the libraries and not the executable, run this
// very code: tests/chat_prompt_test.cpp checks it renders what the server renders.
#pragma once
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_prompt.h"
#include "server/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace ws::cli {

class ChatHistory {
 public:
  // `template_source`: the model's chat template (empty: ChatML). One that does not parse
  // is reported on stderr and replaced by ChatML: a terminal chat still works, where the
  // server refuses to start. `system` empty: no system message.
  ChatHistory(const std::string& template_source, const Tokenizer& tok, std::string system)
      : renderer_(make_renderer(template_source, server::chat_special_texts(tok))), system_(std::move(system)) {
    reset();
  }

  // Forgets everything but the system message.
  void reset() {
    messages_ = nlohmann::ordered_json::array();
    if (!system_.empty()) messages_.push_back({{"role", "system"}, {"content", system_}});
  }

  void add(const std::string& role, const std::string& content) {
    messages_.push_back({{"role", role}, {"content", content}});
  }

  // Forgets the oldest user/assistant exchange, to make room in the context. False (and
  // nothing forgotten) when only the system message and the newest message are left.
  bool drop_oldest_exchange() {
    const long first = system_.empty() ? 0 : 1;  // the system message is always kept
    if (long(messages_.size()) <= first + 1) return false;
    messages_.erase(messages_.begin() + first, messages_.begin() + std::min(first + 2, long(messages_.size()) - 1));
    return true;
  }

  // The prompt for the next reply: no tools, no template kwargs.
  chat::RenderedPrompt render() const { return renderer_.render(messages_); }

  const nlohmann::ordered_json& messages() const { return messages_; }

 private:
  static chat::PromptRenderer make_renderer(const std::string& source, const chat::SpecialTexts& special) {
    try {
      return chat::PromptRenderer(source, special);
    } catch (const chat::TemplateError& e) {
      std::fprintf(stderr, "warning: the model's chat template does not parse (%s); using ChatML\n", e.what());
      return chat::PromptRenderer("", special);
    }
  }

  chat::PromptRenderer renderer_;
  std::string system_;
  nlohmann::ordered_json messages_;
};

}  // namespace ws::cli
