#include "chat/chat_prompt.h"

#include <stdexcept>

namespace ws::chat {
namespace {

// What llama-server's template polyfills hand a template that cannot take the OpenAI wire
// shape: "" for null content and tool-call arguments as objects instead of JSON text.
nlohmann::ordered_json normalised(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.is_object()) continue;  // the template reports it; nothing to normalise
    if (!m.contains("content") || m["content"].is_null()) m["content"] = "";
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (auto& c : m["tool_calls"]) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].contains("arguments"))
        continue;
      auto& args = c["function"]["arguments"];
      if (!args.is_string()) continue;
      auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
      if (!parsed.is_discarded() && parsed.is_object()) args = std::move(parsed);
    }
  }
  return out;
}

}  // namespace

PromptRenderer::PromptRenderer(const std::string& template_source, SpecialTexts special)
    : special_(std::move(special)) {
  if (!template_source.empty()) tmpl_ = ChatTemplate::parse(template_source);
}

RenderedPrompt PromptRenderer::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                      const nlohmann::ordered_json& kwargs, bool add_generation_prompt) const {
  if (!tmpl_) return render_chatml(messages, add_generation_prompt);
  nlohmann::ordered_json extra = {
      {"add_generation_prompt", add_generation_prompt}, {"bos_token", special_.bos}, {"eos_token", special_.eos}};
  // As llama.cpp does: no `tools` variable unless there are some (templates test "tools is defined").
  if (tools.is_array() && !tools.empty()) extra["tools"] = tools;
  if (kwargs.is_object())
    for (const auto& [k, v] : kwargs.items()) extra[k] = v;
  RenderedPrompt out = render_template(messages, extra);
  // Templates usually write the BOS text themselves; the tokenizer adds one too when the
  // model says add_bos, so drop the template's (as llama.cpp does) to avoid a double BOS.
  const std::string& bos = special_.bos;
  if (special_.add_bos && !bos.empty() && out.text.starts_with(bos)) {
    out.text.erase(0, bos.size());
    for (auto& end : out.message_ends) end = end >= bos.size() ? end - bos.size() : 0;
  }
  return out;
}

RenderedPrompt PromptRenderer::render_template(const nlohmann::ordered_json& messages,
                                               const nlohmann::ordered_json& extra) const {
  try {
    return render_chat(*tmpl_, messages, extra);
  } catch (const TemplateError& e) {
    // The template's own raise_exception is its verdict on these messages: no retry.
    if (e.kind() == TemplateErrorKind::raised) throw;
    const auto retry = normalised(messages);
    if (retry == messages) throw;
    return render_chat(*tmpl_, retry, extra);
  }
}

RenderedPrompt render_chatml(const nlohmann::ordered_json& messages, bool add_generation_prompt) {
  RenderedPrompt r;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw std::invalid_argument("each message needs a string 'role'");
    const std::string role = m["role"].get<std::string>();
    std::string content;
    if (m.contains("content") && m["content"].is_string()) content = m["content"].get<std::string>();
    r.text += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
    r.message_ends.push_back(r.text.size());
  }
  if (add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

}  // namespace ws::chat
