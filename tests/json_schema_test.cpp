// JSON schema -> GBNF: for each supported keyword, texts valid against the schema match
// the grammar and invalid ones do not; each unsupported keyword is an error naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace ws::grammar {
namespace {

using ojson = nlohmann::ordered_json;

struct Case {
  const char* schema;
  std::vector<const char*> valid, invalid;
};

void check(const Case& c) {
  const std::string gbnf = json_schema_to_gbnf(ojson::parse(c.schema));
  const Matcher m(std::make_shared<const Grammar>(Grammar::parse(gbnf)));
  for (const char* v : c.valid) EXPECT_TRUE(m.matches(v)) << c.schema << "\nshould accept: " << v << "\n" << gbnf;
  for (const char* v : c.invalid) EXPECT_FALSE(m.matches(v)) << c.schema << "\nshould refuse: " << v << "\n" << gbnf;
}

std::string error_of(const char* schema) {
  try {
    json_schema_to_gbnf(ojson::parse(schema));
  } catch (const SchemaError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, PrimitiveTypes) {
  check({R"({"type":"string"})", {R"("")", R"("a b")", R"("q\"\\\u00e9")", "\"\xC3\xA9\""}, {R"(a)", R"("a)", "\"\x01\"", R"(1)"}});
  check({R"({"type":"integer"})", {"0", "-12", "1234567890123456"}, {"01", "1.5", "1e3", "\"1\"", "-"}});
  check({R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "NaN", "01"}});
  check({R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "null"}});
  check({R"({"type":"null"})", {"null"}, {"nul", "\"null\""}});
  check({R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}});
  check({R"({})", {"1", R"({"a":[1,{"b":null}]})", R"("s")"}, {"{", "[1,]"}});
}

TEST(JsonSchema, ObjectsRequiredOptionalAndAdditionalProperties) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                     "required":["b"]})";
  check({s,
         {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})", R"({ "a": 1, "b": "x", "c": false })"},
         {R"({})", R"({"a":1})", R"({"b":1})", R"({"b":"x","d":1})", R"({"b":"x",})", R"({"c":true,"b":"x"})"}});
  check({R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true})",
         {R"({})", R"({"a":1,"z":[1]})", R"({"z":"q"})"}, {R"({"a":"no"})"}});
  // A declared name is no extra key, but its prefixes and extensions are.
  check({R"({"type":"object","properties":{"ab":{"type":"null"}},"additionalProperties":{"type":"integer"}})",
         {R"({"a":1})", R"({"abc":1})", R"({"":1,"b":2})", R"({"ab":null,"x\"y":1})", R"({"\u0041":1})"},
         {R"({"ab":1})", R"({"ab":null,"ab":2})"}});
  check({R"({"type":"object","additionalProperties":{"type":"integer"}})", {R"({"x":1,"y":2})", R"({})"}, {R"({"x":"1"})"}});
  check({R"({"type":"object","properties":{"a":{"type":"null"}},"additionalProperties":false})", {R"({"a":null})", "{}"},
         {R"({"b":null})"}});
}

TEST(JsonSchema, NestedArraysItemsCountsAndStringLengths) {
  check({R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1,2,3]", "[ 1, 2 ]"},
         {"[]", "[1,2,3,4]", R"(["1"])"}});
  check({R"({"type":"array","items":{"type":"array","items":{"type":"boolean"},"maxItems":1}})", {"[]", "[[],[true]]"},
         {"[[true,false]]"}});
  check({R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nc")", "\"\xC3\xA9\xC3\xA9\""},
         {R"("a")", R"("abcd")"}});
  check({R"({"type":"object","properties":{"p":{"type":"object","properties":{"q":{"type":"array","items":{"type":"string"}}},
                                                "required":["q"]}},"required":["p"]})",
         {R"({"p":{"q":["a","b"]}})"}, {R"({"p":{}})", R"({"p":{"q":[1]}})"}});
}

TEST(JsonSchema, EnumConstAnyOfOneOfAndRefs) {
  check({R"({"enum":["red","green",3,null]})", {R"("red")", "3", "null"}, {R"("blue")", "4"}});
  check({R"({"const":{"k":"v"}})", {R"({"k":"v"})"}, {R"({"k":"w"})"}});
  check({R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"5", R"("x")"}, {R"("xy")", "true"}});
  check({R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0"}});
  check({R"({"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},
                                 "required":["next"]}},
            "$ref":"#/$defs/node"})",
         {R"({"next":null})", R"({"next":{"next":null}})"}, {R"({"next":{}})"}});
}

TEST(JsonSchema, PatternsAndFormats) {
  check({R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"}, {R"("AB-12")", R"("ab-123")", R"("AB-1234")"}});
  check({R"({"type":"string","pattern":"^(cat|dog)s?$"})", {R"("cat")", R"("dogs")"}, {R"("cow")"}});
  check({R"({"type":"string","pattern":"^[^,]+$"})", {R"("a b")"}, {R"("a,b")", R"("")"}});
  check({R"({"type":"string","pattern":"^a\"b.$"})", {R"("a\"bz")"}, {R"("a"bz")"}});
  check({R"({"type":"string","format":"date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"}});
  check({R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}});
  check({R"({"type":"string","format":"date-time"})", {R"("2024-01-02T03:04:05Z")"}, {R"("2024-01-02 03:04:05")"}});
}

TEST(JsonSchema, UnsupportedFeaturesAreErrorsNamingThem) {
  EXPECT_NE(error_of(R"({"type":"integer","minimum":0})").find("unsupported keyword 'minimum'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})")
                .find("at '/properties/a': unsupported keyword 'uniqueItems'"),
            std::string::npos)
      << error_of(R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})");
  EXPECT_NE(error_of(R"({"not":{"type":"null"}})").find("'not'"), std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"type":"object"},{"required":["a"]}]})").find("allOf"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","format":"email"})").find("unsupported format \"email\""), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"[a-z]+"})").find("must start with '^'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^(?=a)b$"})").find("lookaround"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"https://x/y.json"})").find("only local refs"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/missing"})").find("points at nothing"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"tuple"})").find("unsupported type 'tuple'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","prefixItems":[{"type":"null"}]})").find("'prefixItems'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","required":["x"]})").find("'x' is not in 'properties'"), std::string::npos);
}

// How a forced tool call embeds a schema in a larger grammar.
TEST(JsonSchema, EmbeddedUnderAnotherStartRule) {
  const std::string args = json_schema_to_gbnf(
      ojson::parse(R"({"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object",
                      "properties":{"city":{"type":"string","maxLength":20}},"required":["city"]}},
                      "required":["name","arguments"]})"),
      "call");
  const Matcher m(std::make_shared<const Grammar>(Grammar::parse("root ::= \"<tool_call>\" call \"</tool_call>\"\n" + args)));
  EXPECT_TRUE(m.matches(R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>)"));
  EXPECT_FALSE(m.matches(R"(<tool_call>{"name": "other", "arguments": {"city": "Paris"}}</tool_call>)"));
  EXPECT_THROW(json_schema_to_gbnf(ojson::object(), "string"), SchemaError);
}

TEST(JsonSchema, JsonObjectAcceptsAnyObjectOnly) {
  const Matcher m(std::make_shared<const Grammar>(Grammar::parse(json_object_gbnf())));
  EXPECT_TRUE(m.matches(R"({})"));
  EXPECT_TRUE(m.matches(R"({"a":[1,2.5,{"b":"c"}],"d":null})"));
  EXPECT_FALSE(m.matches(R"([1])"));
  EXPECT_FALSE(m.matches(R"("s")"));
  EXPECT_FALSE(m.matches(R"({"a":})"));
}

}  // namespace
}  // namespace ws::grammar
