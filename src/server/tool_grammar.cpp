// The grammar that forces a tool call in the template's own syntax (tool_choice "required"
// or a named function): the markers around a call, the function's name, and its arguments
// constrained by the parameters' JSON schema (grammar/json_schema.h), so that even a
// random-weight model writes a call the parser reads back.
#include <algorithm>
#include <map>
#include <sstream>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/tool_calls.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;

// How a format writes one call and a list of them. In `item`, %Q is the name as a JSON
// string, %N the bare name, %A the arguments (a JSON object), %P Qwen-XML parameters, %K
// Python keyword arguments, %I a 9-character id.
struct CallSyntax {
  const char* open;
  const char* item;
  const char* sep;    // between calls
  const char* close;
  bool parallel_ok;   // the format can hold more than one call
};

CallSyntax syntax_of(ToolFormat f, bool parallel) {
  switch (f) {
    case ToolFormat::hermes: return {"", "<tool_call>\n{\"name\": %Q, \"arguments\": %A}\n</tool_call>", "\n", "", true};
    case ToolFormat::qwen_xml: return {"", "<tool_call>\n<function=%N>\n%P</function>\n</tool_call>", "\n", "", true};
    case ToolFormat::llama3_json: return {"", "{\"name\": %Q, \"parameters\": %A}", "", "", false};
    case ToolFormat::mistral_nemo:
      return {"[TOOL_CALLS][", "{\"name\": %Q, \"arguments\": %A, \"id\": \"%I\"}", ", ", "]", true};
    case ToolFormat::mistral_v11: return {"", "[TOOL_CALLS]%N[ARGS]%A", "", "", true};
    case ToolFormat::lfm2: return {"<|tool_call_start|>[", "%N(%K)", ", ", "]<|tool_call_end|>", true};
    case ToolFormat::nemotron_v2: return {"<TOOLCALL>[", "{\"name\": %Q, \"arguments\": %A}", ", ", "]</TOOLCALL>", true};
    case ToolFormat::granite: return {"<|tool_call|>[", "{\"name\": %Q, \"arguments\": %A}", ", ", "]", true};
    case ToolFormat::gemma4: return {"", "<|tool_call>call:%N{%A}<tool_call|>", "", "", true};
    case ToolFormat::deepseek_r1:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>%N\n```json\n%A\n```<｜tool▁call▁end｜>", "\n",
              "<｜tool▁calls▁end｜>", true};
    case ToolFormat::harmony:
      return {"", "<|channel|>commentary to=functions.%N <|constrain|>json<|message|>%A", "", "", false};
    default:
      if (parallel) return {"{\"tool_calls\": [", "{\"name\": %Q, \"arguments\": %A}", ", ", "]}", true};
      return {"{\"tool_call\": ", "{\"name\": %Q, \"arguments\": %A}", "", "}", false};
  }
}

class Builder {
 public:
  // Adds the rules of a JSON-schema grammar (start rule `name`); shared helper rules are
  // identical across schemas, anything else that clashes is refused.
  void add_schema(const Json& schema, const std::string& name, const std::string& param) {
    std::string gbnf;
    try {
      gbnf = grammar::json_schema_to_gbnf(schema, name);
    } catch (const grammar::SchemaError& e) {
      throw bad_request("'" + param + "': " + e.what(), param, "unsupported_schema");
    }
    std::istringstream lines(gbnf);
    for (std::string line; std::getline(lines, line);) {
      const size_t eq = line.find(" ::= ");
      if (eq == std::string::npos) continue;
      const std::string rule = line.substr(0, eq), body = line.substr(eq + 5);
      const auto [it, fresh] = rules_.emplace(rule, body);
      if (!fresh && it->second != body)
        throw bad_request("'" + param + "': its definitions clash with another tool's ('" + rule +
                              "'); give the tools' $defs distinct names",
                          param, "unsupported_schema");
    }
  }
  void set(const std::string& name, const std::string& body) { rules_[name] = body; }
  std::string text() const {
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  std::map<std::string, std::string> rules_;
};

bool plain_string(const Json& s) {
  if (!s.is_object() || !s.contains("type") || s["type"] != "string") return false;
  for (const char* k : {"enum", "const", "pattern", "format", "minLength", "maxLength"})
    if (s.contains(k)) return false;
  return true;
}

// An ordered subset of the parameters holding every required one: head(i) = nothing
// written yet, tail(i) = something written (so a separator comes first).
std::string params_rule(Builder& b, const Json& params, const std::string& base, bool xml, const std::string& where) {
  const Json props = params.contains("properties") && params["properties"].is_object() ? params["properties"] : Json::object();
  std::vector<std::string> required;
  if (params.contains("required") && params["required"].is_array())
    for (const Json& r : params["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  std::vector<std::pair<std::string, bool>> items;  // rule, required
  size_t i = 0;
  for (const auto& [key, schema] : props.items()) {
    const std::string v = base + "-v" + std::to_string(i);
    if (xml && plain_string(schema)) b.set(v, "[^<]*");
    else b.add_schema(schema, v, where + ".properties." + key);
    const std::string item = base + "-i" + std::to_string(i);
    b.set(item, xml ? grammar::gbnf_literal("<parameter=" + key + ">\n") + " " + v + " " +
                          grammar::gbnf_literal("\n</parameter>\n")
                    : grammar::gbnf_literal(key + "=") + " " + v);
    items.emplace_back(item, std::find(required.begin(), required.end(), key) != required.end());
    ++i;
  }
  const std::string sep = xml ? "" : grammar::gbnf_literal(", ") + " ";
  const size_t n = items.size();
  auto head = [&](size_t k) { return base + "-h" + std::to_string(k); };
  auto tail = [&](size_t k) { return base + "-t" + std::to_string(k); };
  b.set(head(n), "\"\"");
  b.set(tail(n), "\"\"");
  for (size_t k = n; k-- > 0;) {
    const auto& [item, req] = items[k];
    b.set(tail(k), req ? sep + item + " " + tail(k + 1) : "(" + sep + item + ")? " + tail(k + 1));
    b.set(head(k), req ? item + " " + tail(k + 1) : item + " " + tail(k + 1) + " | " + head(k + 1));
  }
  return head(0);
}

// `item` with its placeholders filled for tool `t` (index i).
std::string item_rule(Builder& b, const char* item, const Json& fn, size_t i) {
  const std::string name = fn["name"].get<std::string>();
  const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
  const Json params = fn.contains("parameters") && fn["parameters"].is_object()
                          ? fn["parameters"] : Json{{"type", "object"}, {"properties", Json::object()}};
  const std::string base = "tool" + std::to_string(i);
  std::string out, lit;
  auto flush = [&] {
    if (!lit.empty()) out += grammar::gbnf_literal(lit) + " ";
    lit.clear();
  };
  for (const char* p = item; *p; ++p) {
    if (*p != '%') {
      lit += *p;
      continue;
    }
    const char k = *++p;
    if (k == 'N') { lit += name; continue; }
    if (k == 'Q') { lit += Json(name).dump(); continue; }
    flush();
    if (k == 'A') {
      b.add_schema(params, base + "-args", where);
      out += base + "-args ";
    } else if (k == 'P' || k == 'K') {
      out += params_rule(b, params, base, k == 'P', where) + " ";
    } else if (k == 'I') {
      out += "[a-zA-Z0-9]{9} ";
    }
  }
  flush();
  const std::string rule = base + "-call";
  b.set(rule, out.empty() ? "\"\"" : out);
  return rule;
}

}  // namespace

std::string tool_call_gbnf(ToolFormat format, const Json& tools, const std::string& only, bool parallel,
                           const std::string& prefix) {
  const CallSyntax syn = syntax_of(format, parallel);
  Builder b;
  std::string alts;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& fn = tools[i]["function"];
    if (!only.empty() && fn["name"] != only) continue;
    alts += (alts.empty() ? "" : " | ") + item_rule(b, syn.item, fn, i);
  }
  if (alts.empty())
    throw bad_request("'tool_choice' names function '" + only + "', which is not in 'tools'", "tool_choice",
                      "invalid_value");
  b.set("call", alts);
  std::string root = grammar::gbnf_literal(prefix + syn.open) + " call ";
  if (parallel && syn.parallel_ok) root += "(" + grammar::gbnf_literal(syn.sep) + " call)* ";
  root += grammar::gbnf_literal(syn.close);
  b.set("root", root);
  return b.text();
}

}  // namespace ws::server
