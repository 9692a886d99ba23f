// The one chat-prompt entry point (chat/chat_prompt.h): the CLI's conversation
// (cli/chat_history.h) and the server's ChatFormatter render the same bytes and message
// ends for the same messages, on every fixture template; and the parts PromptRenderer adds
// to render_chat (double-BOS removal, the normalised retry, tools, ChatML) behave.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "chat/chat_prompt.h"
#include "cli/chat_history.h"
#include "gguf/gguf.h"
#include "server/api_error.h"
#include "server/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using ws::chat::PromptRenderer;
using ws::chat::SpecialTexts;

namespace {

const fs::path kFixtures = fs::path(WS_SHARED_DIR) / "fixtures";
const fs::path kTemplates = kFixtures / "templates";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in) << p;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "" (ChatML) and every fixture template.
std::vector<std::pair<std::string, std::string>> template_sources() {
  std::vector<std::pair<std::string, std::string>> out = {{"ChatML", ""}};
  const Json manifest = Json::parse(slurp(kTemplates / "manifest.json"));
  for (const Json& t : manifest["templates"]) {
    const std::string file = t["file"].get<std::string>();
    out.emplace_back(file, slurp(kTemplates / file));
  }
  return out;
}

// The conversations a terminal chat can hold: role and string content only, the system
// message (not empty: `--system ""` means none) first if any, then user and assistant.
std::vector<Json> cli_conversations() {
  std::vector<Json> out;
  const Json all = Json::parse(slurp(kTemplates / "conversations.json"));
  for (const Json& c : all["conversations"]) {
    if (c.contains("tools")) continue;
    bool ok = true;
    for (size_t i = 0; i < c["messages"].size(); ++i) {
      const Json& m = c["messages"][i];
      const std::string role = m.value("role", "");
      ok = ok && m.size() == 2 && m.contains("content") && m["content"].is_string() &&
           (role == "user" || role == "assistant" || (role == "system" && i == 0 && m["content"] != ""));
    }
    if (ok) out.push_back(c);
  }
  return out;
}

// One tokenizer per distinct set of special texts among the fixture models and llama.cpp
// vocabularies (add_bos on and off, various BOS texts).
std::vector<std::unique_ptr<ws::Tokenizer>> tokenizers() {
  std::vector<fs::path> models;
  for (const char* dir : {"models", "vocab"})
    for (const auto& e : fs::directory_iterator(kFixtures / dir))
      if (e.path().extension() == ".gguf" && !e.path().filename().string().starts_with("mmproj"))
        models.push_back(e.path());
  std::sort(models.begin(), models.end());
  std::vector<std::unique_ptr<ws::Tokenizer>> out;
  std::set<std::tuple<std::string, std::string, bool>> seen;
  for (const fs::path& p : models) {
    std::unique_ptr<ws::Tokenizer> tok;
    try {
      tok = ws::Tokenizer::from_gguf(ws::gguf::File::open(p.string()));
    } catch (const std::exception&) {
      continue;  // a tokenizer model warmstart does not support (BERT, ...)
    }
    const SpecialTexts s = ws::server::chat_special_texts(*tok);
    if (seen.insert({s.bos, s.eos, s.add_bos}).second) out.push_back(std::move(tok));
  }
  return out;
}

// What the server renders, or the ApiError's message.
std::string server_render(const ws::server::ChatFormatter& f, const Json& messages, std::vector<size_t>& ends) {
  try {
    ws::chat::RenderedPrompt r = f.render(messages, Json());
    ends = r.message_ends;
    return r.text;
  } catch (const ws::server::ApiError& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(ChatPrompt, CliAndServerRenderTheSameBytes) {
  const auto convs = cli_conversations();
  ASSERT_GE(convs.size(), 8u);
  const auto sources = template_sources();
  const auto toks = tokenizers();
  ASSERT_GE(toks.size(), 3u);
  ASSERT_EQ(sources.size(), 17u);
  size_t compared = 0, bos_free = 0;
  for (const auto& tok : toks) {
    const SpecialTexts special = ws::server::chat_special_texts(*tok);
    for (const auto& [name, src] : sources) {
      const ws::server::ChatFormatter server(src, *tok);
      for (const Json& c : convs) {
        const Json& msgs = c["messages"];
        const bool has_system = msgs[0]["role"] == "system";
        // The CLI's path: the history `warmstart chat` keeps, rendered at each user turn.
        ws::cli::ChatHistory cli(src, *tok, has_system ? msgs[0]["content"].get<std::string>() : "");
        Json sent = Json::array();
        for (size_t i = 0; i < msgs.size(); ++i) {
          sent.push_back(msgs[i]);
          if (i == 0 && has_system) continue;
          cli.add(msgs[i]["role"].get<std::string>(), msgs[i]["content"].get<std::string>());
          if (msgs[i]["role"] != "user") continue;
          const std::string where = name + " / " + c["name"].get<std::string>() + " / message " + std::to_string(i);
          std::string cli_text;
          std::vector<size_t> cli_ends, server_ends;
          try {
            const ws::chat::RenderedPrompt r = cli.render();
            cli_text = r.text, cli_ends = r.message_ends;
          } catch (const ws::chat::TemplateError&) {
            cli_text = "error";
          }
          const std::string server_text = server_render(server, sent, server_ends);
          if (cli_text == "error") {
            EXPECT_TRUE(server_text.starts_with("error: ")) << where;
            continue;
          }
          EXPECT_EQ(cli_text, server_text) << where;
          EXPECT_EQ(cli_ends, server_ends) << where;
          ++compared;
          // With add_bos the tokenizer writes the BOS: the text never starts with it too.
          if (special.add_bos && !special.bos.empty()) {
            EXPECT_FALSE(cli_text.starts_with(special.bos)) << where;
            ++bos_free;
          }
        }
      }
    }
  }
  std::printf("compared %zu renderings, %zu with add_bos\n", compared, bos_free);
  EXPECT_GE(compared, 17u * 4 * 8);
  EXPECT_GT(bos_free, 0u) << "no tokenizer with add_bos: the double-BOS removal went untested here";
}

const char* kBosTemplate =
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}";

TEST(ChatPrompt, DropsTheTemplatesBosWhenTheTokenizerAddsOne) {
  const Json msgs = Json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "yo"}}});
  const auto with = PromptRenderer(kBosTemplate, SpecialTexts{"<s>", "</s>", true}).render(msgs);
  EXPECT_EQ(with.text, "[user]hi</s>[assistant]yo</s>[assistant]");
  EXPECT_EQ(with.message_ends, (std::vector<size_t>{12, 29}));
  const auto without = PromptRenderer(kBosTemplate, SpecialTexts{"<s>", "</s>", false}).render(msgs, Json(), {}, false);
  EXPECT_EQ(without.text, "<s>[user]hi</s>[assistant]yo</s>");
  EXPECT_EQ(without.message_ends, (std::vector<size_t>{15, 32}));
}

TEST(ChatPrompt, ToolsOnlyWhenThereAreSomeAndKwargsLast) {
  const PromptRenderer r("{% if tools is defined %}T{{ tools | length }}{% endif %}{{ flag }}{{ bos_token }}",
                         SpecialTexts{"B", "E", false});
  const Json msgs = Json::array();
  EXPECT_EQ(r.render(msgs, Json()).text, "B");
  EXPECT_EQ(r.render(msgs, Json::array()).text, "B");
  EXPECT_EQ(r.render(msgs, Json::array({{{"type", "function"}}})).text, "T1B");
  EXPECT_EQ(r.render(msgs, Json(), {{"flag", "F"}, {"bos_token", "K"}}).text, "FK");
}

TEST(ChatPrompt, RetriesWithNormalisedMessages) {
  // Iterates the arguments as an object and concatenates content: the OpenAI wire shape
  // (null content, arguments as JSON text) fails as sent and renders once normalised.
  const PromptRenderer r(
      "{% for m in messages %}{{ m.content + '|' }}{% for c in m.tool_calls or [] %}"
      "{% for k, v in c.function.arguments.items() %}{{ k }}={{ v }}{% endfor %}{% endfor %}{% endfor %}",
      SpecialTexts{});
  const Json msgs = Json::parse(R"([{"role":"user","content":"go"},
      {"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}])");
  EXPECT_EQ(r.render(msgs).text, "go||a=1");
  // The template's own raise_exception is final: no retry.
  const PromptRenderer raises("{{ raise_exception('no') }}", SpecialTexts{});
  try {
    raises.render(msgs);
    FAIL() << "expected a TemplateError";
  } catch (const ws::chat::TemplateError& e) {
    EXPECT_EQ(e.kind(), ws::chat::TemplateErrorKind::raised);
  }
}

TEST(ChatPrompt, ChatMLWithoutATemplate) {
  const PromptRenderer r("", SpecialTexts{"<s>", "</s>", true});
  EXPECT_FALSE(r.uses_model_template());
  const auto p = r.render(Json::array({{{"role", "user"}, {"content", "hi"}}}));
  EXPECT_EQ(p.text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(p.message_ends, (std::vector<size_t>{30}));
  EXPECT_THROW(r.render(Json::array({{{"content", "no role"}}})), std::invalid_argument);
}

}  // namespace
