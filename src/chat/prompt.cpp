#include "chat/prompt.h"

#include <algorithm>

namespace ws::chat {

namespace {

size_t common_prefix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  // Never cut inside a UTF-8 sequence: back off over continuation bytes.
  if (i < b.size())
    while (i > 0 && (static_cast<unsigned char>(b[i]) & 0xC0) == 0x80) --i;
  return i;
}

nlohmann::ordered_json make_context(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra,
                                    std::optional<bool> add_generation_prompt) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = false;
  if (add_generation_prompt) ctx["add_generation_prompt"] = *add_generation_prompt;
  return ctx;
}

}  // namespace

RenderedPrompt render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                           const nlohmann::ordered_json& extra_context, const RenderOptions& options) {
  if (!messages.is_array())
    throw TemplateError(TemplateErrorKind::runtime, "render_chat: messages must be a JSON array");
  RenderedPrompt out;
  out.text = tmpl.render(make_context(messages, extra_context, std::nullopt), options);
  size_t prev = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    nlohmann::ordered_json prefix = nlohmann::ordered_json::array();
    for (size_t k = 0; k <= i; ++k) prefix.push_back(messages[k]);
    size_t end = prev;
    try {
      end = common_prefix(tmpl.render(make_context(prefix, extra_context, false), options), out.text);
    } catch (const TemplateError&) {
      // Partial conversations some templates reject: keep the last known boundary.
    }
    out.message_ends.push_back(end);
    prev = end;
  }
  return out;
}

RenderedPrompt render_chat(const ChatTemplate& tmpl, const nlohmann::json& messages,
                           const nlohmann::json& extra_context, const RenderOptions& options) {
  // Round-trip through text keeps the (already sorted) key order of nlohmann::json.
  return render_chat(tmpl, nlohmann::ordered_json::parse(messages.dump()),
                     nlohmann::ordered_json::parse(extra_context.dump()), options);
}

}  // namespace ws::chat
