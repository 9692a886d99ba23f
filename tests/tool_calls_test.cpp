// Tool calls and reasoning: the reply parser against what the fixture templates
// themselves write for an assistant's tool calls and thinking (Jinja2's renderings in
// shared/fixtures/templates/expected), the forced-call grammars against the parser
// (random sentences of each format's grammar must parse into calls that satisfy the
// tools' schemas), and streaming against the whole-reply parse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>
#include <set>
#include <sstream>

#include "chat/template.h"
#include "gguf/gguf.h"
#include "server/chat_format.h"
#include "tokenizer/tokenizer.h"
#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/chat_reply.h"
#include "server/tool_calls.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using namespace ws::server;

namespace {

const fs::path kTemplates = fs::path(WS_SHARED_DIR) / "fixtures" / "templates";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json load(const fs::path& p) { return Json::parse(slurp(p)); }

const Json& conversations() {
  static const Json all = load(kTemplates / "conversations.json")["conversations"];
  return all;
}

// Index of the first message of `conv` that has `key` (npos: none).
size_t first_with(const Json& conv, const char* key) {
  for (size_t i = 0; i < conv["messages"].size(); ++i)
    if (conv["messages"][i].contains(key) && !conv["messages"][i][key].is_null()) return i;
  return std::string::npos;
}

// Arguments as an object whatever shape the conversation used.
Json args_object(const Json& fn) {
  const Json& a = fn["arguments"];
  return a.is_string() ? Json::parse(a.get<std::string>()) : a;
}

// What the template renders for the assistant message at `k` (a tool-call turn): the
// Jinja2 rendering of the whole conversation past its longest common prefix with the
// conversation cut before `k` plus the generation prompt, up to the end of the turn.
struct Region {
  std::string text;
  std::string prompt;  // the generation prompt's rendering
};
std::optional<Region> assistant_region(const Json& tinfo, const Json& conv, size_t k, const std::string& full) {
  const std::string file = tinfo["file"];
  const auto tmpl = ws::chat::ChatTemplate::parse(slurp(kTemplates / file));
  Json ctx = {{"messages", Json(conv["messages"].begin(), conv["messages"].begin() + long(k))},
              {"tools", conv.contains("tools") ? conv["tools"] : Json(nullptr)},
              {"documents", nullptr},
              {"add_generation_prompt", true}};
  for (const char* key : {"bos_token", "eos_token"})
    if (tinfo.contains(key) && !tinfo[key].is_null()) ctx[key] = tinfo[key];
  // The clock render.py used (templates that print today's date).
  ws::chat::RenderOptions opt;
  std::tm now{};
  std::istringstream(load(kTemplates / "manifest.json")["fixed_now"].get<std::string>()) >>
      std::get_time(&now, "%Y-%m-%dT%H:%M:%S");
  std::mktime(&now);
  opt.now = now;
  std::string prompt;
  try {
    prompt = tmpl.render(ctx, opt);
  } catch (const ws::chat::TemplateError&) {
    return std::nullopt;
  }
  size_t lcp = 0;
  while (lcp < prompt.size() && lcp < full.size() && prompt[lcp] == full[lcp]) ++lcp;
  // Where the generation prompt and the turn part ways inside a marker (<think> vs
  // <tool_call>), the turn starts after the last line break or tag before it.
  if (lcp < prompt.size())
    while (lcp > 0 && full[lcp - 1] != '\n' && full[lcp - 1] != '>') --lcp;
  std::string region = full.substr(lcp);
  for (const char* key : {"end_of_turn", "eos_token"})
    if (tinfo.contains(key) && tinfo[key].is_string())
      if (const size_t e = region.find(tinfo[key].get<std::string>()); e != std::string::npos) region.resize(e);
  return Region{region, prompt};
}

TEST(ToolCalls, EachFixtureTemplatesOwnCallSyntaxParsesBack) {
  const Json manifest = load(kTemplates / "manifest.json");
  std::set<std::string> covered;
  for (const Json& conv : conversations()) {
    const size_t k = first_with(conv, "tool_calls");
    if (k == std::string::npos) continue;
    const std::string name = conv["name"];
    const Json& want = conv["messages"][k]["tool_calls"];
    for (const Json& tinfo : manifest["templates"]) {
      const std::string file = tinfo["file"], stem = file.substr(0, file.size() - 6);
      const Json expected = load(kTemplates / "expected" / (stem + ".json"));
      const Json& full = expected["cases"][name + "/agp=0/default"];
      if (!full.is_string()) continue;  // the template raised on this conversation
      const auto region = assistant_region(tinfo, conv, k, full.get<std::string>());
      // Templates that drop the calls from history (no "Paris" in the turn) have nothing to read.
      if (getenv("WS_DEBUG_TOOLS")) std::printf("%s %s: %s\n", stem.c_str(), name.c_str(), region ? region->text.c_str() : "(none)");
      if (!region || region->text.find(args_object(want[0]["function"])["city"].get<std::string>()) == std::string::npos)
        continue;
      const TemplateDialect d = detect_dialect(slurp(kTemplates / file));
      ReplySyntax syn;
      syn.tools = d.tools;
      syn.reasoning = d.reasoning;
      const ParsedReply got = parse_reply(syn, region->text, false);
      SCOPED_TRACE(stem + " " + name + " (" + tool_format_name(d.tools) + "): " + region->text);
      ASSERT_EQ(got.calls.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got.calls[i].name, want[i]["function"]["name"]);
        // Compared as unordered objects: Gemma's template writes keys sorted.
        EXPECT_EQ(nlohmann::json::parse(got.calls[i].arguments), nlohmann::json(args_object(want[i]["function"])));
        // Formats that carry the id (Mistral's) give it back.
        if (region->text.find(want[i]["id"].get<std::string>()) != std::string::npos) {
          EXPECT_EQ(got.calls[i].id, want[i]["id"]);
        }
      }
      covered.insert(tool_format_name(d.tools));
    }
  }
  std::string list;
  for (const auto& f : covered) list += f + " ";
  std::printf("[tool formats read back from fixture renderings] %s\n", list.c_str());
  // Every template family that writes calls into history: hermes, qwen_xml, llama3,
  // both Mistral formats, lfm2, nemotron_v2, gemma4, deepseek_r1.
  EXPECT_GE(covered.size(), 9u) << list;
}

TEST(ToolCalls, ReasoningAsFixtureTemplatesWriteIt) {
  const Json manifest = load(kTemplates / "manifest.json");
  // A conversation with a reasoning_content field on an assistant turn that a user turn follows.
  const Json* found = nullptr;
  size_t k = std::string::npos;
  for (const Json& c : conversations()) {
    for (size_t i = 0; i + 1 < c["messages"].size(); ++i)
      if (c["messages"][i].contains("reasoning_content") && c["messages"][i + 1]["role"] == "user") found = &c, k = i;
    if (found) break;
  }
  ASSERT_NE(found, nullptr);
  const Json& conv = *found;
  int checked = 0;
  for (const Json& tinfo : manifest["templates"]) {
    const std::string file = tinfo["file"];
    const std::string src = slurp(kTemplates / file);
    const TemplateDialect d = detect_dialect(src);
    if (d.reasoning.open.empty()) continue;
    const auto tmpl = ws::chat::ChatTemplate::parse(src);
    // The conversation up to the last assistant turn with thinking (which templates keep).
    Json ctx = {{"messages", Json(conv["messages"].begin(), conv["messages"].begin() + long(k + 1))},
                {"add_generation_prompt", false}};
    for (const char* key : {"bos_token", "eos_token"})
      if (tinfo.contains(key) && !tinfo[key].is_null()) ctx[key] = tinfo[key];
    std::string full;
    try {
      full = tmpl.render(ctx);
    } catch (const ws::chat::TemplateError&) {
      continue;
    }
    const Json& msg = conv["messages"][k];
    const auto region = assistant_region(tinfo, conv, k, full);
    if (!region || region->text.find(msg["reasoning_content"].get<std::string>()) == std::string::npos) continue;
    ChatOptions o;
    const ReplySyntax syn = reply_syntax(d, o, Json(), region->prompt);
    const ParsedReply got = parse_reply(syn, region->text, false);
    SCOPED_TRACE(file + ": " + region->text);
    EXPECT_EQ(got.reasoning, msg["reasoning_content"]);
    EXPECT_EQ(got.content, msg["content"]);
    ++checked;
    // --reasoning-format none: everything stays in content.
    o.reasoning = ReasoningFormat::none;
    const ParsedReply raw = parse_reply(reply_syntax(d, o, Json(), region->prompt), region->text, false);
    EXPECT_TRUE(raw.reasoning.empty());
    EXPECT_NE(raw.content.find(msg["reasoning_content"].get<std::string>()), std::string::npos);
  }
  EXPECT_GE(checked, 3);
}

// A random sentence of `g`: random allowed bytes, steering towards closing characters
// once long, ending as soon as the grammar can.
std::string random_sentence(const ws::grammar::Matcher& m, std::mt19937& rng) {
  ws::grammar::MatchState st = m.initial();
  std::string out;
  static const std::string closers = "\"<}])\n";
  for (int step = 0; step < 20000; ++step) {
    if (ws::grammar::Matcher::can_end(st)) return out;
    std::vector<uint8_t> allowed;
    for (int b = 0; b < 256; ++b) {
      ws::grammar::MatchState next;
      if (m.advance(st, uint8_t(b), next)) allowed.push_back(uint8_t(b));
    }
    if (allowed.empty()) return "";  // a dead end: the grammar is broken
    uint8_t pick = allowed[rng() % allowed.size()];
    std::vector<uint8_t> closing;
    for (char c : closers)
      if (std::find(allowed.begin(), allowed.end(), uint8_t(c)) != allowed.end()) closing.push_back(uint8_t(c));
    if (!closing.empty() && (out.size() > 40 || rng() % 4 == 0)) pick = closing[rng() % closing.size()];
    ws::grammar::MatchState next;
    m.advance(st, pick, next);
    st = next;
    out += char(pick);
  }
  return "";
}

// The fixture conversations' tools (strings, an integer, a boolean, an array of enums).
Json fixture_tools() {
  for (const Json& c : conversations())
    if (c.contains("tools")) return c["tools"];
  throw std::runtime_error("no conversation with tools");
}

void expect_valid_call(const ToolCall& c, const Json& tools) {
  const Json* fn = nullptr;
  for (const Json& t : tools)
    if (t["function"]["name"] == c.name) fn = &t["function"];
  ASSERT_NE(fn, nullptr) << c.name;
  const Json args = Json::parse(c.arguments);
  ASSERT_TRUE(args.is_object()) << c.arguments;
  const Json& params = (*fn)["parameters"];
  for (const Json& r : params["required"]) EXPECT_TRUE(args.contains(r.get<std::string>())) << c.arguments;
  for (const auto& [k, v] : args.items()) {
    ASSERT_TRUE(params["properties"].contains(k)) << k;
    const std::string type = params["properties"][k]["type"];
    if (type == "string") { EXPECT_TRUE(v.is_string()) << k; }
    if (type == "integer") { EXPECT_TRUE(v.is_number_integer()) << k; }
    if (type == "boolean") { EXPECT_TRUE(v.is_boolean()) << k; }
    if (type == "array") {
      ASSERT_TRUE(v.is_array()) << k;
      for (const Json& item : v) {
        const Json& allowed = params["properties"][k]["items"]["enum"];
        EXPECT_NE(std::find(allowed.begin(), allowed.end(), item), allowed.end()) << item;
      }
    }
  }
}

const std::vector<ToolFormat> kAllFormats = {
    ToolFormat::generic, ToolFormat::hermes,      ToolFormat::qwen_xml, ToolFormat::llama3_json, ToolFormat::mistral_nemo,
    ToolFormat::mistral_v11, ToolFormat::lfm2,    ToolFormat::nemotron_v2, ToolFormat::granite,  ToolFormat::gemma4,
    ToolFormat::deepseek_r1, ToolFormat::harmony};

TEST(ToolCalls, ForcedCallGrammarsProduceCallsTheParserReads) {
  const Json tools = fixture_tools();
  std::mt19937 rng(7);
  for (const ToolFormat f : kAllFormats) {
    for (const bool parallel : {false, true}) {
      for (const std::string& only : {std::string(), std::string("search_web")}) {
        SCOPED_TRACE(std::string(tool_format_name(f)) + (parallel ? " parallel" : "") + " " + only);
        const std::string gbnf = tool_call_gbnf(f, tools, only, parallel);
        auto g = std::make_shared<const ws::grammar::Grammar>(ws::grammar::Grammar::parse(gbnf));
        const ws::grammar::Matcher m(g);
        ReplySyntax syn;
        syn.tools = f;
        for (int trial = 0; trial < 8; ++trial) {
          const std::string text = random_sentence(m, rng);
          ASSERT_FALSE(text.empty()) << gbnf;
          const ParsedReply r = parse_reply(syn, text, false);
          ASSERT_GE(r.calls.size(), 1u) << text;
          EXPECT_EQ(r.content, "") << text;
          for (const ToolCall& c : r.calls) {
            expect_valid_call(c, tools);
            if (!only.empty()) { EXPECT_EQ(c.name, only); }
          }
          // Streaming the same text in small pieces gives the same reply.
          ReplyStreamer s(syn);
          std::string content;
          std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
          auto take = [&](const std::vector<Json>& ds) {
            for (const Json& d : ds) {
              if (d.contains("content")) content += d["content"].get<std::string>();
              if (!d.contains("tool_calls")) continue;
              const Json& tc = d["tool_calls"][0];
              if (tc.contains("id")) calls.emplace_back(tc["function"]["name"], "");
              else calls.back().second += tc["function"]["arguments"].get<std::string>();
            }
          };
          for (size_t i = 0; i < text.size();) {
            const size_t n = 1 + rng() % 5;
            take(s.push(text.substr(i, n)));
            i += n;
          }
          take(s.finish());
          EXPECT_EQ(content, r.content);
          ASSERT_EQ(calls.size(), r.calls.size()) << text;
          for (size_t i = 0; i < calls.size(); ++i) {
            EXPECT_EQ(calls[i].first, r.calls[i].name);
            EXPECT_EQ(calls[i].second, r.calls[i].arguments);
          }
          if (!parallel || f == ToolFormat::llama3_json || f == ToolFormat::harmony) { EXPECT_EQ(r.calls.size(), 1u); }
        }
      }
    }
  }
}

TEST(ToolCalls, TextAroundCallsAndUnfinishedCallsStayContent) {
  ReplySyntax syn;
  syn.tools = ToolFormat::hermes;
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  ParsedReply r = parse_reply(syn, "Let me look.\n" + call, false);
  EXPECT_EQ(r.content, "Let me look.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"a\":1}");
  // A call cut off by max_tokens is not a call: its text is the content.
  r = parse_reply(syn, "<tool_call>\n{\"name\": \"f\", \"argu", false);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "<tool_call>\n{\"name\": \"f\", \"argu");
  // While streaming, a marker's first bytes are held back, then released when not a marker.
  EXPECT_EQ(parse_reply(syn, "Hi <tool_", true).content, "Hi");
  EXPECT_EQ(parse_reply(syn, "Hi <tool_x", true).content, "Hi <tool_x");
  // tool_choice none: no parsing.
  syn.tools = ToolFormat::none;
  EXPECT_EQ(parse_reply(syn, call, false).content, call);
}

TEST(ToolCalls, HarmonyChannelsAsTheSpecWritesThem) {
  // openai/harmony: analysis = chain of thought, commentary to=functions.X = a call,
  // final = the answer; <|call|> and <|return|> end generation (so never in the text).
  ReplySyntax syn;
  syn.tools = ToolFormat::harmony;
  syn.reasoning = detect_reasoning("", ToolFormat::harmony);
  ParsedReply r = parse_reply(syn,
                              "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                              "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
                              false);
  EXPECT_EQ(r.reasoning, "Need weather.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(r.calls[0].arguments), Json({{"city", "Paris"}}));
  r = parse_reply(syn, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>4", false);
  EXPECT_EQ(r.reasoning, "Easy.");
  EXPECT_EQ(r.content, "4");
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCalls, ToolChoiceValidationAndThinkingPrefix) {
  const Json tools = fixture_tools();
  auto options = [&](Json body) { return parse_chat_options(body, tools, ReasoningFormat::auto_); };
  EXPECT_EQ(options({{"tool_choice", "required"}}).tool_choice, ToolChoice::required);
  EXPECT_EQ(options({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}).function,
            "get_weather");
  EXPECT_THROW(options({{"tool_choice", "sometimes"}}), ApiError);
  EXPECT_THROW(parse_chat_options({{"tool_choice", "required"}}, Json(), ReasoningFormat::auto_), ApiError);
  EXPECT_THROW(options({{"chat_template_kwargs", 3}}), ApiError);
  EXPECT_THROW(tool_call_gbnf(ToolFormat::hermes, tools, "no_such_tool", false), ApiError);
  // A prompt that ends inside a thinking block: the forced call closes it first, and the
  // parser, starting in reasoning, reads the call after it.
  TemplateDialect d{ToolFormat::hermes, {"<think>", "</think>"}};
  ChatOptions o = options({{"tool_choice", "required"}});
  const ReplySyntax syn = reply_syntax(d, o, tools, "<|im_start|>assistant\n<think>\n");
  EXPECT_TRUE(syn.starts_in_reasoning);
  const auto g = forced_call_grammar(syn, o, tools, false);
  std::mt19937 rng(3);
  const std::string text = random_sentence(ws::grammar::Matcher(g), rng);
  ASSERT_TRUE(text.starts_with("</think>")) << text;
  EXPECT_EQ(parse_reply(syn, text, false).calls.size(), 1u);
  EXPECT_THROW(forced_call_grammar(syn, o, tools, true), ApiError);  // with response_format
}

// The OpenAI wire shape (content null beside tool_calls, arguments as JSON text) renders
// with every fixture template and with a model's own ChatML template, which raised on it
// (a 500) where the template cannot take it as sent.
TEST(ToolCalls, WireShapeHistoryRendersWithEveryTemplate) {
  // The smallest fixture model with a chat template of its own.
  fs::path model;
  uintmax_t best = UINTMAX_MAX;
  for (const auto& e : fs::directory_iterator(kTemplates.parent_path() / "models")) {
    if (e.path().extension() != ".gguf" || e.file_size() >= best) continue;
    if (ws::gguf::File::open(e.path().string()).get_string("tokenizer.chat_template").empty()) continue;
    model = e.path(), best = e.file_size();
  }
  const auto file = ws::gguf::File::open(model.string());
  const auto tok = ws::Tokenizer::from_gguf(file);
  // The conversation whose tool-call turn has content null.
  const Json* wire = nullptr;
  for (const Json& c : conversations())
    if (const size_t k = first_with(c, "tool_calls"); k != std::string::npos && c["messages"][k]["content"].is_null())
      wire = &c;
  ASSERT_NE(wire, nullptr);
  const Json& conv = *wire;
  std::vector<std::string> sources = {file.get_string("tokenizer.chat_template")};
  for (const Json& t : load(kTemplates / "manifest.json")["templates"])
    sources.push_back(slurp(kTemplates / t["file"].get<std::string>()));
  for (const std::string& src : sources) {
    const ChatFormatter chat(src, *tok);
    EXPECT_NO_THROW({
      const auto r = chat.render(conv["messages"], conv["tools"]);
      // The whole conversation is there: its last message's text ends the render.
      EXPECT_NE(r.text.find(conv["messages"].back()["content"].get<std::string>()), std::string::npos);
    }) << src.substr(0, 120);
  }
}

}  // namespace
