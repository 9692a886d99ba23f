// Anthropic Messages request -> OpenAI chat body. The shape is checked here, so errors name
// the Anthropic field; values shared with chat completions (temperature, top_p, ...) are
// then checked by parse_chat_request under the same names.
#include <string_view>

#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;

using fields::field;  // the field if present and not null, as the OpenAI parsers read it
using fields::wrong_type;

ApiError missing(const std::string& where) {
  return bad_request("'" + where + "' is required", where, "missing_required_parameter");
}

std::string get_string(const Json& obj, const char* name, const std::string& where, bool required) {
  const Json* v = field(obj, name);
  if (!v) {
    if (required) throw missing(where + "." + name);
    return "";
  }
  if (!v->is_string()) throw wrong_type(where + "." + name, "a string", *v);
  return v->get<std::string>();
}

// Claude Code starts its system prompt with "x-anthropic-billing-header: ...; cch=XXXXX; ..."
// where the cch value changes on every request: left alone, no two requests would share a
// prefix past it. The value is masked (as llama-server does) so the prefix cache can reuse.
void mask_billing_stamp(std::string& text) {
  constexpr std::string_view kHeader = "x-anthropic-billing-header:";
  if (!text.starts_with(kHeader)) return;
  const size_t line_end = text.find('\n');
  const size_t at = text.find("cch=", kHeader.size());
  if (at == std::string::npos || at > line_end) return;
  for (size_t i = at + 4; i < text.size() && text[i] != ';' && i < line_end; ++i) text[i] = '0';
}

// {"type": "base64", "media_type", "data"} or {"type": "url", "url"} -> an image_url part.
Json image_part(const Json& block, const std::string& where) {
  const Json* src = field(block, "source");
  if (!src) throw missing(where + ".source");
  if (!src->is_object()) throw wrong_type(where + ".source", "an object", *src);
  const std::string at = where + ".source";
  const std::string type = get_string(*src, "type", at, true);
  std::string url;
  if (type == "base64") {
    url = "data:" + get_string(*src, "media_type", at, true) + ";base64," + get_string(*src, "data", at, true);
  } else if (type == "url") {
    url = get_string(*src, "url", at, true);
  } else {
    throw bad_request("'" + at + ".type' must be \"base64\" or \"url\", got \"" + type + "\"", at + ".type",
                      "invalid_value");
  }
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

Json text_part(const Json& block, const std::string& where) {
  return {{"type", "text"}, {"text", get_string(block, "text", where, true)}};
}

// A block's type, checking that the block is an object that has one.
std::string block_type(const Json& block, const std::string& where) {
  if (!block.is_object()) throw wrong_type(where, "an object (a content block)", block);
  return get_string(block, "type", where, true);
}

ApiError unsupported_block(const std::string& where, const std::string& type, const char* role) {
  return bad_request("'" + where + ".type': \"" + type + "\" blocks are not supported in " + role + " messages",
                     where + ".type", "invalid_value");
}

// tool_result content: a string, or text and image blocks.
Json tool_result_content(const Json& block, const std::string& where) {
  const Json* c = field(block, "content");
  if (!c) return "";
  if (c->is_string()) return *c;
  if (!c->is_array()) throw wrong_type(where + ".content", "a string or an array of content blocks", *c);
  Json parts = Json::array();
  for (size_t i = 0; i < c->size(); ++i) {
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    const std::string type = block_type((*c)[i], at);
    if (type == "text") parts.push_back(text_part((*c)[i], at));
    else if (type == "image") parts.push_back(image_part((*c)[i], at));
    else throw unsupported_block(at, type, "tool_result");
  }
  return parts;
}

// A user message: tool_result blocks become tool messages, which come first (they answer
// the calls of the assistant message before, and templates expect them right after it);
// text and images stay one user message.
void convert_user(const Json& content, const std::string& where, Json& out) {
  Json parts = Json::array();
  size_t results = 0;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = block_type(b, at);
    if (type == "text") {
      parts.push_back(text_part(b, at));
    } else if (type == "image") {
      parts.push_back(image_part(b, at));
    } else if (type == "tool_result") {
      if (const Json* e = field(b, "is_error"); e && !e->is_boolean())
        throw wrong_type(at + ".is_error", "a boolean", *e);
      out.push_back({{"role", "tool"},
                     {"tool_call_id", get_string(b, "tool_use_id", at, true)},
                     {"content", tool_result_content(b, at)}});
      ++results;
    } else {
      throw unsupported_block(at, type, "user");
    }
  }
  // A message of tool results only adds no user turn (an empty one would render as one).
  if (!parts.empty() || results == 0) out.push_back({{"role", "user"}, {"content", parts}});
}

// An assistant message: text blocks its content, tool_use blocks its tool_calls, thinking
// blocks its reasoning_content (templates that keep past thinking render it).
void convert_assistant(const Json& content, const std::string& where, Json& out) {
  Json parts = Json::array(), calls = Json::array();
  std::string reasoning;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::string type = block_type(b, at);
    if (type == "text") {
      parts.push_back(text_part(b, at));
    } else if (type == "thinking") {
      reasoning += get_string(b, "thinking", at, true);
    } else if (type == "redacted_thinking") {
      continue;  // encrypted by Anthropic: nothing a local model can read
    } else if (type == "tool_use") {
      const Json* input = field(b, "input");
      if (input && !input->is_object()) throw wrong_type(at + ".input", "an object", *input);
      calls.push_back({{"id", get_string(b, "id", at, true)},
                       {"type", "function"},
                       {"function", {{"name", get_string(b, "name", at, true)},
                                     {"arguments", (input ? *input : Json::object()).dump()}}}});
    } else {
      throw unsupported_block(at, type, "assistant");
    }
  }
  Json m = {{"role", "assistant"}};
  // As chat_message_json writes the reply it came from: null content next to calls only.
  m["content"] = parts.empty() && !calls.empty() ? Json(nullptr) : Json(parts);
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  out.push_back(std::move(m));
}

Json convert_messages(const Json& body) {
  const Json* msgs = field(body, "messages");
  if (!msgs) throw missing("messages");
  if (!msgs->is_array()) throw wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) throw bad_request("'messages' must not be empty", "messages", "invalid_value");
  Json out = Json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw wrong_type(where, "an object", m);
    const std::string role = get_string(m, "role", where, true);
    if (role != "user" && role != "assistant")
      throw bad_request("'" + where + ".role' must be \"user\" or \"assistant\" (the system prompt is the top-level "
                        "'system'), got \"" + role + "\"",
                        where + ".role", "invalid_value");
    const Json* content = field(m, "content");
    if (!content) throw missing(where + ".content");
    if (content->is_string()) {
      out.push_back({{"role", role}, {"content", *content}});
      continue;
    }
    if (!content->is_array()) throw wrong_type(where + ".content", "a string or an array of content blocks", *content);
    if (role == "user") convert_user(*content, where + ".content", out);
    else convert_assistant(*content, where + ".content", out);
  }
  return out;
}

// system: a string or text blocks.
void convert_system(const Json& body, Json& messages) {
  const Json* sys = field(body, "system");
  if (!sys) return;
  Json content;
  if (sys->is_string()) {
    std::string text = sys->get<std::string>();
    mask_billing_stamp(text);
    content = text;
  } else if (sys->is_array()) {
    content = Json::array();
    for (size_t i = 0; i < sys->size(); ++i) {
      const std::string at = "system[" + std::to_string(i) + "]";
      const std::string type = block_type((*sys)[i], at);
      if (type != "text")
        throw bad_request("'" + at + ".type' must be \"text\", got \"" + type + "\"", at + ".type", "invalid_value");
      std::string text = get_string((*sys)[i], "text", at, true);
      mask_billing_stamp(text);
      content.push_back({{"type", "text"}, {"text", text}});
    }
  } else {
    throw wrong_type("system", "a string or an array of text blocks", *sys);
  }
  if (content.empty()) return;  // an empty system prompt is no system prompt
  messages.insert(messages.begin(), Json{{"role", "system"}, {"content", content}});
}

Json convert_tools(const Json& tools) {
  if (!tools.is_array()) throw wrong_type("tools", "an array", tools);
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) throw wrong_type(at, "an object", t);
    // Anthropic's server tools (web search, code execution, ...) run on Anthropic's side.
    const std::string type = get_string(t, "type", at, false);
    if (!type.empty() && type != "custom")
      throw bad_request("'" + at + ".type': server tool \"" + type + "\" is not supported; only client tools "
                        "(name, description, input_schema) are",
                        at + ".type", "invalid_value");
    Json fn = {{"name", get_string(t, "name", at, true)}};
    if (const std::string d = get_string(t, "description", at, false); !d.empty()) fn["description"] = d;
    const Json* schema = field(t, "input_schema");
    if (!schema) throw missing(at + ".input_schema");
    if (!schema->is_object()) throw wrong_type(at + ".input_schema", "an object (a JSON schema)", *schema);
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice {type: auto | any | tool (+ name) | none, disable_parallel_tool_use}.
void convert_tool_choice(const Json& body, Json& out) {
  const Json* tc = field(body, "tool_choice");
  if (!tc) return;
  if (!tc->is_object()) throw wrong_type("tool_choice", "an object", *tc);
  const std::string type = get_string(*tc, "type", "tool_choice", true);
  if (type == "auto") out["tool_choice"] = "auto";
  else if (type == "any") out["tool_choice"] = "required";
  else if (type == "none") out["tool_choice"] = "none";
  else if (type == "tool")
    out["tool_choice"] = {{"type", "function"}, {"function", {{"name", get_string(*tc, "name", "tool_choice", true)}}}};
  else
    throw bad_request("'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\", got \"" + type + "\"",
                      "tool_choice.type", "invalid_value");
  if (const Json* d = field(*tc, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) throw wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    out["parallel_tool_calls"] = !d->get<bool>();
  }
}

// thinking {type: enabled | disabled | adaptive}: the template's enable_thinking switch,
// unless chat_template_kwargs sets it. budget_tokens is checked, not enforced.
void convert_thinking(const Json& body, Json& out) {
  const Json* t = field(body, "thinking");
  if (!t) return;
  if (!t->is_object()) throw wrong_type("thinking", "an object", *t);
  const std::string type = get_string(*t, "type", "thinking", true);
  if (type != "enabled" && type != "disabled" && type != "adaptive")
    throw bad_request("'thinking.type' must be \"enabled\", \"disabled\" or \"adaptive\", got \"" + type + "\"",
                      "thinking.type", "invalid_value");
  if (const Json* b = field(*t, "budget_tokens"); b && !(b->is_number_integer() && b->get<int64_t>() >= 0))
    throw bad_request("'thinking.budget_tokens' must be a non-negative integer", "thinking.budget_tokens",
                      "invalid_value");
  Json& kwargs = out["chat_template_kwargs"];
  if (kwargs.is_null()) kwargs = Json::object();
  if (kwargs.is_object() && !kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = type != "disabled";
}

}  // namespace

Json anthropic_to_chat_body(const Json& body, bool count_tokens) {
  Json out = Json::object();
  if (const Json* m = field(body, "model")) out["model"] = *m;
  Json messages = convert_messages(body);
  convert_system(body, messages);
  out["messages"] = std::move(messages);
  if (const Json* tools = field(body, "tools")) out["tools"] = convert_tools(*tools);
  convert_tool_choice(body, out);
  if (!count_tokens) {
    // Required by Anthropic's API: a reply without a bound is never what the client meant.
    if (!field(body, "max_tokens")) throw missing("max_tokens");
    out["max_tokens"] = body["max_tokens"];
    if (const Json* s = field(body, "stop_sequences")) {
      if (!s->is_array()) throw wrong_type("stop_sequences", "an array of strings", *s);
      for (size_t i = 0; i < s->size(); ++i)
        if (!(*s)[i].is_string()) throw wrong_type("stop_sequences[" + std::to_string(i) + "]", "a string", (*s)[i]);
      out["stop"] = *s;
    }
  }
  if (const Json* meta = field(body, "metadata"); meta && !meta->is_object())
    throw wrong_type("metadata", "an object", *meta);
  // Anthropic's sampling fields, and llama-server's extensions it also passes through.
  for (const char* key : {"temperature", "top_p", "top_k", "stream", "min_p", "seed", "repeat_penalty",
                          "chat_template_kwargs", "reasoning_format"})
    if (const Json* v = field(body, key); v && !(count_tokens && std::string_view(key) == "stream")) out[key] = *v;
  convert_thinking(body, out);
  return out;
}

}  // namespace ws::server
