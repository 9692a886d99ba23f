#include "server/chat_format.h"

#include "chat/prompt.h"
#include "chat/template.h"
#include "server/api_error.h"

namespace ws::server {
namespace {

std::string special_text(const Tokenizer& tok, Token t) { return t >= 0 ? tok.token_to_piece(t, true) : ""; }

}  // namespace

ChatFormatter::ChatFormatter(const std::string& template_source, const Tokenizer& tok)
    : tok_(tok), bos_text_(special_text(tok, tok.bos())), eos_text_(special_text(tok, tok.eos())) {
  if (!template_source.empty()) tmpl_ = std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::parse(template_source));
}

ChatFormatter::~ChatFormatter() = default;

RenderedText ChatFormatter::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools) const {
  if (!tmpl_) {
    try {
      return render_chatml(nlohmann::json(messages), true);
    } catch (const std::invalid_argument& e) {
      throw bad_request(e.what(), "messages");
    }
  }
  nlohmann::ordered_json extra = {{"add_generation_prompt", true}, {"bos_token", bos_text_}, {"eos_token", eos_text_}};
  if (!tools.is_null()) extra["tools"] = tools;
  RenderedText out;
  try {
    auto r = chat::render_chat(*tmpl_, messages, extra);
    out.text = std::move(r.text);
    out.message_ends.assign(r.message_ends.begin(), r.message_ends.end());
  } catch (const chat::TemplateError& e) {
    if (e.kind() == chat::TemplateErrorKind::raised)
      throw ApiError(400, std::string("the chat template rejected the messages: ") + e.what(), "invalid_request_error",
                     "messages", "template_error");
    throw ApiError(500, std::string("the chat template failed: ") + e.what(), "server_error", "", "template_error");
  }
  // Templates usually write the BOS text themselves; the tokenizer adds one too when the
  // model says add_bos, so drop the template's (as llama.cpp does) to avoid a double BOS.
  if (tok_.add_bos() && !bos_text_.empty() && out.text.starts_with(bos_text_)) {
    out.text.erase(0, bos_text_.size());
    for (auto& end : out.message_ends) end = end >= bos_text_.size() ? end - bos_text_.size() : 0;
  }
  return out;
}

}  // namespace ws::server
