#include "server/responses_api.h"

#include <initializer_list>
#include <random>

#include "server/api_error.h"
#include "server/structured_output.h"

namespace ws::server {
namespace {

// Present and not null (null means absent, as everywhere in OpenAI's API).
const Json* field(const Json& j, const char* name) {
  const auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

ApiError wrong_type(const std::string& where, const char* expected) {
  return bad_request("'" + where + "' must be " + expected, where, "invalid_type");
}

std::string get_string(const Json& j, const char* name, const std::string& where) {
  const Json* v = field(j, name);
  if (!v) throw bad_request("'" + where + "." + name + "' is required", where + "." + name, "missing_required_parameter");
  if (!v->is_string()) throw wrong_type(where + "." + name, "a string");
  return v->get<std::string>();
}

std::string type_of(const Json& item, const std::string& where) {
  const Json* t = field(item, "type");
  if (t && !t->is_string()) throw wrong_type(where + ".type", "a string");
  return t ? t->get<std::string>() : "";
}

// Responses content parts -> chat content parts (text / image_url). The chat parser joins
// text parts with newlines, so one input_text part renders exactly as the plain string.
Json convert_content(const Json& content, const std::string& where, bool assistant) {
  if (content.is_string()) return content;
  if (!content.is_array()) throw wrong_type(where, "a string or an array of content parts");
  Json parts = Json::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string at = where + "[" + std::to_string(j) + "]";
    const Json& p = content[j];
    if (!p.is_object()) throw wrong_type(at, "an object");
    const std::string type = type_of(p, at);
    if (type == "input_text" || type == "output_text" || type == "text") {
      parts.push_back({{"type", "text"}, {"text", get_string(p, "text", at)}});
    } else if (type == "refusal" && assistant) {
      parts.push_back({{"type", "text"}, {"text", get_string(p, "refusal", at)}});
    } else if (type == "input_image" && !assistant) {
      if (field(p, "file_id") && !field(p, "image_url"))
        throw bad_request("'" + at + ".file_id': uploaded files are not supported; send 'image_url' (a URL or data URL)",
                          at + ".file_id", "unsupported_parameter");
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", get_string(p, "image_url", at)}}}});
    } else {
      const char* allowed = assistant ? "\"output_text\" or \"refusal\"" : "\"input_text\" or \"input_image\"";
      throw bad_request("'" + at + ".type' must be " + allowed + ", got \"" + type + "\"", at + ".type",
                        type == "input_file" || type == "input_audio" ? "unsupported_parameter" : "invalid_value");
    }
  }
  return parts;
}

// Input items -> chat messages. An assistant turn arrives as several items (reasoning, a
// message, function calls); they become one assistant message, as the chat reply was.
class InputConverter {
 public:
  Json messages = Json::array();

  void item(const Json& it, const std::string& where) {
    if (!it.is_object()) throw wrong_type(where, "an object");
    const std::string type = type_of(it, where);
    if (type == "message" || (type.empty() && it.contains("role"))) message(it, where);
    else if (type == "function_call") function_call(it, where);
    else if (type == "function_call_output") function_call_output(it, where);
    else if (type == "reasoning") reasoning(it, where);
    else if (type == "item_reference")
      throw bad_request("'" + where + "': item_reference needs stored responses, which this server does not keep; "
                        "send the item itself", where + ".type", "unsupported_parameter");
    else if (type.empty())
      throw bad_request("'" + where + ".type' is required", where + ".type", "missing_required_parameter");
    else
      throw bad_request("'" + where + ".type' must be \"message\", \"function_call\", \"function_call_output\" or "
                        "\"reasoning\", got \"" + type + "\"", where + ".type", "invalid_value");
  }

  Json finish() {
    // A reasoning item with nothing after it still needs content for the template.
    for (Json& m : messages)
      if (m["role"] == "assistant" && m["content"].is_null() && !m.contains("tool_calls")) m["content"] = "";
    return std::move(messages);
  }

 private:
  Json* last_assistant() {
    return !messages.empty() && messages.back()["role"] == "assistant" ? &messages.back() : nullptr;
  }

  void message(const Json& it, const std::string& where) {
    std::string role = get_string(it, "role", where);
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      throw bad_request("'" + where + ".role' must be \"user\", \"assistant\", \"system\" or \"developer\", got \"" +
                        role + "\"", where + ".role", "invalid_value");
    const Json* content = field(it, "content");
    if (!content) throw bad_request("'" + where + ".content' is required", where + ".content", "missing_required_parameter");
    const bool assistant = role == "assistant";
    Json c = convert_content(*content, where + ".content", assistant);
    // Chat templates know system, not OpenAI's newer name for it.
    if (role == "developer") role = "system";
    Json* prev = last_assistant();
    if (assistant && prev && (*prev)["content"].is_null() && !prev->contains("tool_calls")) {
      (*prev)["content"] = std::move(c);  // the message after this turn's reasoning item
      return;
    }
    messages.push_back({{"role", role}, {"content", std::move(c)}});
  }

  void function_call(const Json& it, const std::string& where) {
    const std::string call_id = get_string(it, "call_id", where), name = get_string(it, "name", where);
    const Json* args = field(it, "arguments");
    if (!args) throw bad_request("'" + where + ".arguments' is required", where + ".arguments", "missing_required_parameter");
    if (!args->is_string()) throw wrong_type(where + ".arguments", "a string (JSON text)");
    const Json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *args}}}};
    if (Json* prev = last_assistant()) {
      if (!prev->contains("tool_calls")) (*prev)["tool_calls"] = Json::array();
      (*prev)["tool_calls"].push_back(call);
      return;
    }
    messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({call})}});
  }

  void function_call_output(const Json& it, const std::string& where) {
    const std::string call_id = get_string(it, "call_id", where);
    const Json* out = field(it, "output");
    if (!out) throw bad_request("'" + where + ".output' is required", where + ".output", "missing_required_parameter");
    Json content = out->is_string() ? *out : convert_content(*out, where + ".output", false);
    messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(content)}});
  }

  // The reasoning text comes back as reasoning_content (templates that keep past thinking
  // render it); its content parts, or else its summary (clients that keep only that).
  void reasoning(const Json& it, const std::string& where) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const Json* parts = field(it, key);
      if (!parts) continue;
      if (!parts->is_array()) throw wrong_type(where + "." + key, "an array");
      for (size_t j = 0; j < parts->size(); ++j) {
        const std::string at = where + "." + key + "[" + std::to_string(j) + "]";
        if (!(*parts)[j].is_object()) throw wrong_type(at, "an object");
        text += (text.empty() ? "" : "\n") + get_string((*parts)[j], "text", at);
      }
      if (!text.empty()) break;
    }
    messages.push_back({{"role", "assistant"}, {"content", nullptr}});
    if (!text.empty()) messages.back()["reasoning_content"] = text;
  }
};

// Function tools only: hosted tools (web_search, file_search, ...) have no chat equivalent
// and are skipped, as llama-server skips them.
Json convert_tools(const Json& tools) {
  if (!tools.is_array()) throw wrong_type("tools", "an array");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object()) throw wrong_type(at, "an object");
    if (get_string(t, "type", at) != "function") continue;
    Json fn = {{"name", get_string(t, "name", at)}};
    if (const Json* d = field(t, "description")) {
      if (!d->is_string()) throw wrong_type(at + ".description", "a string");
      fn["description"] = *d;
    }
    if (const Json* p = field(t, "parameters")) {
      if (!p->is_object()) throw wrong_type(at + ".parameters", "an object (a JSON schema)");
      fn["parameters"] = *p;
    }
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// {"type": "function", "name": N} -> chat's {"type": "function", "function": {"name": N}};
// strings go through for the chat parser to check.
Json convert_tool_choice(const Json& tc, const Json& tools) {
  if (tc.is_string()) return tc;
  if (!tc.is_object() || !tc.contains("type") || tc["type"] != "function")
    throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}",
                      "tool_choice", "invalid_value");
  const std::string name = get_string(tc, "name", "tool_choice");
  bool known = false;
  for (const Json& t : tools) known = known || t["function"]["name"] == name;
  if (!known)
    throw bad_request("'tool_choice.name' names \"" + name + "\", which is not a function in 'tools'",
                      "tool_choice.name", "invalid_value");
  return {{"type", "function"}, {"function", {{"name", name}}}};
}

// The structured-output parser speaks of response_format; the client sent text.format.
ApiError renamed(const ApiError& e) {
  auto rename = [](std::string s) {
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"response_format.json_schema.schema",
                                                                       "text.format.schema"},
                                   {"response_format", "text.format"}})
      for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    return s;
  };
  const Json err = e.to_json()["error"];
  const auto str = [&](const char* k) { return err[k].is_string() ? err[k].get<std::string>() : std::string(); };
  return ApiError(e.status(), rename(e.what()), str("type"), rename(str("param")), str("code"));
}

// text.format -> the grammar the sampler keeps the reply in (null: plain text).
std::shared_ptr<const grammar::Grammar> convert_format(const Json& text) {
  if (!text.is_object()) throw wrong_type("text", "an object");
  const Json* f = field(text, "format");
  if (!f) return nullptr;
  if (!f->is_object()) throw wrong_type("text.format", "an object");
  const std::string type = get_string(*f, "type", "text.format");
  Json rf;
  if (type == "text") return nullptr;
  if (type == "json_object") {
    rf = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    const Json* schema = field(*f, "schema");
    if (!schema)
      throw bad_request("'text.format.schema' is required for json_schema", "text.format.schema",
                        "missing_required_parameter");
    rf = {{"type", "json_schema"}, {"json_schema", {{"name", f->value("name", "response")}, {"schema", *schema}}}};
  } else {
    throw bad_request("'text.format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"" + type + "\"",
                      "text.format.type", "invalid_value");
  }
  try {
    return parse_structured_output(Json{{"response_format", rf}});
  } catch (const ApiError& e) {
    throw renamed(e);
  }
}

// Fields that need stored responses or server-side features this server has not: a 400
// naming each (llama-server refuses previous_response_id the same way).
void refuse_unsupported(const Json& body) {
  const char* why = " is not supported: this server keeps no responses; send the whole conversation in 'input'";
  for (const char* name : {"previous_response_id", "conversation"})
    if (const Json* v = field(body, name); v && !(v->is_string() && v->get<std::string>().empty()))
      throw bad_request("'" + std::string(name) + "'" + why, name, "unsupported_parameter");
  if (const Json* v = field(body, "background"); v && !(v->is_boolean() && !v->get<bool>()))
    throw bad_request("'background' is not supported: responses are answered on the request", "background",
                      "unsupported_parameter");
  if (field(body, "prompt"))
    throw bad_request("'prompt' (a stored prompt template) is not supported; send 'instructions' and 'input'",
                      "prompt", "unsupported_parameter");
  if (const Json* v = field(body, "truncation"); v && *v != "disabled")
    throw bad_request("'truncation' must be \"disabled\": conversations are never cut to fit", "truncation",
                      "unsupported_parameter");
}

Json convert_input(const Json& body) {
  InputConverter conv;
  if (const Json* ins = field(body, "instructions")) {
    if (!ins->is_string()) throw wrong_type("instructions", "a string");
    conv.messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  const Json* input = field(body, "input");
  if (!input) throw bad_request("'input' is required", "input", "missing_required_parameter");
  if (input->is_string()) {
    conv.messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty()) throw bad_request("'input' must not be empty", "input", "invalid_value");
    for (size_t i = 0; i < input->size(); ++i) conv.item((*input)[i], "input[" + std::to_string(i) + "]");
  } else {
    throw wrong_type("input", "a string or an array of input items");
  }
  return conv.finish();
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body) {
  refuse_unsupported(body);
  ResponsesRequest r;
  // Everything else passes through, as in llama-server: sampling extensions (seed, top_k,
  // stop, chat_template_kwargs, ...) mean the same on both APIs.
  r.chat = body;
  for (const char* k : {"input", "instructions", "tools", "tool_choice", "max_output_tokens", "text", "reasoning",
                        "store", "metadata", "include", "stream_options", "truncation", "user", "service_tier",
                        "prompt_cache_key", "safety_identifier", "top_logprobs", "max_tool_calls", "messages", "n",
                        "logprobs", "max_completion_tokens", "previous_response_id", "background", "conversation"})
    r.chat.erase(k);
  r.chat["messages"] = convert_input(body);
  Json tools = Json::array();
  if (const Json* t = field(body, "tools")) tools = convert_tools(*t);
  if (!tools.empty()) r.chat["tools"] = tools;
  if (const Json* tc = field(body, "tool_choice")) r.chat["tool_choice"] = convert_tool_choice(*tc, tools);
  if (const Json* m = field(body, "max_output_tokens")) {
    if (!m->is_number_integer() || m->get<int64_t>() < 1)
      throw bad_request("'max_output_tokens' must be a positive integer, got " + m->dump(), "max_output_tokens",
                        "invalid_value");
    r.chat["max_tokens"] = *m;
  }
  if (const Json* t = field(body, "text")) r.format_grammar = convert_format(*t);
  if (r.format_grammar && (field(body, "response_format") || field(body, "grammar") || field(body, "json_schema")))
    throw bad_request("'text.format' and 'response_format' / 'grammar' / 'json_schema' exclude each other; send one",
                      "text.format", "invalid_value");
  Json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const Json* rs = field(body, "reasoning")) {
    if (!rs->is_object()) throw wrong_type("reasoning", "an object");
    if (const Json* e = field(*rs, "effort")) {
      if (!e->is_string()) throw wrong_type("reasoning.effort", "a string");
      // Templates that know effort levels (gpt-oss) read reasoning_effort, as llama-server passes it.
      Json& kw = r.chat["chat_template_kwargs"];
      if (kw.is_null()) kw = Json::object();
      if (kw.is_object() && !kw.contains("reasoning_effort")) kw["reasoning_effort"] = *e;
    }
    for (const auto& [k, v] : rs->items()) reasoning[k] = v;
  }
  auto echo = [&](const char* k, Json def) { r.echo[k] = field(body, k) ? body[k] : def; };
  echo("instructions", nullptr);
  echo("max_output_tokens", nullptr);
  echo("temperature", nullptr);
  echo("top_p", nullptr);
  echo("tool_choice", "auto");
  echo("tools", Json::array());
  echo("text", {{"format", {{"type", "text"}}}});
  echo("metadata", Json::object());
  echo("user", nullptr);
  r.echo["reasoning"] = reasoning;
  r.echo["store"] = false;  // nothing is kept, whatever was asked
  r.echo["truncation"] = "disabled";
  r.echo["previous_response_id"] = nullptr;
  return r;
}

Json reasoning_item(const std::string& id, const std::string& text, const std::string& status) {
  Json content = Json::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", id}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", std::move(content)},
          {"status", status}};
}

Json message_item(const std::string& id, const std::string& text, const std::string& status) {
  Json content = Json::array();
  if (status != "in_progress")
    content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}});
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

Json function_call_item(const std::string& id, const ToolCall& call, const std::string& status) {
  return {{"id", id},          {"type", "function_call"}, {"status", status},
          {"call_id", call.id}, {"name", call.name},        {"arguments", status == "in_progress" ? "" : call.arguments}};
}

std::string responses_id(const char* prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  thread_local std::mt19937_64 rng{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()};
  std::string s = std::string(prefix) + "_";
  for (int i = 0; i < 48; ++i) s += kHex[rng() % 16];
  return s;
}

}  // namespace ws::server
