// POST /v1/responses (OpenAI's Responses API) end to end on the hybrid fixture model,
// checked against the server's own /v1/chat/completions for the same conversation (the
// two APIs share one engine path: greedy answers and prefix reuse must agree), with
// request bodies shaped as OpenAI's documentation writes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "server/responses_api.h"
#include "server_client.h"

namespace {

using namespace ws::test;
using nlohmann::json;

class ResponsesTest : public SharedServerTest<ResponsesTest> {};

HttpResult post(int port, const char* path, const json& body) { return curl(port, path, body.dump()); }

// The chat message of a greedy chat completion of `messages` (tools optional).
json chat_message(int port, const json& messages, int max_tokens, const json& extra = json::object()) {
  json body = chat_body(messages, max_tokens);
  for (const auto& [k, v] : extra.items()) body[k] = v;
  const HttpResult r = post(port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 200) << r.body;
  json c = r.j()["choices"][0];
  c["message"]["finish_reason"] = c["finish_reason"];
  c["message"]["usage"] = r.j()["usage"];
  return c["message"];
}

std::string text_of(const json& response) {
  std::string s;
  for (const json& item : response["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"]) s += part["text"].get<std::string>();
  return s;
}

struct SseEvent {
  std::string name;
  json data;
};

// Responses events: `event: NAME` and `data: JSON` lines, blocks split by blank lines.
std::vector<SseEvent> responses_events(const std::string& body) {
  std::vector<SseEvent> out;
  std::istringstream in(body);
  std::string line;
  SseEvent cur;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (!cur.name.empty() || !cur.data.is_null()) out.push_back(cur);
      cur = {};
    } else if (line.rfind("event: ", 0) == 0) {
      cur.name = line.substr(7);
    } else if (line.rfind("data: ", 0) == 0) {
      cur.data = json::parse(line.substr(6));
    } else {
      ADD_FAILURE() << "unexpected SSE line: " << line;
    }
  }
  EXPECT_TRUE(cur.name.empty() && cur.data.is_null()) << "the last event was not terminated by a blank line";
  return out;
}

TEST_F(ResponsesTest, StringInputWithInstructionsMatchesChatCompletion) {
  // OpenAI's documentation example: instructions plus a string input.
  const json body = {{"model", "gpt-4.1"},
                     {"instructions", "You are a coding assistant that talks like a pirate."},
                     {"input", "Are semicolons optional in JavaScript?"},
                     {"max_output_tokens", 16},
                     {"temperature", 0}};
  const HttpResult r = post(port(), "/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(j["model"], "gpt-4.1");
  EXPECT_EQ(j["instructions"], body["instructions"]);
  EXPECT_TRUE(j["created_at"].is_number_integer());
  EXPECT_TRUE(j["error"].is_null());
  ASSERT_FALSE(j["output"].empty()) << r.body;

  const json msgs = {{{"role", "system"}, {"content", body["instructions"]}}, {{"role", "user"}, {"content", body["input"]}}};
  const json chat = chat_message(port(), msgs, 16);
  EXPECT_EQ(text_of(j), chat["content"].get<std::string>()) << "greedy Responses and chat answers differ";
  EXPECT_EQ(j["output_text"], text_of(j));
  EXPECT_EQ(j["status"], chat["finish_reason"] == "length" ? "incomplete" : "completed");
  EXPECT_EQ(j["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(j["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(j["usage"]["total_tokens"],
            j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());
  EXPECT_TRUE(j["usage"]["input_tokens_details"]["cached_tokens"].is_number_integer());
  for (const json& item : j["output"]) {
    if (item["type"] != "message") continue;
    EXPECT_EQ(item["id"].get<std::string>().rfind("msg_", 0), 0u);
    EXPECT_EQ(item["role"], "assistant");
    EXPECT_EQ(item["content"][0]["type"], "output_text");
    EXPECT_EQ(item["content"][0]["annotations"], json::array());
  }
}

TEST_F(ResponsesTest, MessageListSecondTurnReusesTheFirstTurnsPrefix) {
  // Input items as OpenAI documents them: a developer message and a user message with
  // content parts; then the conversation continues with the returned output items.
  json input = {{{"role", "developer"}, {"content", "Talk like a pirate."}},
                {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Are semicolons optional?"}}}}}};
  const json first = post(port(), "/v1/responses", {{"model", "m"}, {"input", input}, {"max_output_tokens", 8},
                                                    {"temperature", 0}}).j();
  ASSERT_EQ(first["object"], "response") << first.dump();
  for (const json& item : first["output"]) input.push_back(item);
  input.push_back({{"type", "message"}, {"role", "user"}, {"content", "And in Python?"}});
  const HttpResult r = post(port(), "/v1/responses", {{"model", "m"}, {"input", input}, {"max_output_tokens", 8},
                                                      {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json second = r.j();
  EXPECT_GT(second["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0)
      << "the second turn recomputed the first turn's prompt";
  // The same conversation as chat messages gives the same greedy reply.
  const json msgs = {{{"role", "system"}, {"content", "Talk like a pirate."}},
                     {{"role", "user"}, {"content", "Are semicolons optional?"}},
                     {{"role", "assistant"}, {"content", text_of(first)}},
                     {{"role", "user"}, {"content", "And in Python?"}}};
  const json chat = chat_message(port(), msgs, 8);
  EXPECT_EQ(text_of(second), chat["content"].get<std::string>());
  EXPECT_EQ(second["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
}

TEST_F(ResponsesTest, MaxOutputTokensMakesTheResponseIncomplete) {
  const json msgs = {{{"role", "user"}, {"content", "Write a very long story about the sea."}}};
  const json chat = chat_message(port(), msgs, 3);
  ASSERT_EQ(chat["finish_reason"], "length") << "the fixture stopped within 3 tokens";
  const json j = post(port(), "/v1/responses", {{"input", msgs[0]["content"]}, {"max_output_tokens", 3},
                                                {"temperature", 0}}).j();
  EXPECT_EQ(j["status"], "incomplete") << j.dump();
  EXPECT_EQ(j["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(j["max_output_tokens"], 3);
  EXPECT_EQ(j["usage"]["output_tokens"], 3);
  EXPECT_EQ(text_of(j), chat["content"].get<std::string>());
  if (!j["output"].empty()) { EXPECT_EQ(j["output"].back()["status"], "incomplete"); }
}

TEST_F(ResponsesTest, StreamingEventsComeInOrderAndAgreeWithTheWholeResponse) {
  const json body = {{"model", "m"}, {"input", "Tell me a three sentence bedtime story about a unicorn."},
                     {"max_output_tokens", 20}, {"temperature", 0}};
  const json whole = post(port(), "/v1/responses", body).j();
  json sbody = body;
  sbody["stream"] = true;
  const HttpResult s = post(port(), "/v1/responses", sbody);
  ASSERT_EQ(s.status, 200) << s.body;
  const auto ev = responses_events(s.body);
  ASSERT_GE(ev.size(), 3u) << s.body;
  EXPECT_EQ(ev[0].name, "response.created");
  EXPECT_EQ(ev[1].name, "response.in_progress");
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].data["response"]["output"], json::array());
  const std::string final_name = whole["status"] == "completed" ? "response.completed" : "response.incomplete";
  EXPECT_EQ(ev.back().name, final_name);
  const std::string id = ev[0].data["response"]["id"];
  std::string streamed, item_id;
  std::vector<std::string> order;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].data["type"], ev[i].name) << "event: line and data.type differ";
    EXPECT_EQ(ev[i].data["sequence_number"], int(i)) << ev[i].name;
    if (ev[i].data.contains("response")) { EXPECT_EQ(ev[i].data["response"]["id"], id); }
    if (ev[i].name.find("output_text") != std::string::npos || ev[i].name.find("content_part") != std::string::npos) {
      EXPECT_EQ(ev[i].data["item_id"], item_id) << ev[i].name;
      EXPECT_EQ(ev[i].data["content_index"], 0);
    }
    if (ev[i].name == "response.output_item.added" && ev[i].data["item"]["type"] == "message") {
      item_id = ev[i].data["item"]["id"];
      EXPECT_EQ(ev[i].data["item"]["content"], json::array()) << "clients append the parts to an empty list";
      EXPECT_EQ(ev[i].data["item"]["status"], "in_progress");
    }
    if (ev[i].name == "response.output_text.delta") streamed += ev[i].data["delta"].get<std::string>();
    if (ev[i].name != "response.output_text.delta" && ev[i].name != "response.reasoning_text.delta") order.push_back(ev[i].name);
  }
  const json& fin = ev.back().data["response"];
  EXPECT_EQ(streamed, text_of(fin));
  EXPECT_EQ(streamed, text_of(whole)) << "greedy streamed and whole responses differ";
  EXPECT_EQ(fin["status"], whole["status"]);
  EXPECT_EQ(fin["usage"]["output_tokens"], whole["usage"]["output_tokens"]);
  if (!streamed.empty() && whole["output"].size() == 1) {
    const std::vector<std::string> expected = {"response.created",           "response.in_progress",
                                               "response.output_item.added", "response.content_part.added",
                                               "response.output_text.done",  "response.content_part.done",
                                               "response.output_item.done",  final_name};
    EXPECT_EQ(order, expected);
  }
}

// Flat Responses-style function tools; bounded arguments so a random-weight model finishes a call.
const json kTools = json::array({{{"type", "function"},
                                  {"name", "lookup"},
                                  {"description", "Look a key up."},
                                  {"parameters",
                                   {{"type", "object"},
                                    {"properties", {{"key", {{"type", "string"}, {"enum", {"a", "b"}}}}}},
                                    {"required", {"key"}}}}}});

TEST_F(ResponsesTest, ForcedFunctionCallRoundTrip) {
  json input = {{{"role", "user"}, {"content", "Look it up."}}};
  const json body = {{"model", "m"}, {"input", input}, {"tools", kTools}, {"max_output_tokens", 64},
                     {"temperature", 0}, {"tool_choice", {{"type", "function"}, {"name", "lookup"}}}};
  const HttpResult r = post(port(), "/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["tools"], kTools);
  EXPECT_EQ(j["tool_choice"], body["tool_choice"]);
  json call;
  for (const json& item : j["output"])
    if (item["type"] == "function_call") call = item;
  ASSERT_FALSE(call.is_null()) << r.body;
  EXPECT_EQ(call["name"], "lookup");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_FALSE(call["call_id"].get<std::string>().empty());
  const json args = json::parse(call["arguments"].get<std::string>());
  EXPECT_TRUE(args["key"] == "a" || args["key"] == "b") << args;

  // The same forced call streamed: added (arguments empty), arguments delta and done, item done.
  json sbody = body;
  sbody["stream"] = true;
  std::vector<std::string> names;
  json streamed_call;
  for (const SseEvent& e : responses_events(post(port(), "/v1/responses", sbody).body)) {
    names.push_back(e.name);
    if (e.name == "response.output_item.added" && e.data["item"]["type"] == "function_call") {
      EXPECT_EQ(e.data["item"]["arguments"], "");
    }
    if (e.name == "response.output_item.done" && e.data["item"]["type"] == "function_call") streamed_call = e.data["item"];
  }
  for (const char* n : {"response.function_call_arguments.delta", "response.function_call_arguments.done"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(streamed_call["arguments"], call["arguments"]);
  EXPECT_EQ(names.back(), "response.completed");

  // Second turn: the call and its output go back as input items.
  input.push_back(call);
  input.push_back({{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "found: 42"}});
  const HttpResult r2 = post(port(), "/v1/responses", {{"model", "m"}, {"input", input}, {"tools", kTools},
                                                        {"max_output_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(r2.status, 200) << r2.body;
  const json second = r2.j();
  EXPECT_GT(second["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0);
  // The chat-completions form of the same conversation renders the same prompt.
  const json chat_tools = json::array({{{"type", "function"}, {"function", {{"name", "lookup"},
                                        {"description", "Look a key up."}, {"parameters", kTools[0]["parameters"]}}}}});
  const json msgs = {{{"role", "user"}, {"content", "Look it up."}},
                     {{"role", "assistant"}, {"content", nullptr},
                      {"tool_calls", {{{"id", call["call_id"]}, {"type", "function"},
                                       {"function", {{"name", "lookup"}, {"arguments", call["arguments"]}}}}}}},
                     {{"role", "tool"}, {"tool_call_id", call["call_id"]}, {"content", "found: 42"}}};
  const json chat = chat_message(port(), msgs, 8, {{"tools", chat_tools}});
  EXPECT_EQ(second["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(text_of(second), chat["content"].is_string() ? chat["content"].get<std::string>() : "");
}

TEST_F(ResponsesTest, TextFormatJsonSchemaConstrainsTheReply) {
  const json body = {{"input", "Write an example"}, {"max_output_tokens", 10}, {"temperature", 0},
                     {"text", {{"format", {{"type", "json_schema"}, {"name", "test"},
                                           {"schema", {{"const", "foooooo"}}}}}}}};
  const HttpResult r = post(port(), "/v1/responses", body);
  ASSERT_EQ(r.status, 200) << r.body;
  // The grammar allows whitespace around the value; the value is fixed.
  EXPECT_EQ(json::parse(text_of(r.j())), "foooooo") << text_of(r.j());
  const json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "test"}, {"schema", {{"const", "foooooo"}}}}}};
  const json chat = chat_message(port(), {{{"role", "user"}, {"content", "Write an example"}}}, 10, {{"response_format", rf}});
  EXPECT_EQ(text_of(r.j()), chat["content"].get<std::string>());
  EXPECT_EQ(r.j()["text"], body["text"]);
}

TEST_F(ResponsesTest, InvalidRequestsNameTheField) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model", "m"}}, "input"},
      {{{"input", 5}}, "input"},
      {{{"input", "hi"}, {"previous_response_id", "resp_123"}}, "previous_response_id"},
      {{{"input", "hi"}, {"conversation", "conv_1"}}, "conversation"},
      {{{"input", {{{"type", "web_search_call"}}}}}, "input[0].type"},
      {{{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}}, "input[0].type"},
      {{{"input", {user, {{"type", "function_call"}, {"name", "f"}, {"arguments", "{}"}}}}}, "input[1].call_id"},
      {{{"input", {user, {{"type", "function_call_output"}, {"call_id", "c"}}}}}, "input[1].output"},
      {{{"input", {{{"role", "user"}, {"content", {{{"type", "input_file"}, {"file_id", "f"}}}}}}}},
       "input[0].content[0].type"},
      {{{"input", {{{"role", "critic"}, {"content", "x"}}}}}, "input[0].role"},
      {{{"input", "hi"}, {"tools", {{{"type", "function"}}}}}, "tools[0].name"},
      {{{"input", "hi"}, {"tools", kTools}, {"tool_choice", {{"type", "function"}, {"name", "nope"}}}},
       "tool_choice.name"},
      {{{"input", "hi"}, {"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"input", "hi"}, {"temperature", 5}}, "temperature"},
      {{{"input", "hi"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}}}, "text.format.schema"},
      {{{"input", "hi"}, {"text", {{"format", {{"type", "yaml"}}}}}}, "text.format.type"},
      {{{"input", "hi"}, {"truncation", "auto"}}, "truncation"},
  };
  for (const auto& [body, param] : cases) {
    const HttpResult r = post(port(), "/v1/responses", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    EXPECT_EQ(r.j()["error"]["param"], param) << body.dump() << " -> " << r.body;
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find(param.substr(0, param.find('['))), std::string::npos)
        << r.body;
  }
}

// A chat template whose generation prompt opens a thinking block (found by what it
// contains): the reply starts as reasoning, which becomes a reasoning item.
fs::path thinking_template() {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(kSharedDir / "fixtures" / "templates")) {
    if (e.path().extension() != ".jinja") continue;
    const std::string src = slurp(e.path());
    if (src.find("<function=") != std::string::npos && src.find("enable_thinking") != std::string::npos)
      found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  return found.empty() ? fs::path() : found.front();
}

TEST(ResponsesReasoning, ThinkingBecomesAReasoningItemWholeAndStreamed) {
  const fs::path tmpl = thinking_template();
  ASSERT_FALSE(tmpl.empty()) << "no fixture template with <function= and enable_thinking";
  ServerProcess server({"-t", "2", "-c", "4096", "--cache-budget-mb", "64", "--chat-template-file", tmpl.string(),
                        "--reasoning-format", "deepseek"});
  ASSERT_GT(server.port(), 0) << server.log();
  const json body = {{"input", "Hi"}, {"max_output_tokens", 12}, {"temperature", 0}};
  const json whole = post(server.port(), "/v1/responses", body).j();
  ASSERT_FALSE(whole["output"].empty()) << whole.dump();
  const json& rs = whole["output"][0];
  EXPECT_EQ(rs["type"], "reasoning") << whole.dump();
  EXPECT_EQ(rs["id"].get<std::string>().rfind("rs_", 0), 0u);
  EXPECT_FALSE(whole["usage"].contains("output_tokens_details")) << "reasoning tokens are not counted";
  const json chat = chat_message(server.port(), {{{"role", "user"}, {"content", "Hi"}}}, 12);
  EXPECT_EQ(rs["content"][0]["text"], chat["reasoning_content"]);
  EXPECT_EQ(text_of(whole), chat["content"].is_string() ? chat["content"].get<std::string>() : "");

  json sbody = body;
  sbody["stream"] = true;
  std::string thought;
  std::vector<std::string> names;
  json fin;
  for (const SseEvent& e : responses_events(post(server.port(), "/v1/responses", sbody).body)) {
    if (e.name == "response.reasoning_text.delta") thought += e.data["delta"].get<std::string>();
    else names.push_back(e.name);
    if (e.data.contains("response")) fin = e.data["response"];
  }
  EXPECT_EQ(thought, rs["content"][0]["text"]);
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[2], "response.output_item.added");
  EXPECT_NE(std::find(names.begin(), names.end(), "response.reasoning_text.done"), names.end());
  ASSERT_EQ(fin["output"].size(), whole["output"].size());
  for (size_t i = 0; i < fin["output"].size(); ++i) {
    json a = fin["output"][i], b = whole["output"][i];
    a.erase("id"), b.erase("id");
    EXPECT_EQ(a, b) << "streamed and whole output items differ at " << i;
  }
}

// The translation itself: an assistant turn sent back as several items (reasoning, a
// message, two calls) is one assistant message, as the chat reply was.
TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
  const ws::server::Json body = ws::server::Json::parse(R"({
    "model": "m", "instructions": "Be brief.",
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Think."}]},
      {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "get_weather", "arguments": "{\"city\":\"Rome\"}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
      {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "rain"}]}
    ],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
              {"type": "web_search_preview"}],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "max_output_tokens": 50, "store": true, "reasoning": {"effort": "low"}, "seed": 7
  })");
  const ws::server::ResponsesRequest r = ws::server::parse_responses_request(body);
  const json chat = json::parse(r.chat.dump());
  const json messages = chat["messages"];
  ASSERT_EQ(messages.size(), 6u) << messages.dump(1);
  EXPECT_EQ(messages[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(messages[1], json({{"role", "system"}, {"content", "Use tools."}}));
  EXPECT_EQ(messages[2]["content"][0], json({{"type", "text"}, {"text", "Weather?"}}));
  const json& a = messages[3];
  EXPECT_EQ(a["role"], "assistant");
  EXPECT_EQ(a["reasoning_content"], "Think.");
  EXPECT_EQ(a["content"][0]["text"], "Checking.");
  ASSERT_EQ(a["tool_calls"].size(), 2u);
  EXPECT_EQ(a["tool_calls"][1], json({{"id", "call_b"}, {"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Rome\"}"}}}}));
  EXPECT_EQ(messages[4], json({{"role", "tool"}, {"tool_call_id", "call_a"}, {"content", "sunny"}}));
  EXPECT_EQ(messages[5]["content"][0]["text"], "rain");
  // Function tools in chat's nested shape; the hosted tool has no chat equivalent.
  ASSERT_EQ(chat["tools"].size(), 1u);
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(chat["tool_choice"], json({{"type", "function"}, {"function", {{"name", "get_weather"}}}}));
  EXPECT_EQ(chat["max_tokens"], 50);
  EXPECT_EQ(chat["seed"], 7);
  EXPECT_EQ(chat["chat_template_kwargs"]["reasoning_effort"], "low");
  for (const char* k : {"input", "instructions", "max_output_tokens", "store", "reasoning"}) { EXPECT_FALSE(chat.contains(k)) << k; }
  EXPECT_EQ(r.echo["store"], false);
  EXPECT_EQ(json::parse(r.echo["tools"].dump()), json::parse(body["tools"].dump())) << "tools are echoed as sent";
}

}  // namespace
