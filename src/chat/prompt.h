// Renders a conversation into a prompt and reports where each message ends, so the
// prefix cache can place checkpoints at message boundaries (DESIGN.md, "Checkpoint
// placement") without guessing from control tokens.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/template.h"

namespace ws::chat {

struct RenderedPrompt {
  std::string text;
  // message_ends[i]: byte offset in `text` up to which the rendering of messages[0..i]
  // (the conversation cut after message i, without a generation prompt) agrees with the
  // full rendering. Method: render each prefix messages[0..i] with
  // add_generation_prompt=false and take the length of its longest common prefix with
  // `text`, moved back to a UTF-8 character boundary. text[0, message_ends[i]) is therefore
  // exactly what the template produces for the conversation so far, the part a later turn
  // that extends this conversation re-renders identically: the end of the system prompt,
  // the end of each user message (including its end-of-turn marker where the template
  // emits it before the next message), and so on. Where the template rewrites history
  // (e.g. moves the system prompt into the last user turn) the offset is correspondingly
  // small. If rendering a prefix fails (some templates reject partial conversations), the
  // previous boundary (or 0) is used, which is always safe.
  std::vector<size_t> message_ends;
};

// extra_context: tools, bos_token, eos_token, add_generation_prompt, template kwargs
// (enable_thinking, ...). `messages` must be an array. Throws TemplateError when the full
// conversation does not render.
RenderedPrompt render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                           const nlohmann::ordered_json& extra_context, const RenderOptions& options = {});
RenderedPrompt render_chat(const ChatTemplate& tmpl, const nlohmann::json& messages,
                           const nlohmann::json& extra_context, const RenderOptions& options = {});

}  // namespace ws::chat
