#include "server/structured_output.h"

#include <string>

#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace ws::server {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const grammar::Grammar> compile(const std::string& gbnf, const char* param) {
  try {
    return std::make_shared<const grammar::Grammar>(grammar::Grammar::parse(gbnf));
  } catch (const grammar::GrammarError& e) {
    throw bad_request(std::string("'") + param + "': " + e.what(), param, "invalid_grammar");
  }
}

std::shared_ptr<const grammar::Grammar> from_schema(const Json& schema, const char* param) {
  std::string gbnf;
  try {
    gbnf = grammar::json_schema_to_gbnf(schema);
  } catch (const grammar::SchemaError& e) {
    throw bad_request(std::string("'") + param + "': " + e.what(), param, "unsupported_schema");
  }
  return compile(gbnf, param);
}

const Json* present(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::shared_ptr<const grammar::Grammar> from_response_format(const Json& rf) {
  if (!rf.is_object()) throw bad_request("'response_format' must be an object", "response_format", "invalid_type");
  const Json* type = present(rf, "type");
  if (!type || !type->is_string())
    throw bad_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"",
                      "response_format.type", "invalid_value");
  const std::string t = type->get<std::string>();
  if (t == "text") return nullptr;
  if (t == "json_object") {
    // llama-server also takes a schema here.
    if (const Json* s = present(rf, "schema")) return from_schema(*s, "response_format.schema");
    return compile(grammar::json_object_gbnf(), "response_format");
  }
  if (t == "json_schema") {
    const Json* js = present(rf, "json_schema");
    if (!js || !js->is_object())
      throw bad_request("'response_format.json_schema' must be an object with a 'schema'", "response_format.json_schema",
                        "invalid_value");
    const Json* s = present(*js, "schema");
    // As llama-server: no schema means any JSON value.
    return from_schema(s ? *s : Json::object(), "response_format.json_schema.schema");
  }
  throw bad_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"" + t + "\"",
                    "response_format.type", "invalid_value");
}

}  // namespace

std::shared_ptr<const grammar::Grammar> parse_structured_output(const Json& body) {
  const Json* rf = present(body, "response_format");
  const Json* g = present(body, "grammar");
  const Json* js = present(body, "json_schema");
  if (int(rf != nullptr) + int(g != nullptr) + int(js != nullptr) > 1)
    throw bad_request("'response_format', 'grammar' and 'json_schema' exclude each other; send one", "grammar",
                      "invalid_value");
  if (g) {
    if (!g->is_string()) throw bad_request("'grammar' must be a string (GBNF)", "grammar", "invalid_type");
    return compile(g->get<std::string>(), "grammar");
  }
  if (js) return from_schema(*js, "json_schema");
  if (rf) return from_response_format(*rf);
  return nullptr;
}

std::shared_ptr<const grammar::TokenVocab> GrammarVocabCache::get() {
  std::lock_guard lock(mu_);
  if (!vocab_) vocab_ = grammar::TokenVocab::from_tokenizer(tok_);
  return vocab_;
}

}  // namespace ws::server
