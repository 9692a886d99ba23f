#include "server/chat_format.h"

#include <stdexcept>

#include "server/api_error.h"

namespace ws::server {

chat::SpecialTexts chat_special_texts(const Tokenizer& tok) {
  const auto text = [&](Token t) { return t >= 0 ? tok.token_to_piece(t, true) : std::string(); };
  return {text(tok.bos()), text(tok.eos()), tok.add_bos()};
}

ChatFormatter::ChatFormatter(const std::string& template_source, const Tokenizer& tok)
    : renderer_(template_source, chat_special_texts(tok)), dialect_(detect_dialect(template_source)) {}

chat::RenderedPrompt ChatFormatter::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                           const nlohmann::ordered_json& kwargs) const {
  try {
    return renderer_.render(messages, tools, kwargs);
  } catch (const std::invalid_argument& e) {  // ChatML: a message without a role
    throw bad_request(e.what(), "messages");
  } catch (const chat::TemplateError& e) {
    if (e.kind() == chat::TemplateErrorKind::raised)
      throw ApiError(400, std::string("the chat template rejected the messages: ") + e.what(), "invalid_request_error",
                     "messages", "template_error");
    throw ApiError(500, std::string("the chat template failed: ") + e.what(), "server_error", "", "template_error");
  }
}

}  // namespace ws::server
