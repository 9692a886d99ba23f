#include "grammar/json_schema.h"

#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "grammar/grammar.h"

namespace ws::grammar {

std::string regex_to_gbnf(const std::string& pattern, const std::string& path);  // regex.cpp

namespace {

using json = nlohmann::ordered_json;

// Shared rules, added on demand. Whitespace and numbers are bounded (as llama.cpp bounds
// them) so that even a model that never wants to stop reaches the end of a value.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> p = {
      {"space", R"(| " " | "\n" [ \t]{0,20})"},
      {"boolean", R"(("true" | "false") space)"},
      {"null", R"("null" space)"},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
      {"decimal-part", R"([0-9]{1,16})"},
      {"integer", R"(("-"? integral-part) space)"},
      // At most 16 + 2 exponent digits: every such number is a finite double.
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)"},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"" space)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)"},
      {"array", R"("[" space ( value ("," space value)* )? "]" space)"},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))"},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(date "T" time)"},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})"},
  };
  return p;
}

// What each primitive refers to, so that adding one adds its dependencies.
const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> d = {
      {"boolean", {"space"}}, {"null", {"space"}}, {"integer", {"integral-part", "space"}},
      {"number", {"integral-part", "decimal-part", "space"}}, {"string", {"char", "space"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"space", "string", "value"}}, {"array", {"space", "value"}},
      {"date-time", {"date", "time"}},
  };
  return d;
}

// Keywords that only describe (never constrain) a value.
bool is_annotation(const std::string& k) {
  static const std::set<std::string> a = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict"};
  return a.count(k) > 0;
}

std::string rule_name(const std::string& s) {
  std::string out;
  for (const char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
  return out.empty() ? "r" : out;
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run(const std::string& root_name) {
    const std::string expr = visit(root_, root_name, "");
    if (expr != root_name) rules_[root_name] = expr;
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw SchemaError("JSON schema" + std::string(path.empty() ? "" : " at '" + path + "'") + ": " + what);
  }

  std::string use(const std::string& prim) {
    if (rules_.count(prim)) return prim;
    rules_[prim] = primitives().at(prim);
    if (const auto it = primitive_deps().find(prim); it != primitive_deps().end())
      for (const auto& d : it->second) use(d);
    return prim;
  }

  std::string add_rule(const std::string& base, const std::string& body) {
    std::string name = rule_name(base);
    for (int i = 1; rules_.count(name) || primitives().count(name); ++i) name = rule_name(base) + "-" + std::to_string(i);
    rules_[name] = body;
    return name;
  }

  std::string literal_value(const json& v) { return gbnf_literal(v.dump()) + " " + use("space"); }

  std::string visit(const json& s, const std::string& name, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema 'false' accepts no value");
      return use("value");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    if (const auto it = s.find("$ref"); it != s.end()) return visit_ref(*it, path);
    static const std::set<std::string> known = {"type", "properties", "required", "additionalProperties", "items",
                                                "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf",
                                                "minLength", "maxLength", "pattern", "format"};
    for (const auto& [k, v] : s.items())
      if (!known.count(k) && !is_annotation(k)) fail(path, "unsupported keyword '" + k + "'");
    if (const auto it = s.find("const"); it != s.end()) return "(" + literal_value(*it) + ")";
    if (const auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(path + "/enum", "'enum' must be a non-empty array");
      std::string alts;
      for (const auto& v : *it) alts += (alts.empty() ? "" : " | ") + literal_value(v);
      return "(" + alts + ")";
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (const auto it = s.find(key); it != s.end()) {
        if (!it->is_array() || it->empty()) fail(path + "/" + key, std::string("'") + key + "' must be a non-empty array");
        std::string alts;
        for (size_t i = 0; i < it->size(); ++i)
          alts += (i ? " | " : "") + visit((*it)[i], name + "-" + std::to_string(i), path + "/" + key + "/" + std::to_string(i));
        return add_rule(name, alts);
      }
    if (const auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1) fail(path + "/allOf", "unsupported keyword 'allOf' with more than one schema");
      return visit((*it)[0], name, path + "/allOf/0");
    }
    return visit_typed(s, name, path);
  }

  std::string visit_ref(const json& ref, const std::string& path) {
    if (!ref.is_string()) fail(path + "/$ref", "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    if (const auto it = refs_.find(r); it != refs_.end()) return it->second;
    if (r.rfind("#/", 0) != 0) fail(path + "/$ref", "unsupported '$ref' \"" + r + "\" (only local refs \"#/...\")");
    const json* target = &root_;
    try {
      target = &root_.at(json::json_pointer(r.substr(1)));
    } catch (const json::exception&) {
      fail(path + "/$ref", "'$ref' \"" + r + "\" points at nothing");
    }
    // The name is reserved before the visit, so a recursive schema refers to its own rule.
    const std::string name = add_rule("ref" + r.substr(1), "");
    refs_[r] = name;
    rules_[name] = visit(*target, name, r.substr(1));
    return name;
  }

  std::string visit_typed(const json& s, const std::string& name, const std::string& path) {
    std::vector<std::string> types;
    if (const auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) types.push_back(it->get<std::string>());
      else if (it->is_array())
        for (const auto& t : *it) {
          if (!t.is_string()) fail(path + "/type", "'type' must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      else fail(path + "/type", "'type' must be a string or an array of strings");
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types.push_back("string");
    } else {
      return use("value");
    }
    std::string alts;
    for (const auto& t : types) {
      std::string e;
      if (t == "object") e = visit_object(s, name, path);
      else if (t == "array") e = visit_array(s, name, path);
      else if (t == "string") e = visit_string(s, name, path);
      else if (t == "number" || t == "integer" || t == "boolean" || t == "null") e = use(t);
      else fail(path + "/type", "unsupported type '" + t + "'");
      alts += (alts.empty() ? "" : " | ") + e;
    }
    return types.size() == 1 ? alts : "(" + alts + ")";
  }

  std::string visit_object(const json& s, const std::string& name, const std::string& path);
  std::string other_key(const std::vector<std::u32string>& names, const std::u32string& prefix, const std::string& rule);
  std::string visit_array(const json& s, const std::string& name, const std::string& path);
  std::string visit_string(const json& s, const std::string& name, const std::string& path);

 private:
  const json& root_;
  std::map<std::string, std::string> rules_;  // name -> body, ordered so the text is deterministic
  std::map<std::string, std::string> refs_;   // "$ref" value -> its rule
};

// A property name as code points; names JSON must escape are not supported as exclusions.
std::u32string code_points(const std::string& k, const std::string& path) {
  std::u32string out;
  for (size_t i = 0; i < k.size();) {
    const auto b = static_cast<unsigned char>(k[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (size_t j = 1; j < len && i + j < k.size(); ++j) cp = (cp << 6) | (static_cast<unsigned char>(k[i + j]) & 0x3F);
    if (cp < 0x20 || cp == '"' || cp == '\\')
      Converter::fail(path + "/properties", "unsupported: a property name with a quote, backslash or control character "
                                            "together with additionalProperties");
    out += char32_t(cp);
    i += len;
  }
  return out;
}

std::string class_char(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", unsigned(c));
  return buf;
}

// The body and closing quote of any string key that is none of `names`, after `prefix`
// has been read: leave the names' trie here, or stop where no name stops.
std::string Converter::other_key(const std::vector<std::u32string>& names, const std::u32string& prefix,
                                 const std::string& rule) {
  std::set<char32_t> next;
  bool terminal = false;
  for (const auto& n : names)
    if (n.size() >= prefix.size() && n.compare(0, prefix.size(), prefix) == 0) {
      if (n.size() == prefix.size()) terminal = true;
      else next.insert(n[prefix.size()]);
    }
  std::string excluded;
  for (const char32_t c : next) excluded += class_char(c);
  use("char");
  std::string body = "([^\"\\\\\\x7F\\x00-\\x1F" + excluded + "] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})) char* \"\\\"\"";
  for (const char32_t c : next)
    body += " | [" + class_char(c) + "] " + other_key(names, prefix + c, rule);
  if (!terminal) body += " | \"\\\"\"";
  return add_rule(rule, body);
}

int64_t count_field(const json& s, const char* key, int64_t def, const std::string& path) {
  const auto it = s.find(key);
  if (it == s.end()) return def;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100000)
    Converter::fail(path + "/" + key, std::string("'") + key + "' must be an integer in [0, 100000]");
  return it->get<int64_t>();
}

// `item` repeated min..max times (max < 0: unbounded), separated by `sep`.
std::string repeat(const std::string& item, int64_t lo, int64_t hi, const std::string& sep) {
  if (hi == 0) return "";
  const std::string rest = "(" + sep + " " + item + ")";
  std::string more;
  if (hi < 0) more = rest + "*";
  else if (hi > 1) more = rest + "{" + std::to_string(lo > 0 ? lo - 1 : 0) + "," + std::to_string(hi - 1) + "}";
  const std::string seq = item + (more.empty() ? "" : " " + more);
  return lo == 0 ? "(" + seq + ")?" : seq;
}

std::string Converter::visit_object(const json& s, const std::string& name, const std::string& path) {
  const json empty = json::object();
  const auto pit = s.find("properties");
  const json& props = pit == s.end() ? empty : *pit;
  if (!props.is_object()) fail(path + "/properties", "'properties' must be an object");
  std::set<std::string> required;
  if (const auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) fail(path + "/required", "'required' must be an array of names");
    for (const auto& r : *it) {
      if (!r.is_string()) fail(path + "/required", "'required' must be an array of names");
      if (!props.contains(r.get<std::string>()))
        fail(path + "/required", "required property '" + r.get<std::string>() + "' is not in 'properties' (unsupported)");
      required.insert(r.get<std::string>());
    }
  }
  // Extra keys after the declared ones, when additionalProperties allows them; a declared
  // name is not an extra key (its value must follow its own schema).
  std::string extra;
  if (const auto it = s.find("additionalProperties"); it != s.end() && !(it->is_boolean() && !it->get<bool>())) {
    const std::string v = visit(*it, name + "-additional", path + "/additionalProperties");
    std::vector<std::u32string> names;
    for (const auto& [k, unused] : props.items()) names.push_back(code_points(k, path));
    const std::string key = names.empty() ? use("string") : "\"\\\"\" " + other_key(names, {}, name + "-other") + " " + use("space");
    extra = add_rule(name + "-kv", key + " \":\" " + use("space") + " " + v);
  }
  // One key/value rule per property, in the schema's order.
  std::vector<std::string> kvs;
  std::vector<bool> req;
  for (const auto& [k, v] : props.items()) {
    const std::string value = visit(v, name + "-" + k, path + "/properties/" + k);
    kvs.push_back(add_rule(name + "-" + k + "-kv", literal_value(json(k)) + " \":\" " + use("space") + " " + value));
    req.push_back(required.count(k) > 0);
  }
  // tail(i, first): properties i.. (optional ones may be skipped), then the extra keys;
  // `first` says whether a comma is still unneeded. Built backwards, two rules per index.
  const std::string sp = use("space");
  std::string tail_first, tail_rest;  // tail(i+1, true), tail(i+1, false)
  if (extra.empty()) {
    tail_first = tail_rest = "";
  } else {
    tail_first = "(" + extra + " (\",\" " + sp + " " + extra + ")*)?";
    tail_rest = "(\",\" " + sp + " " + extra + ")*";
  }
  for (size_t i = kvs.size(); i-- > 0;) {
    const std::string with_first = kvs[i] + " " + tail_rest;
    const std::string with_rest = "\",\" " + sp + " " + kvs[i] + " " + tail_rest;
    std::string f = req[i] ? with_first : with_first + " | " + (tail_first.empty() ? "\"\"" : tail_first);
    std::string r = req[i] ? with_rest : with_rest + " | " + (tail_rest.empty() ? "\"\"" : tail_rest);
    tail_first = add_rule(name + "-p" + std::to_string(i) + "-first", f);
    tail_rest = add_rule(name + "-p" + std::to_string(i) + "-rest", r);
  }
  return add_rule(name, "\"{\" " + sp + " " + (tail_first.empty() ? "" : tail_first + " ") + "\"}\" " + sp);
}

std::string Converter::visit_array(const json& s, const std::string& name, const std::string& path) {
  const auto it = s.find("items");
  const std::string item = it == s.end() ? use("value") : visit(*it, name + "-item", path + "/items");
  const int64_t lo = count_field(s, "minItems", 0, path), hi = count_field(s, "maxItems", -1, path);
  if (hi >= 0 && hi < lo) fail(path + "/maxItems", "'maxItems' is below 'minItems'");
  const std::string sp = use("space");
  return add_rule(name, "\"[\" " + sp + " " + repeat(item, lo, hi, "\",\" " + sp) + " \"]\" " + sp);
}

std::string Converter::visit_string(const json& s, const std::string& name, const std::string& path) {
  const std::string sp = use("space");
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  if (const auto it = s.find("pattern"); it != s.end()) {
    if (!it->is_string()) fail(path + "/pattern", "'pattern' must be a string");
    if (has_len || s.contains("format")) fail(path, "unsupported: 'pattern' together with a length or 'format'");
    use("char");
    return add_rule(name, "\"\\\"\" (" + regex_to_gbnf(it->get<std::string>(), path + "/pattern") + ") \"\\\"\" " + sp);
  }
  if (const auto it = s.find("format"); it != s.end()) {
    const std::string f = it->is_string() ? it->get<std::string>() : "";
    if (f != "date" && f != "time" && f != "date-time" && f != "uuid")
      fail(path + "/format", "unsupported format " + it->dump() + " (supported: date, time, date-time, uuid)");
    if (has_len) fail(path, "unsupported: 'format' together with a length");
    return add_rule(name, "\"\\\"\" " + use(f) + " \"\\\"\" " + sp);
  }
  const int64_t lo = count_field(s, "minLength", 0, path), hi = count_field(s, "maxLength", -1, path);
  if (hi >= 0 && hi < lo) fail(path + "/maxLength", "'maxLength' is below 'minLength'");
  if (!has_len) return use("string");
  use("char");
  const std::string n = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  return add_rule(name, "\"\\\"\" char" + n + " \"\\\"\" " + sp);
}

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& root_name) {
  if (rule_name(root_name) != root_name || primitives().count(root_name))
    throw SchemaError("JSON schema: '" + root_name + "' cannot name the start rule");
  return Converter(schema).run(root_name);
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  for (const char* r : {"space", "boolean", "null", "integral-part", "decimal-part", "integer", "number", "char", "string",
                        "value", "object", "array"})
    out += std::string(r) + " ::= " + primitives().at(r) + "\n";
  return out;
}

}  // namespace ws::grammar
