#include "server/chat_format.h"

#include "chat/prompt.h"
#include "chat/template.h"
#include "server/api_error.h"

namespace ws::server {
namespace {

std::string special_text(const Tokenizer& tok, Token t) { return t >= 0 ? tok.token_to_piece(t, true) : ""; }

// What llama-server's template polyfills hand a template that cannot take the OpenAI wire
// shape: "" for null content and tool-call arguments as objects instead of JSON text.
nlohmann::ordered_json normalised(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (m.contains("content") && m["content"].is_null()) m["content"] = "";
    if (!m.contains("content")) m["content"] = "";
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& c : m["tool_calls"]) {
      if (!c.contains("function") || !c["function"].contains("arguments")) continue;
      auto& args = c["function"]["arguments"];
      if (!args.is_string()) continue;
      auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) args = std::move(parsed);
    }
  }
  return out;
}

}  // namespace

ChatFormatter::ChatFormatter(const std::string& template_source, const Tokenizer& tok)
    : tok_(tok), bos_text_(special_text(tok, tok.bos())), eos_text_(special_text(tok, tok.eos())) {
  if (!template_source.empty()) tmpl_ = std::make_unique<chat::ChatTemplate>(chat::ChatTemplate::parse(template_source));
  dialect_ = detect_dialect(template_source);
}

ChatFormatter::~ChatFormatter() = default;

RenderedText ChatFormatter::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                   const nlohmann::ordered_json& kwargs) const {
  if (!tmpl_) {
    try {
      return render_chatml(nlohmann::json(normalised(messages)), true);
    } catch (const std::invalid_argument& e) {
      throw bad_request(e.what(), "messages");
    }
  }
  nlohmann::ordered_json extra = {{"add_generation_prompt", true}, {"bos_token", bos_text_}, {"eos_token", eos_text_}};
  if (!tools.is_null()) extra["tools"] = tools;
  for (const auto& [k, v] : kwargs.items()) extra[k] = v;
  RenderedText out;
  try {
    chat::RenderedPrompt r;
    try {
      r = chat::render_chat(*tmpl_, messages, extra);
    } catch (const chat::TemplateError& e) {
      if (e.kind() == chat::TemplateErrorKind::raised) throw;
      const auto retry = normalised(messages);
      if (retry == messages) throw;
      r = chat::render_chat(*tmpl_, retry, extra);
    }
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
