// JSON schema -> GBNF, in the spirit of llama.cpp's json-schema-to-grammar: the grammar
// accepts exactly the JSON texts (compact, with bounded optional whitespace) that validate
// against the schema, for the subset of JSON Schema listed in the README. Any other
// keyword that would constrain the value is an error naming it: a request is never
// silently less constrained than its schema says.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ws::grammar {

class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// GBNF (start rule "root") for values valid against `schema`. Properties come in the
// schema's order; a missing additionalProperties means none (as llama.cpp and OpenAI's
// strict mode); oneOf is treated as anyOf. Throws SchemaError naming the keyword and its
// JSON pointer for anything unsupported. `root_name` names the value's rule: a caller that
// embeds the value in a larger grammar (a forced tool call: `root ::= "<tool_call>" call
// "</tool_call>"`) passes its own name and appends its rules (avoiding the helper names
// space, string, value, object, array, char, number, integer, boolean, null).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& root_name = "root");

// GBNF for any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace ws::grammar
