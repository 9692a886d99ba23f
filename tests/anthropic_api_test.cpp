// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) end to end on
// `warmstart serve`, checked against outside truths rather than against itself: the greedy
// reply equals /v1/chat/completions' for the same conversation, count_tokens equals what
// /apply-template + /tokenize give, the second turn of a conversation reads the first from
// the prefix cache, and forced tool calls (random weights: tool_choice {type: "tool"}
// is how a call comes out) go round trip as tool_use / tool_result blocks. Request bodies
// follow the examples of Anthropic's documentation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "server/anthropic_api.h"
#include "server_client.h"

namespace {

using namespace ws::test;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

// The first fixture template (manifest order) with Hermes <tool_call>s and <think> blocks
// whose generation prompt does not open one; `opens_thinking`: one that does (Qwen 3.5).
fs::path fixture_template(bool opens_thinking) {
  const fs::path dir = kSharedDir / "fixtures" / "templates";
  const json manifest = json::parse(slurp(dir / "manifest.json"));
  for (const json& t : manifest["templates"]) {
    const std::string src = slurp(dir / t["file"].get<std::string>());
    const bool xml = src.find("<function=") != std::string::npos;
    if (opens_thinking ? xml && src.find("enable_thinking") != std::string::npos
                       : src.find("<tool_call>") != std::string::npos &&
                             src.find("<think>") != std::string::npos && !xml)
      return dir / t["file"].get<std::string>();
  }
  return {};
}

struct Event {
  std::string name;
  json data;
};

// Anthropic's SSE: `event: NAME` then `data: JSON`, a blank line after each.
std::vector<Event> anthropic_events(const std::string& body) {
  std::vector<Event> out;
  std::istringstream in(body);
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("event: ", 0) == 0) {
      name = line.substr(7);
    } else {
      EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
      out.push_back({name, json::parse(line.substr(6), nullptr, false)});
      EXPECT_EQ(out.back().data.value("type", ""), name) << "event name and data.type differ: " << line;
      name.clear();
    }
  }
  return out;
}

// The text of a streamed message's text_delta events, and its tool input JSON.
std::string joined(const std::vector<Event>& events, const char* delta_type, const char* field) {
  std::string s;
  for (const Event& e : events)
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == delta_type)
      s += e.data["delta"][field].get<std::string>();
  return s;
}

std::string text_of(const json& message) {
  std::string s;
  for (const json& b : message["content"])
    if (b["type"] == "text") s += b["text"].get<std::string>();
  return s;
}

const json kWeatherTool = {
    {"name", "get_weather"},
    {"description", "Get the current weather in a given location"},
    {"input_schema",
     {{"type", "object"},
      {"properties",
       {{"location",
         {{"type", "string"}, {"description", "The city and state, e.g. San Francisco, CA"}, {"maxLength", 12}}},
        {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
      {"required", {"location", "unit"}}}}};

class AnthropicTest : public SharedServerTest<AnthropicTest> {
 public:
  // One slot: consecutive turns land on the same engine, so reuse is deterministic.
  static std::vector<std::string> server_args() {
    return {"--parallel", "1", "-t", "2", "-c", "4096", "--cache-budget-mb", "64", "--chat-template-file",
            fixture_template(false).string()};
  }

 protected:
  static HttpResult post(const std::string& path, const json& body) { return curl(server_->port(), path, body.dump()); }
  static HttpResult post_ordered(const std::string& path, const ojson& body) {
    return curl(server_->port(), path, body.dump());
  }
  // The prompt tokens of an OpenAI chat body, by the utility routes. The body keeps its
  // keys in order: templates write tools with tojson, so order is part of the prompt.
  static size_t template_tokens(const ojson& chat) {
    const HttpResult t = post_ordered("/apply-template", chat);
    EXPECT_EQ(t.status, 200) << t.body;
    const HttpResult k = post("/tokenize", {{"content", t.j()["prompt"]}, {"add_special", true}});
    EXPECT_EQ(k.status, 200) << k.body;
    return k.j()["tokens"].size();
  }
};

TEST_F(AnthropicTest, PlainMessageEqualsChatCompletion) {
  // Anthropic's first example, greedy and short.
  const json body = {{"model", "claude-sonnet-4-5"}, {"max_tokens", 12}, {"temperature", 0},
                     {"messages", {{{"role", "user"}, {"content", "Hello, Claude"}}}}};
  const HttpResult r = post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.j();
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "claude-sonnet-4-5");
  EXPECT_FALSE(m.contains("choices"));
  EXPECT_FALSE(m.contains("timings"));
  EXPECT_TRUE(m["stop_sequence"].is_null());

  const HttpResult c = post("/v1/chat/completions", chat_body({{{"role", "user"}, {"content", "Hello, Claude"}}}, 12));
  ASSERT_EQ(c.status, 200) << c.body;
  const json cj = c.j();
  const json msg = cj["choices"][0]["message"];
  EXPECT_EQ(text_of(m), msg["content"].is_string() ? msg["content"].get<std::string>() : "");
  EXPECT_EQ(m["stop_reason"], cj["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn");
  EXPECT_EQ(m["usage"]["output_tokens"], cj["usage"]["completion_tokens"]);
  // Same rendering, same tokens: the chat turn finds the message turn's whole prompt cached.
  EXPECT_EQ(cj["usage"]["prompt_tokens_details"]["cached_tokens"], cj["usage"]["prompt_tokens"]);
  EXPECT_EQ(m["usage"]["input_tokens"].get<int>() + m["usage"]["cache_read_input_tokens"].get<int>(),
            cj["usage"]["prompt_tokens"].get<int>());
}

TEST_F(AnthropicTest, CountTokensEqualsTemplateAndTokenizer) {
  const json anthropic = {{"model", "claude-sonnet-4-5"},
                          {"system", "You are a scientist"},
                          {"messages", {{{"role", "user"}, {"content", "Hello, Claude"}},
                                        {{"role", "assistant"}, {"content", "Hello! How can I help?"}},
                                        {{"role", "user"}, {"content", "Explain entropy briefly."}}}}};
  const HttpResult r = post("/v1/messages/count_tokens", anthropic);  // no max_tokens: not needed here
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j().size(), 1u) << r.body;  // only input_tokens
  ojson chat = {{"messages", anthropic["messages"]}};
  chat["messages"].insert(chat["messages"].begin(), json{{"role", "system"}, {"content", "You are a scientist"}});
  EXPECT_EQ(r.j()["input_tokens"].get<size_t>(), template_tokens(chat));

  // System as text blocks, user content as a text block: the same prompt.
  json blocks = anthropic;
  blocks["system"] = {{{"type", "text"}, {"text", "You are a scientist"}}};
  blocks["messages"][0]["content"] = {{{"type", "text"}, {"text", "Hello, Claude"}}};
  const HttpResult b = post("/v1/messages/count_tokens", blocks);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.j()["input_tokens"], r.j()["input_tokens"]);
}

TEST_F(AnthropicTest, SecondTurnReadsTheFirstFromTheCache) {
  json body = {{"model", "m"}, {"max_tokens", 8}, {"temperature", 0}, {"system", "You are terse."},
               {"messages", {{{"role", "user"}, {"content", "Name a colour."}}}}};
  const HttpResult first = post("/v1/messages", body);
  ASSERT_EQ(first.status, 200) << first.body;
  const json u1 = first.j()["usage"];
  const int prompt1 = u1["input_tokens"].get<int>() + u1["cache_read_input_tokens"].get<int>();
  // The reply goes back as the assistant turn, as a client sends it.
  body["messages"].push_back({{"role", "assistant"}, {"content", first.j()["content"]}});
  body["messages"].push_back({{"role", "user"}, {"content", "Another one."}});
  const HttpResult second = post("/v1/messages", body);
  ASSERT_EQ(second.status, 200) << second.body;
  const json u2 = second.j()["usage"];
  EXPECT_GE(u2["cache_read_input_tokens"].get<int>(), prompt1) << second.body;
  json count = body;
  count.erase("max_tokens");
  const HttpResult n = post("/v1/messages/count_tokens", count);
  EXPECT_EQ(u2["input_tokens"].get<int>() + u2["cache_read_input_tokens"].get<int>(), n.j()["input_tokens"].get<int>());
}

TEST_F(AnthropicTest, StreamingEventsInOrderAndEqualToTheMessage) {
  const json body = {{"model", "m"}, {"max_tokens", 16}, {"temperature", 0},
                     {"messages", {{{"role", "user"}, {"content", "Write a haiku about rain."}}}}};
  const HttpResult whole = post("/v1/messages", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  json sbody = body;
  sbody["stream"] = true;
  const HttpResult s = post("/v1/messages", sbody);
  ASSERT_EQ(s.status, 200) << s.body;
  const std::vector<Event> ev = anthropic_events(s.body);
  ASSERT_GE(ev.size(), 3u) << s.body;
  EXPECT_EQ(ev.front().name, "message_start");
  EXPECT_EQ(ev.front().data["message"]["content"], json::array());
  EXPECT_GT(ev.front().data["message"]["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(ev[ev.size() - 2].name, "message_delta");
  EXPECT_EQ(ev.back().name, "message_stop");
  // Blocks: start, deltas, stop, indices counting up; nothing outside a block.
  int open = -1, next = 0;
  for (size_t i = 1; i + 2 < ev.size(); ++i) {
    const Event& e = ev[i];
    if (e.name == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block started inside another";
      EXPECT_EQ(e.data["index"], next);
      open = next++;
    } else if (e.name == "content_block_delta") {
      EXPECT_EQ(e.data["index"], open);
    } else {
      EXPECT_EQ(e.name, "content_block_stop");
      EXPECT_EQ(e.data["index"], open);
      open = -1;
    }
  }
  EXPECT_EQ(open, -1);
  EXPECT_EQ(joined(ev, "text_delta", "text"), text_of(whole.j()));
  const json& delta = ev[ev.size() - 2].data;
  EXPECT_EQ(delta["delta"]["stop_reason"], whole.j()["stop_reason"]);
  EXPECT_EQ(delta["usage"]["output_tokens"], whole.j()["usage"]["output_tokens"]);
}

TEST_F(AnthropicTest, StopSequenceAndMaxTokens) {
  json body = {{"model", "m"}, {"max_tokens", 24}, {"temperature", 0},
               {"messages", {{{"role", "user"}, {"content", "Count to ten."}}}}};
  const HttpResult free_run = post("/v1/messages", body);
  ASSERT_EQ(free_run.status, 200) << free_run.body;
  const std::string text = text_of(free_run.j());
  if (text.size() < 8) GTEST_SKIP() << "the fixture's greedy reply is too short to cut: " << free_run.body;
  const std::string stop = text.substr(4, 3);
  body["stop_sequences"] = {stop, "a stop string that never comes"};
  const HttpResult cut = post("/v1/messages", body);
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.j()["stop_reason"], "stop_sequence") << cut.body;
  EXPECT_EQ(cut.j()["stop_sequence"], stop);
  EXPECT_EQ(text_of(cut.j()), text.substr(0, text.find(stop)));
  body["stream"] = true;
  const std::vector<Event> ev = anthropic_events(post("/v1/messages", body).body);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].data["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(ev[ev.size() - 2].data["delta"]["stop_sequence"], stop);

  body.erase("stream");
  body.erase("stop_sequences");
  body["max_tokens"] = 2;
  const HttpResult short_run = post("/v1/messages", body);
  ASSERT_EQ(short_run.status, 200) << short_run.body;
  EXPECT_EQ(short_run.j()["stop_reason"], "max_tokens");
  EXPECT_EQ(short_run.j()["usage"]["output_tokens"], 2);
}

TEST_F(AnthropicTest, ForcedToolUseAndToolResultRoundTrip) {
  json body = {{"model", "m"}, {"max_tokens", 200}, {"temperature", 0}, {"tools", {kWeatherTool}},
               {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}}},
               {"messages", {{{"role", "user"}, {"content", "What's the weather like in San Francisco?"}}}}};
  const HttpResult r = post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = r.j();
  EXPECT_EQ(m["stop_reason"], "tool_use") << r.body;
  ASSERT_FALSE(m["content"].empty()) << r.body;
  const json call = m["content"].back();
  ASSERT_EQ(call["type"], "tool_use") << r.body;
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_FALSE(call["id"].get<std::string>().empty());
  ASSERT_TRUE(call["input"].is_object());
  EXPECT_TRUE(call["input"]["location"].is_string()) << call.dump();
  EXPECT_TRUE(call["input"]["unit"] == "celsius" || call["input"]["unit"] == "fahrenheit") << call.dump();

  // Streamed: a tool_use block whose input_json_delta pieces make the same input.
  json sbody = body;
  sbody["stream"] = true;
  const std::vector<Event> ev = anthropic_events(post("/v1/messages", sbody).body);
  bool started = false;
  for (const Event& e : ev)
    if (e.name == "content_block_start" && e.data["content_block"]["type"] == "tool_use") {
      started = true;
      EXPECT_EQ(e.data["content_block"]["name"], "get_weather");
      EXPECT_EQ(e.data["content_block"]["input"], json::object());
    }
  EXPECT_TRUE(started);
  EXPECT_EQ(json::parse(joined(ev, "input_json_delta", "partial_json"), nullptr, false), call["input"]);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].data["delta"]["stop_reason"], "tool_use");

  // {"type": "any"} forces a call too.
  json any = body;
  any["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(post("/v1/messages", any).j()["stop_reason"], "tool_use");

  // The result goes back as Anthropic's docs show it; the prompt is the one the same
  // conversation in OpenAI's shape renders (assistant tool_calls, then a tool message).
  body.erase("tool_choice");
  body["messages"].push_back({{"role", "assistant"}, {"content", m["content"]}});
  body["messages"].push_back(
      {{"role", "user"},
       {"content", {{{"type", "tool_result"}, {"tool_use_id", call["id"]}, {"content", "15 degrees"}}}}});
  const HttpResult next = post("/v1/messages", body);
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_GT(next.j()["usage"]["cache_read_input_tokens"].get<int>(), 0) << next.body;
  json count = body;
  count.erase("max_tokens");
  const HttpResult n = post("/v1/messages/count_tokens", count);
  ASSERT_EQ(n.status, 200) << n.body;
  ojson tools = {{{"type", "function"},
                 {"function", {{"name", "get_weather"}, {"description", kWeatherTool["description"]},
                               {"parameters", kWeatherTool["input_schema"]}}}}};
  ojson assistant = {{"role", "assistant"}, {"content", nullptr},
                    {"tool_calls", {{{"id", call["id"]}, {"type", "function"},
                                     {"function", {{"name", "get_weather"}, {"arguments", call["input"].dump()}}}}}}};
  if (text_of(m) != "") assistant["content"] = text_of(m);
  const ojson chat = {{"tools", tools},
                     {"messages", {body["messages"][0], assistant,
                                   {{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "15 degrees"}}}}};
  EXPECT_EQ(n.j()["input_tokens"].get<size_t>(), template_tokens(chat));
}

// tool_result blocks answer the calls of the assistant turn before them: they become tool
// messages right after it, ahead of any text in the same user message; array content and
// thinking blocks render as their OpenAI twins would.
TEST_F(AnthropicTest, ToolResultBlocksTranslateAsChatWould) {
  const json tool_use = {{"type", "tool_use"}, {"id", "toolu_01A"}, {"name", "get_weather"},
                         {"input", {{"location", "Paris"}, {"unit", "celsius"}}}};
  const json anthropic = {
      {"tools", {kWeatherTool}},
      {"messages",
       {{{"role", "user"}, {"content", "What's the weather in Paris?"}},
        {{"role", "assistant"},
         {"content", {{{"type", "thinking"}, {"thinking", "I should call the tool."}, {"signature", "x"}},
                      {{"type", "text"}, {"text", "Let me check."}}, tool_use}}},
        {{"role", "user"},
         {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_01A"}, {"is_error", false},
                       {"content", {{{"type", "text"}, {"text", "15 degrees"}}}}},
                      {{"type", "text"}, {"text", "Is that warm?"}}}}}}}};
  const HttpResult r = post("/v1/messages/count_tokens", anthropic);
  ASSERT_EQ(r.status, 200) << r.body;
  const ojson call = {{"id", "toolu_01A"}, {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", tool_use["input"].dump()}}}};
  const ojson chat = {
      {"tools", {{{"type", "function"},
                  {"function", {{"name", "get_weather"}, {"description", kWeatherTool["description"]},
                                {"parameters", kWeatherTool["input_schema"]}}}}}},
      {"messages",
       {anthropic["messages"][0],
        {{"role", "assistant"}, {"content", "Let me check."}, {"reasoning_content", "I should call the tool."},
         {"tool_calls", {call}}},
        {{"role", "tool"}, {"tool_call_id", "toolu_01A"}, {"content", "15 degrees"}},
        {{"role", "user"}, {"content", "Is that warm?"}}}}};
  EXPECT_EQ(r.j()["input_tokens"].get<size_t>(), template_tokens(chat));
  // A count does not see order. The prefix cache does: after the Anthropic turn, the chat
  // turn finds its whole prompt cached only if both rendered the very same tokens.
  json generate = anthropic;
  ojson chat_generate = chat;
  generate["max_tokens"] = chat_generate["max_tokens"] = 4;
  generate["temperature"] = chat_generate["temperature"] = 0;
  const HttpResult m = post("/v1/messages", generate);
  ASSERT_EQ(m.status, 200) << m.body;
  const HttpResult c = post_ordered("/v1/chat/completions", chat_generate);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.j()["usage"]["prompt_tokens_details"]["cached_tokens"], c.j()["usage"]["prompt_tokens"]) << c.body;
}

// A final assistant message is a prefill: the reply continues it. The prompt is the
// conversation rendered and cut right after the prefill's text, checked through the raw
// /v1/completions path (same tokens: its whole prompt is found cached).
TEST_F(AnthropicTest, PrefillContinuesTheFinalAssistantMessage) {
  const json msgs = {{{"role", "user"}, {"content", "Count to ten."}},
                     {{"role", "assistant"}, {"content", "One, two,"}}};
  const json body = {{"model", "m"}, {"max_tokens", 6}, {"temperature", 0}, {"messages", msgs}};
  const HttpResult r = post("/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string rendered = post("/apply-template", json{{"messages", msgs}}).j()["prompt"];
  const std::string prompt = rendered.substr(0, rendered.rfind("One, two,") + std::string("One, two,").size());
  const HttpResult c = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(c.status, 200) << c.body;
  const json u = c.j()["usage"];
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], u["prompt_tokens"]) << c.body;
  EXPECT_EQ(r.j()["usage"]["input_tokens"].get<int>() + r.j()["usage"]["cache_read_input_tokens"].get<int>(),
            u["prompt_tokens"].get<int>());
  auto trimmed = [](std::string s) { return s.erase(0, s.find_first_not_of(" \n")); };
  EXPECT_EQ(trimmed(text_of(r.j())), trimmed(c.j()["choices"][0]["text"].get<std::string>()));
}

TEST_F(AnthropicTest, ErrorsUseAnthropicsEnvelopeAndNameTheField) {
  auto expect_400 = [](const HttpResult& r, const std::string& needle) {
    EXPECT_EQ(r.status, 400) << r.body;
    const json j = r.j();
    EXPECT_EQ(j["type"], "error") << r.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  };
  const json user = {{"role", "user"}, {"content", "Hi"}};
  expect_400(post("/v1/messages", {{"model", "m"}, {"messages", {user}}}), "'max_tokens' is required");
  expect_400(post("/v1/messages", {{"max_tokens", 4}}), "'messages' is required");
  expect_400(post("/v1/messages", {{"max_tokens", 4}, {"messages", {{{"role", "system"}, {"content", "x"}}}}}),
             "messages[0].role");
  expect_400(post("/v1/messages", {{"max_tokens", 4},
                                   {"messages", {{{"role", "user"},
                                                  {"content", {{{"type", "tool_result"}, {"content", "x"}}}}}}}}),
             "messages[0].content[0].tool_use_id");
  expect_400(post("/v1/messages", {{"max_tokens", 4}, {"messages", {user}}, {"tools", {{{"name", "f"}}}}}),
             "tools[0].input_schema");
  expect_400(post("/v1/messages", {{"max_tokens", 4}, {"messages", {user}}, {"tool_choice", {{"type", "sometimes"}}}}),
             "tool_choice.type");
  expect_400(post("/v1/messages", {{"max_tokens", 4}, {"messages", {user}}, {"stop_sequences", {1}}}),
             "stop_sequences[0]");
  expect_400(post("/v1/messages", {{"max_tokens", 0}, {"messages", {user}}}), "max_tokens");
  expect_400(post("/v1/messages", {{"max_tokens", 4}, {"messages", {user}}, {"temperature", "hot"}}), "temperature");
  expect_400(post("/v1/messages/count_tokens", {{"messages", "Hi"}}), "'messages' must be an array");
  const HttpResult bad_json = curl(server_->port(), "/v1/messages", "{not json");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(bad_json.j()["type"], "error") << bad_json.body;
}

// A template whose generation prompt opens a thinking block (Qwen 3.5): the random-weight
// reply never closes it, so it all comes back as a thinking block, unless thinking is
// disabled (the template's enable_thinking, as chat_template_kwargs would set it).
TEST(AnthropicThinking, ThinkingBlocksAndTheDisabledSwitch) {
  ServerProcess server({"--parallel", "1", "-t", "2", "-c", "2048", "--chat-template-file",
                        fixture_template(true).string(), "--reasoning-format", "deepseek"});
  ASSERT_GT(server.port(), 0) << server.log();
  json body = {{"model", "m"}, {"max_tokens", 8}, {"temperature", 0},
               {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
               {"messages", {{{"role", "user"}, {"content", "What is 2+2?"}}}}};
  const HttpResult r = curl(server.port(), "/v1/messages", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.j()["content"].size(), 1u) << r.body;
  EXPECT_EQ(r.j()["content"][0]["type"], "thinking") << r.body;
  EXPECT_EQ(r.j()["content"][0]["signature"], "");
  body["stream"] = true;
  const std::vector<Event> ev = anthropic_events(curl(server.port(), "/v1/messages", body.dump()).body);
  EXPECT_EQ(joined(ev, "thinking_delta", "thinking"), r.j()["content"][0]["thinking"]);
  EXPECT_EQ(joined(ev, "signature_delta", "signature"), "");
  bool signed_before_stop = false;
  for (size_t i = 1; i < ev.size(); ++i)
    if (ev[i].name == "content_block_stop" && ev[i - 1].name == "content_block_delta" &&
        ev[i - 1].data["delta"]["type"] == "signature_delta")
      signed_before_stop = true;
  EXPECT_TRUE(signed_before_stop);

  body.erase("stream");
  body["thinking"] = {{"type", "disabled"}};
  const HttpResult off = curl(server.port(), "/v1/messages", body.dump());
  ASSERT_EQ(off.status, 200) << off.body;
  for (const json& b : off.j()["content"]) EXPECT_EQ(b["type"], "text") << off.body;
  json chat = chat_body({{{"role", "user"}, {"content", "What is 2+2?"}}}, 8);
  chat["chat_template_kwargs"] = {{"enable_thinking", false}};
  const json cj = curl(server.port(), "/v1/chat/completions", chat.dump()).j();
  EXPECT_EQ(text_of(off.j()), cj["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(cj["usage"]["prompt_tokens_details"]["cached_tokens"], cj["usage"]["prompt_tokens"]) << cj.dump();
}

std::string base64(const std::string& bytes) {
  static constexpr char kAbc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = v << 8 | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAbc[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

// An image block as Anthropic's vision example sends it (base64 source): the prompt is the
// one the same picture as an OpenAI image_url renders, image positions included.
TEST(AnthropicVision, Base64ImageBlockRendersAsImageUrl) {
  const json g = json::parse(slurp(kSharedDir / "fixtures" / "golden" / "vision-lfm2-lfm2.json"));
  ServerProcess server({"--mmproj", (kSharedDir / g["mmproj_file"].get<std::string>()).string(), "-t", "2", "-c",
                        "2048", "--parallel", "1", "--cache-budget-mb", "64"},
                       kSharedDir / g["model_file"].get<std::string>());
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string data = base64(slurp(kSharedDir / "fixtures" / "images" / "shapes-256.png"));
  const json image = {{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", data}}}};
  const json anthropic = {{"model", "m"}, {"max_tokens", 4}, {"temperature", 0},
                          {"messages", {{{"role", "user"},
                                         {"content", {image, {{"type", "text"}, {"text", "Describe this image."}}}}}}}};
  const HttpResult r = curl(server.port(), "/v1/messages", anthropic.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json count = anthropic;
  count.erase("max_tokens");
  const HttpResult n = curl(server.port(), "/v1/messages/count_tokens", count.dump());
  ASSERT_EQ(n.status, 200) << n.body;
  const json u = r.j()["usage"];
  EXPECT_EQ(n.j()["input_tokens"].get<int>(), u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>());
  const json parts = {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + data}}}},
                      {{"type", "text"}, {"text", "Describe this image."}}};
  const json c = curl(server.port(), "/v1/chat/completions",
                      chat_body({{{"role", "user"}, {"content", parts}}}, 4).dump()).j();
  EXPECT_EQ(c["usage"]["prompt_tokens"], n.j()["input_tokens"]) << c.dump();
  EXPECT_EQ(c["usage"]["prompt_tokens_details"]["cached_tokens"], c["usage"]["prompt_tokens"]) << c.dump();
  EXPECT_EQ(text_of(r.j()), c["choices"][0]["message"]["content"].get<std::string>());
}

// Thinking, then text, then two calls, as ReplyStreamer hands them over: one block open at
// a time, each closed before the next starts, the thinking one with its signature first.
TEST(AnthropicBlocks, OneBlockAtATimeInOrder) {
  ws::server::AnthropicBlocks blocks;
  std::vector<ws::server::SseEvent> ev;
  auto push = [&](const ojson& d) {
    for (auto& e : blocks.push(d)) ev.push_back(std::move(e));
  };
  push({{"reasoning_content", "hm"}});
  push({{"reasoning_content", "m."}});
  push({{"content", "Sure."}});
  for (const char* id : {"call_1", "call_2"}) {
    const ojson head = {{"index", 0}, {"id", id}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", ""}}}};
    push({{"tool_calls", {head}}});
    push({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"a\":1}"}}}}}}});
  }
  for (auto& e : blocks.close()) ev.push_back(std::move(e));
  EXPECT_TRUE(blocks.called());
  std::vector<std::string> got;
  for (const auto& e : ev) {
    std::string what = e.name + ":" + std::to_string(e.data["index"].get<int>());
    if (e.name == "content_block_delta") what += ":" + e.data["delta"]["type"].get<std::string>();
    if (e.name == "content_block_start") what += ":" + e.data["content_block"]["type"].get<std::string>();
    got.push_back(what);
  }
  const std::vector<std::string> want = {
      "content_block_start:0:thinking", "content_block_delta:0:thinking_delta", "content_block_delta:0:thinking_delta",
      "content_block_delta:0:signature_delta", "content_block_stop:0", "content_block_start:1:text",
      "content_block_delta:1:text_delta", "content_block_stop:1", "content_block_start:2:tool_use",
      "content_block_delta:2:input_json_delta", "content_block_stop:2", "content_block_start:3:tool_use",
      "content_block_delta:3:input_json_delta", "content_block_stop:3"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(ev[8].data["content_block"]["id"], "call_1");
  EXPECT_EQ(ev[9].data["delta"]["partial_json"], "{\"a\":1}");
  EXPECT_EQ(ev[0].wire().rfind("event: content_block_start\ndata: {", 0), 0u);
}

}  // namespace
