// Tool calls and reasoning in a model's reply: which dialect the chat template speaks
// (chosen from the template's source), parsing a reply (whole, or a prefix while it
// streams) into reasoning, content and tool calls, and the GBNF grammar that forces a
// call in the template's own syntax (tool_choice "required" or a named function).
// The formats live in one table (tool_calls.cpp); each row says how the template spells
// a call and how to read one back.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ws::server {

enum class ToolFormat {
  none,          // no tools in the template: calls are not looked for
  generic,       // no known markers: llama-server's {"tool_call": {"name", "arguments"}}
  hermes,        // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen 2.5/3, Granite 4, Hermes)
  qwen_xml,      // <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call> (Qwen 3.5, Nemotron 3)
  llama3_json,   // {"name": ..., "parameters": {...}} as the whole reply (Llama 3.x)
  mistral_nemo,  // [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]
  mistral_v11,   // [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} (Mistral Small 3.2; [CALL_ID] optional)
  lfm2,          // <|tool_call_start|>[name(k=v, ...)]<|tool_call_end|> (pythonic; a JSON list is read too)
  nemotron_v2,   // <TOOLCALL>[{"name": ..., "arguments": {...}}]</TOOLCALL>
  granite,       // <|tool_call|>[{"name": ..., "arguments": {...}}] (Granite 3.x)
  gemma4,        // <|tool_call>call:NAME{k:<|"|>v<|"|>,n:3}<tool_call|>
  deepseek_r1,   // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...
  harmony,       // gpt-oss: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}
};

const char* tool_format_name(ToolFormat f);
// The format the template's source speaks (generic when it reads `tools` with no known
// call syntax, none when it never reads `tools`).
ToolFormat detect_tool_format(std::string_view template_source);

// How reasoning text is marked in the template's dialect.
struct ReasoningMarkers {
  std::string open, close;  // empty: the template has no thinking block
};
ReasoningMarkers detect_reasoning(std::string_view template_source, ToolFormat tools);

// --reasoning-format, as llama-server: none leaves thinking in content; deepseek and auto
// move it to reasoning_content.
enum class ReasoningFormat { none, deepseek, auto_ };
ReasoningFormat parse_reasoning_format(const std::string& s);  // throws std::invalid_argument

// What one request's replies are parsed with.
struct ReplySyntax {
  ToolFormat tools = ToolFormat::none;  // none: no tool parsing (no tools, or tool_choice "none")
  ReasoningMarkers reasoning;           // empty open: no reasoning extraction
  bool starts_in_reasoning = false;     // the prompt itself opened the thinking block
  bool active() const { return tools != ToolFormat::none || !reasoning.open.empty(); }
};

struct ToolCall {
  std::string id;         // the model's own id when it wrote one, else a fresh one
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedReply {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
};

// `partial`: the text may continue, so anything that could still turn into a marker or a
// call is held back; what is returned is a prefix of what the whole reply will give.
ParsedReply parse_reply(const ReplySyntax& syntax, std::string_view text, bool partial);

// GBNF (root "root") for one call (or, `parallel`, one or more) to any of `tools`, or only
// to `only` when not empty, in `format`'s syntax, with each call's arguments constrained
// by its parameters' JSON schema, after the literal `prefix` (e.g. the close of a thinking
// block the prompt opened). Throws ApiError (400) naming an unsupported schema.
std::string tool_call_gbnf(ToolFormat format, const nlohmann::ordered_json& tools, const std::string& only,
                           bool parallel, const std::string& prefix = "");

// A fresh call id: 9 alphanumerics for the Mistral formats (their templates demand it),
// else "call_" and 24.
std::string new_tool_call_id(ToolFormat format);

}  // namespace ws::server
