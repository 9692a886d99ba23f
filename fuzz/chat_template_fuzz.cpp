// libFuzzer target for the Jinja chat template engine (chat/): the input is a template
// (from a GGUF or --chat-template, so untrusted), parsed and rendered against a fixed
// conversation with tools, as the server renders prompts. Any input must either render or
// throw TemplateError; limits turn runaway loops, recursion and output into errors.
// Built and run by tests/fuzz.sh with ASan + UBSan (use fuzz/chat_template.dict).
#include <ctime>
#include <string>

#include "chat/prompt.h"
#include "chat/template.h"

namespace {

using nlohmann::ordered_json;

const ordered_json& conversation() {
  static const ordered_json m = ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris? <b>&amp;</b> 🦙"},
    {"role": "assistant", "content": null, "reasoning_content": "Need the tool.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21.5}"},
    {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}
  ])");
  return m;
}

const ordered_json& extra_context() {
  static const ordered_json c = ordered_json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true, "enable_thinking": false,
    "tools": [{"type": "function", "function": {"name": "weather", "description": "Forecast",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}]
  })");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ws::chat::RenderOptions options;
  std::tm now{};
  now.tm_year = 126;
  now.tm_mday = 2;
  options.now = now;
  // Smaller than the server's so each input stays fast; the checks that enforce them are the same.
  options.max_output_bytes = size_t{1} << 20;
  options.max_loop_iterations = 100'000;
  try {
    const auto tmpl = ws::chat::ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size));
    const auto out = ws::chat::render_chat(tmpl, conversation(), extra_context(), options);
    if (out.message_ends.size() != conversation().size()) __builtin_trap();
    for (size_t end : out.message_ends)
      if (end > out.text.size()) __builtin_trap();  // a boundary outside the prompt
  } catch (const ws::chat::TemplateError&) {
    // Rejected or raised: what a bad template must produce.
  }
  return 0;
}
