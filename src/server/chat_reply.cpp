#include "server/chat_reply.h"

#include <stdexcept>

#include "server/api_error.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;

const Json* present(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

void parse_tool_choice(const Json& body, const Json& tools, ChatOptions& o) {
  const Json* tc = present(body, "tool_choice");
  if (!tc) return;
  if (tc->is_string()) {
    const std::string s = tc->get<std::string>();
    if (s == "auto") o.tool_choice = ToolChoice::auto_;
    else if (s == "none") o.tool_choice = ToolChoice::none;
    else if (s == "required") o.tool_choice = ToolChoice::required;
    else
      throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}, got \"" + s + "\"",
                        "tool_choice", "invalid_value");
  } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
             (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
    o.tool_choice = ToolChoice::named;
    o.function = (*tc)["function"]["name"].get<std::string>();
  } else {
    throw bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                      "\"function\": {\"name\": ...}}",
                      "tool_choice", "invalid_type");
  }
  const bool has_tools = tools.is_array() && !tools.empty();
  if ((o.tool_choice == ToolChoice::required || o.tool_choice == ToolChoice::named) && !has_tools)
    throw bad_request("'tool_choice' asks for a call, but 'tools' is empty or missing", "tool_choice", "invalid_value");
}

}  // namespace

TemplateDialect detect_dialect(const std::string& src) {
  TemplateDialect d;
  d.tools = src.empty() ? ToolFormat::generic : detect_tool_format(src);
  d.reasoning = detect_reasoning(src, d.tools);
  return d;
}

ChatOptions parse_chat_options(const Json& body, const Json& tools, ReasoningFormat server_reasoning) {
  ChatOptions o;
  o.reasoning = server_reasoning;
  parse_tool_choice(body, tools, o);
  if (const Json* p = present(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls", "invalid_type");
    o.parallel = p->get<bool>();
  }
  if (const Json* k = present(body, "chat_template_kwargs")) {
    if (!k->is_object()) throw bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs", "invalid_type");
    o.template_kwargs = *k;
  }
  if (const Json* r = present(body, "reasoning_format")) {
    try {
      if (!r->is_string()) throw std::invalid_argument("");
      o.reasoning = parse_reasoning_format(r->get<std::string>());
    } catch (const std::invalid_argument&) {
      throw bad_request("'reasoning_format' must be \"none\", \"deepseek\" or \"auto\"", "reasoning_format",
                        "invalid_value");
    }
  }
  return o;
}

ReplySyntax reply_syntax(const TemplateDialect& d, const ChatOptions& o, const Json& tools, const std::string& prompt) {
  ReplySyntax s;
  const bool has_tools = tools.is_array() && !tools.empty();
  // A template that never mentions tools still gets llama-server's generic JSON call shape.
  if (has_tools && o.tool_choice != ToolChoice::none) s.tools = d.tools == ToolFormat::none ? ToolFormat::generic : d.tools;
  if (o.reasoning != ReasoningFormat::none) s.reasoning = d.reasoning;
  if (d.tools == ToolFormat::harmony && s.tools == ToolFormat::none) s.tools = ToolFormat::harmony;  // channels, always
  if (!s.reasoning.open.empty()) {
    // The generation prompt may open the block itself (Qwen 3.5, DeepSeek R1 ...): the
    // reply then starts inside it.
    const size_t open = prompt.rfind(s.reasoning.open);
    s.starts_in_reasoning = open != std::string::npos && prompt.find(s.reasoning.close, open) == std::string::npos &&
                            prompt.find_first_not_of(" \n", open + s.reasoning.open.size()) == std::string::npos;
  }
  return s;
}

std::shared_ptr<const grammar::Grammar> forced_call_grammar(const ReplySyntax& syn, const ChatOptions& o,
                                                            const Json& tools, bool constrained) {
  if (o.tool_choice != ToolChoice::required && o.tool_choice != ToolChoice::named) return nullptr;
  if (constrained)
    throw bad_request("'tool_choice' \"required\" or a named function cannot be combined with 'response_format' or "
                      "'grammar'; send one",
                      "tool_choice", "invalid_value");
  // A prompt that opened a thinking block gets it closed first, so the call is not read as reasoning.
  const std::string prefix = syn.starts_in_reasoning ? syn.reasoning.close + "\n\n" : "";
  const std::string gbnf = tool_call_gbnf(syn.tools, tools, o.function, o.parallel, prefix);
  try {
    return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
  } catch (const grammar::GrammarError& e) {
    throw bad_request(std::string("'tools': the forced-call grammar does not compile: ") + e.what(), "tools",
                      "invalid_value");
  }
}

Json tool_call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

Json chat_message_json(const ParsedReply& r) {
  Json m = {{"role", "assistant"}};
  m["content"] = r.content.empty() && !r.calls.empty() ? Json(nullptr) : Json(r.content);
  if (!r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : r.calls) calls.push_back(tool_call_json(c));
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

std::vector<Json> ReplyStreamer::diff(const ParsedReply& r) {
  std::vector<Json> out;
  // Each part only grows while streaming (parse_reply holds back what could change).
  if (r.reasoning.size() > reasoning_sent_) {
    out.push_back({{"reasoning_content", r.reasoning.substr(reasoning_sent_)}});
    reasoning_sent_ = r.reasoning.size();
  }
  if (r.content.size() > content_sent_) {
    out.push_back({{"content", r.content.substr(content_sent_)}});
    content_sent_ = r.content.size();
  }
  for (; calls_sent_ < r.calls.size(); ++calls_sent_) {
    const ToolCall& c = r.calls[calls_sent_];
    const int index = int(calls_sent_);
    // As OpenAI streams a call: id, type and name first, then the arguments.
    out.push_back({{"tool_calls", Json::array({{{"index", index}, {"id", c.id}, {"type", "function"},
                                                {"function", {{"name", c.name}, {"arguments", ""}}}}})}});
    out.push_back({{"tool_calls", Json::array({{{"index", index}, {"function", {{"arguments", c.arguments}}}}})}});
  }
  return out;
}

std::vector<Json> ReplyStreamer::push(const std::string& text) {
  text_ += text;
  return diff(parse_reply(syn_, text_, true));
}

std::vector<Json> ReplyStreamer::finish() { return diff(parse_reply(syn_, text_, false)); }

void keep_last_message_end(const TemplateDialect& d, TurnRequest& turn) {
  if (!d.reasoning.open.empty() && !turn.message_ends.empty()) turn.keep_message_end = turn.message_ends.back();
}

}  // namespace ws::server
