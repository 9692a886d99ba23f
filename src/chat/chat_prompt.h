// The one entry point from chat messages to prompt text with message ends: the CLI, the
// server (server/chat_format.h) and the vision turns (through the server) all render
// through PromptRenderer, so the same messages give the same bytes everywhere.
// What it adds to render_chat (prompt.h): the bos/eos variables, `tools` only when there
// are some, template kwargs, a retry with normalised messages, the double-BOS removal and
// the ChatML fallback for models without a template.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/prompt.h"
#include "chat/template.h"

namespace ws::chat {

// The tokenizer's special texts, as strings: the chat layer does not depend on the
// tokenizer (src/layers.txt), so callers read these off theirs.
struct SpecialTexts {
  std::string bos, eos;  // "" when the model has no such token
  bool add_bos = false;  // the tokenizer puts a BOS token in front of the prompt itself
};

class PromptRenderer {
 public:
  // `template_source` empty: ChatML. Throws TemplateError (syntax) when it does not parse.
  PromptRenderer(const std::string& template_source, SpecialTexts special);

  // Throws TemplateError when the template fails (kind raised: it rejects these messages)
  // and std::invalid_argument when a message has no string role under ChatML.
  // `kwargs` (chat_template_kwargs) are extra template variables, e.g. enable_thinking;
  // they are set last, so they override the others. A conversation the template cannot
  // render as sent (null content next to tool_calls, arguments as a JSON string where it
  // iterates an object) is rendered again normalised, as llama-server's template polyfills
  // do, instead of failing.
  RenderedPrompt render(const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools = nlohmann::ordered_json(),
                        const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object(),
                        bool add_generation_prompt = true) const;

  bool uses_model_template() const { return tmpl_.has_value(); }

 private:
  RenderedPrompt render_template(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) const;

  std::optional<ChatTemplate> tmpl_;
  SpecialTexts special_;
};

// ChatML (<|im_start|>role\ncontent<|im_end|>\n ...), the fixtures' template; what
// PromptRenderer uses when a model has no template of its own. Non-string content renders
// empty. Throws std::invalid_argument when a message has no string role.
RenderedPrompt render_chatml(const nlohmann::ordered_json& messages, bool add_generation_prompt);

}  // namespace ws::chat
