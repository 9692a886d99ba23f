// llama-server's native POST /completion and POST /infill on `warmstart serve`, each
// behaviour checked against an outside truth: /v1/completions' text, /tokenize's ids, the
// prefix cache's reuse counts, non-streamed content, and llama-server's format_infill
// layout rebuilt here from /tokenize.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "server_client.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ws::test;

class NativeApiTest : public SharedServerTest<NativeApiTest> {};

json post(int port, const std::string& path, const json& body, int want = 200) {
  const HttpResult r = curl(port, path, body.dump());
  EXPECT_EQ(r.status, want) << path << " " << body.dump() << " -> " << r.body;
  return r.j();
}

std::vector<int> tokenize(int port, const std::string& text, bool add_special, bool parse_special = true) {
  const json r = post(port, "/tokenize", {{"content", text}, {"add_special", add_special}, {"parse_special", parse_special}});
  return r["tokens"].get<std::vector<int>>();
}

json greedy(json body) {
  body["temperature"] = 0;
  return body;
}

TEST_F(NativeApiTest, GreedyContentEqualsV1CompletionsText) {
  const std::string prompt = "The quick brown fox";
  const json native = post(port(), "/completion", greedy({{"prompt", prompt}, {"n_predict", 12}}));
  const json oai = post(port(), "/v1/completions", greedy({{"prompt", prompt}, {"max_tokens", 12}}));
  EXPECT_EQ(native["content"], oai["choices"][0]["text"]);
  // llama-server's response shape.
  EXPECT_EQ(native["stop"], true);
  EXPECT_EQ(native["tokens"], json::array());  // no return_tokens
  EXPECT_EQ(native["tokens_evaluated"], oai["usage"]["prompt_tokens"]);
  EXPECT_EQ(native["tokens_predicted"], oai["usage"]["completion_tokens"]);
  EXPECT_EQ(native["stop_type"], native["tokens_predicted"] == 12 ? "limit" : "eos");
  EXPECT_EQ(native["generation_settings"]["n_predict"], 12);
  EXPECT_EQ(native["generation_settings"]["temperature"], 0.0);
  EXPECT_EQ(native["has_new_line"], native["content"].get<std::string>().find('\n') != std::string::npos);
  EXPECT_EQ(native["truncated"], false);
  EXPECT_EQ(native["stopping_word"], "");
  EXPECT_TRUE(native["id_slot"].is_number_integer());
  EXPECT_TRUE(native["model"].is_string());
  for (const char* k : {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
                        "predicted_ms", "predicted_per_token_ms", "predicted_per_second"})
    EXPECT_TRUE(native["timings"].contains(k)) << k;
  EXPECT_EQ(native["timings"]["predicted_n"], native["tokens_predicted"]);
  EXPECT_FALSE(native.contains("completion_probabilities"));
}

TEST_F(NativeApiTest, TokenIdsPromptEqualsTextPrompt) {
  const std::string prompt = "A tale of two cities";
  const std::vector<int> ids = tokenize(port(), prompt, true);
  const json by_text = post(port(), "/completion", greedy({{"prompt", prompt}, {"n_predict", 8}}));
  const json by_ids = post(port(), "/completion", greedy({{"prompt", ids}, {"n_predict", 8}}));
  EXPECT_EQ(by_ids["content"], by_text["content"]);
  EXPECT_EQ(by_ids["tokens_evaluated"], int(ids.size()));
  EXPECT_EQ(by_text["tokens_evaluated"], int(ids.size()));
  // Mixed ids and strings: the string part is tokenized without BOS (it does not lead).
  const std::vector<int> tail = tokenize(port(), " and more", false);
  const json mixed = post(port(), "/completion", greedy({{"prompt", json::array({ids[0], ids[1], " and more"})}, {"n_predict", 1}}));
  EXPECT_EQ(mixed["tokens_evaluated"], int(2 + tail.size()));
}

TEST_F(NativeApiTest, ListOfPromptsGivesOneResultEach) {
  const std::string prompt = "Rain falls on";
  const std::vector<int> ids = tokenize(port(), prompt, true);
  const json r = post(port(), "/completion", greedy({{"prompt", json::array({ids, prompt})}, {"n_predict", 6}}));
  ASSERT_TRUE(r.is_array()) << r.dump();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["index"], 0);
  EXPECT_EQ(r[1]["index"], 1);
  EXPECT_EQ(r[0]["content"], r[1]["content"]);
  const json single = post(port(), "/completion", greedy({{"prompt", prompt}, {"n_predict", 6}}));
  EXPECT_EQ(r[0]["content"], single["content"]);
  // Streamed: each prompt's chunks carry its index, each ends with its own final result.
  const HttpResult st = curl(port(), "/completion",
                             greedy({{"prompt", json::array({ids, prompt})}, {"n_predict", 6}, {"stream", true}}).dump());
  bool done = false;
  std::string text[2];
  int finals = 0;
  for (const json& e : sse_events(st.body, &done)) {
    const int i = e["index"];
    text[i] += e["content"].get<std::string>();
    finals += e["stop"] == true;
  }
  EXPECT_EQ(finals, 2);
  EXPECT_EQ(text[0], r[0]["content"]);
  EXPECT_EQ(text[1], r[1]["content"]);
}

TEST_F(NativeApiTest, RepeatedPromptIsServedFromTheCache) {
  const std::string prompt = "Unique prompt for the reuse check: seven purple owls counted the stars twice";
  const json first = post(port(), "/completion", greedy({{"prompt", prompt}, {"n_predict", 4}}));
  const int n = first["tokens_evaluated"];
  EXPECT_EQ(first["tokens_cached"], 0);
  EXPECT_EQ(first["timings"]["prompt_n"], n);
  const json again = post(port(), "/completion", greedy({{"prompt", prompt}, {"n_predict", 4}}));
  EXPECT_EQ(again["tokens_evaluated"], n);
  EXPECT_EQ(again["tokens_cached"], n);
  EXPECT_EQ(again["timings"]["prompt_n"], 0);
  EXPECT_EQ(again["content"], first["content"]);
  // cache_prompt: false is accepted; reuse never changes the answer, so warmstart still reuses.
  const json nocache = post(port(), "/completion", greedy({{"prompt", prompt}, {"n_predict", 4}, {"cache_prompt", false}}));
  EXPECT_EQ(nocache["content"], first["content"]);
  // The same engine path as /v1/completions: its prompt is /completion's cache hit.
  const std::string other = "Another unique prompt: the lighthouse keeper painted nine boats";
  const json oai = post(port(), "/v1/completions", greedy({{"prompt", other}, {"max_tokens", 2}}));
  const json native = post(port(), "/completion", greedy({{"prompt", other}, {"n_predict", 2}}));
  EXPECT_EQ(native["tokens_cached"], oai["usage"]["prompt_tokens"]);
}

TEST_F(NativeApiTest, NPredictLimitsTheReply) {
  const json r = post(port(), "/completion",
                      greedy({{"prompt", "Count with me:"}, {"n_predict", 3}, {"ignore_eos", true}, {"return_tokens", true}}));
  EXPECT_EQ(r["tokens_predicted"], 3);
  EXPECT_EQ(r["stop_type"], "limit");
  EXPECT_EQ(r["truncated"], false);
  ASSERT_EQ(r["tokens"].size(), 3u);
  for (const json& t : r["tokens"]) EXPECT_TRUE(t.is_number_integer());
  // max_tokens is n_predict's other name; n_predict wins when both are set.
  EXPECT_EQ(post(port(), "/completion", greedy({{"prompt", "Count:"}, {"max_tokens", 2}, {"ignore_eos", true}}))["tokens_predicted"], 2);
  EXPECT_EQ(post(port(), "/completion",
                 greedy({{"prompt", "Count:"}, {"max_tokens", 2}, {"n_predict", 1}, {"ignore_eos", true}}))["tokens_predicted"], 1);
  // 0: the prompt is evaluated (into the cache), nothing is generated.
  const json zero = post(port(), "/completion", greedy({{"prompt", "Only the prompt, please"}, {"n_predict", 0}}));
  EXPECT_EQ(zero["tokens_predicted"], 0);
  EXPECT_EQ(zero["content"], "");
  EXPECT_EQ(post(port(), "/completion", greedy({{"prompt", "Only the prompt, please"}, {"n_predict", 1}}))["tokens_cached"],
            zero["tokens_evaluated"]);
}

TEST_F(NativeApiTest, ResponseFieldsSelectAndLiftFields) {
  const json full = post(port(), "/completion", greedy({{"prompt", "Pick fields"}, {"n_predict", 3}}));
  const json r = post(port(), "/completion",
                      greedy({{"prompt", "Pick fields"}, {"n_predict", 3},
                              {"response_fields", {"content", "generation_settings/n_predict", "no_such/field"}}}));
  EXPECT_EQ(r, json({{"content", full["content"]}, {"generation_settings/n_predict", 3}}));
}

TEST_F(NativeApiTest, StopWordEndsTheTextAndIsReported) {
  const json base = post(port(), "/completion", greedy({{"prompt", "Tell me a story:"}, {"n_predict", 24}, {"ignore_eos", true}}));
  const std::string text = base["content"];
  ASSERT_GE(text.size(), 8u) << base.dump();
  // Two ASCII characters from the middle (a cut inside a UTF-8 character is no stop string).
  size_t at = text.size() / 2;
  while (at + 2 < text.size() && ((text[at] & 0x80) || (text[at + 1] & 0x80))) ++at;
  ASSERT_LT(at + 2, text.size()) << text;
  const std::string word = text.substr(at, 2);
  const json r = post(port(), "/completion",
                      greedy({{"prompt", "Tell me a story:"}, {"n_predict", 24}, {"ignore_eos", true}, {"stop", {word, "\x01never"}}}));
  EXPECT_EQ(r["stop_type"], "word");
  EXPECT_EQ(r["stopping_word"], word);
  EXPECT_EQ(r["content"], text.substr(0, text.find(word)));
}

TEST_F(NativeApiTest, StreamedChunksConcatenateToTheContent) {
  const json body = greedy({{"prompt", "Once there was a river"}, {"n_predict", 10}, {"ignore_eos", true}});
  const json whole = post(port(), "/completion", body);
  json sbody = body;
  sbody["stream"] = true;
  sbody["n_probs"] = 2;
  const HttpResult r = curl(port(), "/completion", sbody.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  const std::vector<json> events = sse_events(r.body, &done);
  EXPECT_FALSE(done) << "llama-server's /completion stream has no [DONE]";
  ASSERT_GE(events.size(), 2u);
  std::string content;
  size_t n_tokens = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["stop"], false);
    EXPECT_FALSE(events[i]["tokens"].empty());
    EXPECT_EQ(events[i]["completion_probabilities"].size(), events[i]["tokens"].size());
    n_tokens += events[i]["tokens"].size();
    content += events[i]["content"].get<std::string>();
  }
  const json& last = events.back();
  EXPECT_EQ(last["stop"], true);
  EXPECT_EQ(last["content"], "");
  EXPECT_EQ(last["stop_type"], "limit");
  EXPECT_EQ(last["tokens_predicted"], 10);
  EXPECT_TRUE(last.contains("timings") && last.contains("generation_settings"));
  EXPECT_EQ(content, whole["content"]);
  EXPECT_EQ(n_tokens, 10u);
}

TEST_F(NativeApiTest, NProbsReportEachTokenWithAlternatives) {
  const json r = post(port(), "/completion",
                      greedy({{"prompt", "Numbers:"}, {"n_predict", 4}, {"n_probs", 3}, {"ignore_eos", true}, {"return_tokens", true}}));
  ASSERT_EQ(r["completion_probabilities"].size(), 4u) << r.dump();
  for (size_t i = 0; i < 4; ++i) {
    const json& p = r["completion_probabilities"][i];
    EXPECT_EQ(p["id"], r["tokens"][i]);
    EXPECT_LE(p["logprob"].get<double>(), 0.0);
    EXPECT_TRUE(p["bytes"].is_array() && p["token"].is_string());
    ASSERT_EQ(p["top_logprobs"].size(), 3u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(p["top_logprobs"][0]["id"], p["id"]);
    EXPECT_DOUBLE_EQ(p["top_logprobs"][0]["logprob"].get<double>(), p["logprob"].get<double>());
  }
}

TEST_F(NativeApiTest, WrongTypesAre400NamingTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"prompt", 5}}, "prompt"},
      {json::object(), "prompt"},
      {{{"prompt", json::array({json::array({1, json::object()})})}}, "prompt[0]"},
      {{{"prompt", json::array({99999999})}}, "prompt"},
      {{{"prompt", "x"}, {"n_predict", "many"}}, "n_predict"},
      {{{"prompt", "x"}, {"n_predict", -2}}, "n_predict"},
      {{{"prompt", "x"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "x"}, {"n_probs", -1}}, "n_probs"},
      {{{"prompt", "x"}, {"cache_prompt", "yes"}}, "cache_prompt"},
      {{{"prompt", "x"}, {"stop", 3}}, "stop"},
      {{{"prompt", "x"}, {"id_slot", 99}}, "id_slot"},
      {{{"prompt", "x"}, {"ignore_eos", 1}}, "ignore_eos"},
  };
  for (const auto& [body, param] : cases) {
    const json r = post(port(), "/completion", body, 400);
    EXPECT_EQ(r["error"]["param"], param) << body.dump() << " -> " << r.dump();
  }
  // Unknown fields are ignored, as llama-server does.
  post(port(), "/completion", {{"prompt", "x"}, {"n_predict", 1}, {"__verbose", true}, {"no_such_field", {1, 2}}});
}

TEST_F(NativeApiTest, InfillWithoutFimTokensIsRefusedAsLlamaServerDoes) {
  const HttpResult r = curl(port(), "/infill", json({{"input_prefix", "a"}, {"input_suffix", "b"}}).dump());
  EXPECT_EQ(r.status, 501) << r.body;
  EXPECT_EQ(r.j()["error"]["message"],
            "Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token "
            "is missing. ");
}

// A copy of `src` with the FIM keys set (ids of ordinary tokens: they tokenize as usual);
// rep/sep < 0: those keys are left out.
void write_fim_copy(const fs::path& src_path, const fs::path& out, int pre, int suf, int mid, int rep, int sep) {
  const auto src = ws::gguf::File::open(src_path.string());
  ws::gguf::Writer w;
  w.copy_metadata(src);
  w.set_u32("tokenizer.ggml.fim_pre_token_id", uint32_t(pre));
  w.set_u32("tokenizer.ggml.fim_suf_token_id", uint32_t(suf));
  w.set_u32("tokenizer.ggml.fim_mid_token_id", uint32_t(mid));
  if (rep >= 0) w.set_u32("tokenizer.ggml.fim_rep_token_id", uint32_t(rep));
  if (sep >= 0) w.set_u32("tokenizer.ggml.fim_sep_token_id", uint32_t(sep));
  for (const auto& t : src.tensors()) w.add_tensor(t.name, t.ne, t.type);
  w.open(out.string());
  for (const auto& t : src.tensors()) w.write_tensor({t.data, size_t(t.nbytes)});
  w.finish();
}

// /infill on a FIM copy of the fixture: its prompt is llama-server's format_infill layout,
// rebuilt here from /tokenize, and the same ids as a /completion prompt are a full cache hit
// (only an exact token match is) with the same greedy text.
void check_infill_prompt(bool repo_level) {
  const fs::path dir = fs::temp_directory_path() / ("ws-native-fim-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path model = dir / (repo_level ? "fim-repo.gguf" : "fim.gguf");
  constexpr int kPre = 200, kSuf = 201, kMid = 202, kRep = 203, kSep = 204;
  write_fim_copy(hybrid_model(), model, kPre, kSuf, kMid, repo_level ? kRep : -1, repo_level ? kSep : -1);
  {
    ServerProcess srv({"-t", "2", "-c", "4096", "--cache-budget-mb", "64"}, model);
    ASSERT_GT(srv.port(), 0) << srv.log();
    const int port = srv.port();
    const std::string prefix = "def add(a, b):\n    ", suffix = "\n\nprint(add(1, 2))", prompt = "return";
    const json body = greedy({{"input_prefix", prefix}, {"input_suffix", suffix}, {"prompt", prompt},
                              {"input_extra", {{{"filename", "util.py"}, {"text", "x = 1"}}}}, {"n_predict", 6}});
    const json r = post(port, "/infill", body);
    std::vector<int> want;
    auto add = [&](const std::vector<int>& v) { want.insert(want.end(), v.begin(), v.end()); };
    auto plain = [&](const std::string& text) { return tokenize(port, text, false, false); };
    if (repo_level) {  // FIM_REP project, FIM_SEP before each file and before the current one
      want.push_back(kRep);
      add(plain("myproject\n"));
      want.push_back(kSep);
      add(plain("util.py\n"));
      add(plain("x = 1"));
      want.push_back(kSep);
      add(plain("filename\n"));
    } else {  // snippets
      add(plain("\n\n--- snippet ---\n\n"));
      add(plain("x = 1"));
    }
    add(tokenize(port, "", true));  // BOS where the model adds one (none of the fixtures does)
    // PRE prefix prompt SUF suffix MID: the prompt follows the prefix in llama-server's code.
    want.push_back(kPre);
    add(plain(prefix));
    add(tokenize(port, prompt, false, true));
    want.push_back(kSuf);
    add(plain(suffix));
    want.push_back(kMid);
    EXPECT_EQ(r["tokens_evaluated"], int(want.size())) << r.dump();
    const json same = post(port, "/completion", greedy({{"prompt", want}, {"n_predict", 6}}));
    EXPECT_EQ(same["tokens_cached"], int(want.size()));
    EXPECT_EQ(same["content"], r["content"]);
    // The endpoint's own checks, with llama-server's field names.
    EXPECT_EQ(post(port, "/infill", {{"input_suffix", "b"}}, 400)["error"]["param"], "input_prefix");
    EXPECT_EQ(post(port, "/infill", {{"input_prefix", "a"}, {"input_suffix", "b"}, {"prompt", 3}}, 400)["error"]["param"],
              "prompt");
    EXPECT_EQ(post(port, "/infill", {{"input_prefix", "a"}, {"input_suffix", "b"}, {"input_extra", {{{"text", 1}}}}},
                   400)["error"]["param"], "input_extra[0].text");
  }
  std::error_code ec;
  fs::remove(model, ec);
  fs::remove(dir, ec);  // the other FIM test may still hold it
}

TEST(NativeInfill, BuildsLlamaServersFimPrompt) { check_infill_prompt(false); }
TEST(NativeInfill, BuildsTheRepoLevelPatternWithRepAndSepTokens) { check_infill_prompt(true); }

TEST(NativeDefaults, ServerNPredictIsTheDefaultLength) {
  ServerProcess srv({"-t", "2", "-c", "1024", "--n-predict", "5"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const json r = post(srv.port(), "/completion", greedy({{"prompt", "Go on:"}, {"ignore_eos", true}}));
  EXPECT_EQ(r["tokens_predicted"], 5);
  EXPECT_EQ(r["generation_settings"]["n_predict"], 5);
  EXPECT_EQ(post(srv.port(), "/completion", greedy({{"prompt", "Go on:"}, {"ignore_eos", true}, {"n_predict", 2}}))["tokens_predicted"], 2);
}

}  // namespace
