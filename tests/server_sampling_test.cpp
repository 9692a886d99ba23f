// `warmstart serve` end to end, what a request asks of the sampler and the utility routes:
// logprobs against the model's own logits, n > 1, penalties and logit_bias, out-of-range
// fields, /tokenize and friends, llama-server's flag names, response_format and grammar.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "server_client.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using namespace ws::test;

class ServerSamplingTest : public SharedServerTest<ServerSamplingTest> {};

// ---- Issue 21: sampling fields (penalties, logit_bias, logprobs, seed, n > 1), the
// utility routes (/tokenize, /detokenize, /apply-template, /props), CORS, X-Api-Key and
// llama-server's flag names.

std::vector<int> tokenize(int port, const std::string& text) {
  const HttpResult r = curl(port, "/tokenize", json({{"content", text}, {"add_special", true}}).dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.j()["tokens"].get<std::vector<int>>();
}

// Log-softmax of the model's logits after `tokens`, from `warmstart logits` (the external
// truth: a separate process, a plain evaluation with no server, cache or sampler).
std::vector<double> reference_logprobs(const std::vector<int>& tokens) {
  const std::string out = (fs::temp_directory_path() / ("ws-lp-" + std::to_string(getpid()))).string();
  std::string list;
  for (int t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  const std::string cmd = std::string(WS_BINARY) + " logits -t 2 --kv-type f16 -m " + hybrid_model().string() + " --tokens " + list +
                          " --out " + out + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json head = json::parse(slurp(out + ".json"));
  const json& probe = head["probes"][0];
  const auto positions = probe["full_logits"]["positions"].get<std::vector<int>>();
  const size_t n_vocab = probe["full_logits"]["shape"][1];
  const std::string raw = slurp(out + ".logits.f32");
  fs::remove(out + ".json");
  fs::remove(out + ".logits.f32");
  const size_t row = size_t(std::find(positions.begin(), positions.end(), int(tokens.size()) - 1) - positions.begin());
  EXPECT_LT(row, positions.size());
  std::vector<float> l(n_vocab);
  std::memcpy(l.data(), raw.data() + row * n_vocab * sizeof(float), n_vocab * sizeof(float));
  double m = -INFINITY, total = 0;
  for (float x : l) m = std::max(m, double(x));
  for (float x : l) total += std::exp(double(x) - m);
  std::vector<double> lp(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) lp[i] = double(l[i]) - m - std::log(total);
  return lp;
}

TEST_F(ServerSamplingTest, LogprobsAreLogSoftmaxOfTheModelsLogits) {
  const std::string prompt = "The capital of France is";
  const std::vector<int> toks = tokenize(port(), prompt);
  const std::vector<double> ref = reference_logprobs(toks);
  ASSERT_FALSE(ref.empty());
  std::vector<int> order(ref.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) { return ref[size_t(a)] > ref[size_t(b)]; });

  const json body = {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 5}};
  const HttpResult r = curl(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = r.j()["choices"][0]["logprobs"];
  ASSERT_GE(lp["tokens"].size(), 1u) << r.body;
  // The greedy token is the reference argmax, with the reference log-probability.
  const std::string piece0 = curl(port(), "/detokenize", json({{"tokens", {order[0]}}}).dump()).j()["content"];
  EXPECT_EQ(lp["tokens"][0], piece0);
  EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), ref[size_t(order[0])], 1e-4);
  const json top = lp["top_logprobs"][0];
  EXPECT_EQ(top.size(), 5u);
  double sum = 0;
  for (int k = 0; k < 5; ++k) {
    const std::string piece = curl(port(), "/detokenize", json({{"tokens", {order[size_t(k)]}}}).dump()).j()["content"];
    if (top.contains(piece)) { EXPECT_NEAR(top[piece].get<double>(), ref[size_t(order[size_t(k)])], 1e-4) << piece; }
    sum += std::exp(ref[size_t(order[size_t(k)])]);
  }
  EXPECT_LE(sum, 1.0 + 1e-6);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());

  // Chat: OpenAI's content list, the same streamed, the pieces spelling the reply.
  json cb = chat_body({{{"role", "user"}, {"content", "Name a colour."}}}, 6);
  cb["logprobs"] = true, cb["top_logprobs"] = 3;
  const HttpResult c = curl(port(), "/v1/chat/completions", cb.dump());
  ASSERT_EQ(c.status, 200) << c.body;
  const json content = c.j()["choices"][0]["logprobs"]["content"];
  ASSERT_GE(content.size(), 1u) << c.body;
  std::string spelled;
  for (const json& e : content) {
    spelled += e["token"].get<std::string>();
    std::string from_bytes;
    for (int b : e["bytes"]) from_bytes += char(b);
    EXPECT_EQ(from_bytes, e["token"].get<std::string>());
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]) << "greedy: the chosen token is the most likely";
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
  }
  EXPECT_EQ(spelled, c.j()["choices"][0]["message"]["content"]);
  cb["stream"] = true;
  bool done = false;
  json streamed = json::array();
  for (const json& e : sse_events(curl(port(), "/v1/chat/completions", cb.dump()).body, &done))
    if (!e["choices"].empty() && e["choices"][0]["logprobs"].is_object())
      for (const json& x : e["choices"][0]["logprobs"]["content"]) streamed.push_back(x);
  EXPECT_TRUE(done);
  EXPECT_EQ(streamed, content);
}

TEST_F(ServerSamplingTest, NTwoComputesThePromptOnceAndInterleavesStreams) {
  std::string long_text = "Please read this carefully before answering:";
  for (int i = 0; i < 12; ++i) long_text += " item " + std::to_string(i * 7919 % 1000) + ",";
  json body = chat_body({{{"role", "user"}, {"content", long_text}}}, 6);
  body["n"] = 2;
  const double before = metric(curl(port(), "/metrics").body, "warmstart_computed_tokens_total");
  const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const double after = metric(curl(port(), "/metrics").body, "warmstart_computed_tokens_total");
  const json j = r.j();
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][0]["message"], j["choices"][1]["message"]) << "temperature 0: the forks must agree";
  const int prompt = j["usage"]["prompt_tokens"], cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
  const int completion = j["usage"]["completion_tokens"];
  EXPECT_EQ(j["timings"]["prompt_n"], prompt - cached);
  ASSERT_GT(prompt - cached, completion) << "the prompt must outweigh the replies for the count below to tell";
  // Computed: the prompt once, plus the tokens each reply fed back (at most its own).
  EXPECT_GE(after - before, prompt - cached);
  EXPECT_LE(after - before, prompt - cached + completion) << "the prompt was computed more than once";
  // The n=1 answer is the same text.
  body["n"] = 1;
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).j()["choices"][0]["message"], j["choices"][0]["message"]);

  body["n"] = 2, body["stream"] = true, body["stream_options"] = {{"include_usage", true}};
  bool done = false;
  std::map<int, std::string> text;
  std::map<int, std::string> finish;
  std::vector<int> order;
  for (const json& e : sse_events(curl(port(), "/v1/chat/completions", body.dump()).body, &done)) {
    for (const json& ch : e["choices"]) {
      const int i = ch["index"];
      if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
        text[i] += delta_text(ch), order.push_back(i);
      if (!ch["finish_reason"].is_null()) finish[i] = ch["finish_reason"];
    }
    if (e.contains("usage") && e["usage"].is_object()) { EXPECT_EQ(e["usage"]["completion_tokens"], completion); }
  }
  EXPECT_TRUE(done);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(text[0], j["choices"][0]["message"]["content"]);
  EXPECT_EQ(text[1], j["choices"][1]["message"]["content"]);
  EXPECT_EQ(finish.size(), 2u);
  // Interleaved: some chunk of choice 1 comes before the last chunk of choice 0.
  if (j["choices"][0]["message"]["content"].get<std::string>().size() > 1) {
    const auto first1 = std::find(order.begin(), order.end(), 1);
    const auto last0 = std::find(order.rbegin(), order.rend(), 0).base();
    EXPECT_LT(first1 - order.begin(), last0 - order.begin());
  }

  // Sampled: a seed reproduces both replies; the two replies draw from different streams.
  json sb = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1.5}, {"top_k", 0}, {"top_p", 1},
             {"min_p", 0}, {"n", 2}, {"seed", 42}};
  const json s1 = curl(port(), "/v1/completions", sb.dump()).j(), s2 = curl(port(), "/v1/completions", sb.dump()).j();
  ASSERT_EQ(s1["choices"].size(), 2u) << s1.dump();
  EXPECT_EQ(s1["choices"], s2["choices"]);
  EXPECT_NE(s1["choices"][0]["text"], s1["choices"][1]["text"]) << "two replies from one seed stream";
  sb["seed"] = 43;
  EXPECT_NE(curl(port(), "/v1/completions", sb.dump()).j()["choices"], s1["choices"]);
}

// First-step candidates (piece, logprob) of a greedy completion, most likely first.
std::vector<std::pair<std::string, double>> first_step(int port, json body) {
  body["logprobs"] = 20, body["max_tokens"] = 1, body["temperature"] = 0;
  const HttpResult r = curl(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  std::vector<std::pair<std::string, double>> out;
  const json top = r.j()["choices"][0]["logprobs"]["top_logprobs"][0];
  for (const auto& [k, v] : top.items()) out.emplace_back(k, v.get<double>());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string first_token(int port, json body) {
  body["logprobs"] = 0, body["max_tokens"] = 1, body["temperature"] = 0;
  const HttpResult r = curl(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.j()["choices"][0]["logprobs"]["tokens"][0];
}

TEST_F(ServerSamplingTest, PenaltiesAndLogitBiasMoveTheGreedyChoiceAsDefined) {
  // " one" 29 times in the prompt: in the penalty window (llama-server's rule: the last 64
  // tokens accepted, prompt included).
  std::string prompt = "one";
  for (int i = 0; i < 29; ++i) prompt += " one";
  const json base = {{"prompt", prompt}};
  const std::vector<int> one = curl(port(), "/tokenize", json({{"content", " one"}}).dump()).j()["tokens"];
  ASSERT_EQ(one.size(), 1u);
  const std::vector<int> toks = tokenize(port(), prompt);
  const int count = int(std::count(toks.end() - std::min<ptrdiff_t>(64, ptrdiff_t(toks.size())), toks.end(), one[0]));
  ASSERT_GE(count, 20);
  const auto cands = first_step(port(), base);
  ASSERT_EQ(cands.size(), 20u);
  ASSERT_NE(cands[0].first, " one") << "the crafted case needs another greedy token";
  // The raw logprob of " one" (logprobs ignore the bias that makes it the reply).
  json lifted = base;
  lifted["logit_bias"] = {{std::to_string(one[0]), 100}};
  lifted["logprobs"] = 0, lifted["max_tokens"] = 1, lifted["temperature"] = 0;
  const json lj = curl(port(), "/v1/completions", lifted.dump()).j();
  ASSERT_EQ(lj["choices"][0]["logprobs"]["tokens"][0], " one") << lj.dump();
  const double gap = cands[0].second - lj["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
  ASSERT_GT(gap, 0);
  ASSERT_LT(gap + count + 1, 100);
  auto first = [&](double bias, double presence, double frequency) {
    json b = base;
    b["logit_bias"] = {{std::to_string(one[0]), bias}};
    b["presence_penalty"] = presence, b["frequency_penalty"] = frequency;
    // Logprobs are of the raw logits: neither bias nor penalties move them.
    EXPECT_EQ(first_step(port(), b), cands);
    return first_token(port(), b);
  };
  // The bias lifts " one" 0.5 above the greedy token; the penalty takes back count * f
  // (frequency) or p once (presence), as llama.cpp's penalties sampler defines them.
  EXPECT_EQ(first(gap + 0.5 + count * 1.0, 0, 1.0), " one");
  EXPECT_EQ(first(gap + 0.5 + count * 1.0, 0, 1.0 + 1.0 / count), cands[0].first);
  EXPECT_EQ(first(gap + 0.5 + 1.0, 1.0, 0), " one");
  EXPECT_EQ(first(gap + 0.5 + 1.0, 1.6, 0), cands[0].first);
  EXPECT_EQ(first(gap - 0.5, 0, 0), cands[0].first);
  // Negative values reward repetition: count * 2 nats lift " one" past the gap.
  if (gap < 2.0 * count) { EXPECT_EQ(first(0, 0, -2), " one"); }
  // -100 bans the greedy token: the runner-up wins. llama-server's [[id, bias]] form too.
  const std::vector<int> top = curl(port(), "/tokenize", json({{"content", cands[0].first}}).dump()).j()["tokens"];
  if (top.size() == 1) {
    json b = base;
    b["logit_bias"] = {{std::to_string(top[0]), -100}};
    EXPECT_EQ(first_token(port(), b), cands[1].first);
    b["logit_bias"] = json::array({json::array({top[0], false})});
    EXPECT_EQ(first_token(port(), b), cands[1].first);
  }
}

TEST_F(ServerSamplingTest, SamplingFieldsOutOfRangeAre400NamingThem) {
  const json ok = chat_body({{{"role", "user"}, {"content", "hi"}}}, 2);
  auto expect_param = [&](const char* path, json body, const std::string& param) {
    const HttpResult r = curl(port(), path, body.dump());
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    EXPECT_EQ(r.j()["error"]["param"], param) << r.body;
  };
  for (const auto& [k, v] : std::vector<std::pair<std::string, json>>{{"repeat_penalty", 0},
                                                                       {"presence_penalty", 2.5},
                                                                       {"frequency_penalty", -3},
                                                                       {"logit_bias", {{"abc", 1}}},
                                                                       {"logit_bias", {{"1", 101}}},
                                                                       {"logit_bias", {{"99999999", 1}}},
                                                                       {"logit_bias", "x"},
                                                                       {"top_logprobs", 3},
                                                                       {"logprobs", 3},
                                                                       {"n", 17},
                                                                       {"seed", "x"}}) {
    json b = ok;
    b[k] = v;
    expect_param("/v1/chat/completions", b, k == "logit_bias" ? "logit_bias" : k);
  }
  json b = ok;
  b["logprobs"] = true, b["top_logprobs"] = 21;
  expect_param("/v1/chat/completions", b, "top_logprobs");
  const json text = {{"prompt", "hi"}, {"max_tokens", 2}};
  for (const auto& [k, v] : std::vector<std::pair<std::string, json>>{
           {"echo", true}, {"suffix", "x"}, {"best_of", 2}, {"logprobs", 21}, {"logprobs", true}}) {
    json t = text;
    t[k] = v;
    expect_param("/v1/completions", t, k);
  }
}

TEST_F(ServerSamplingTest, TokenizeDetokenizeApplyTemplateAndProps) {
  const std::string text = "Hello world, hello again.";
  const HttpResult t = curl(port(), "/tokenize", json({{"content", text}}).dump());
  ASSERT_EQ(t.status, 200) << t.body;
  const std::vector<int> ids = t.j()["tokens"];
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(curl(port(), "/detokenize", json({{"tokens", ids}}).dump()).j()["content"], text);
  const json pieces = curl(port(), "/tokenize", json({{"content", text}, {"with_pieces", true}}).dump()).j()["tokens"];
  ASSERT_EQ(pieces.size(), ids.size());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(pieces[i]["id"], ids[i]);
    joined += pieces[i]["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(curl(port(), "/tokenize", json({{"content", 5}}).dump()).status, 400);
  EXPECT_EQ(curl(port(), "/detokenize", json({{"tokens", {-1}}}).dump()).status, 400);

  // apply-template gives the exact prompt a chat request computes.
  const json msgs = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi there"}}};
  const HttpResult a = curl(port(), "/apply-template", json({{"messages", msgs}}).dump());
  ASSERT_EQ(a.status, 200) << a.body;
  const std::string rendered = a.j()["prompt"];
  EXPECT_NE(rendered.find("Hi there"), std::string::npos);
  const HttpResult c = curl(port(), "/v1/chat/completions", chat_body(msgs, 1).dump());
  EXPECT_EQ(int(tokenize(port(), rendered).size()), c.j()["usage"]["prompt_tokens"].get<int>());
  EXPECT_EQ(curl(port(), "/apply-template", json({{"messages", "x"}}).dump()).status, 400);

  const HttpResult p = curl(port(), "/props");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.j()["default_generation_settings"]["n_ctx"], 4096);
  EXPECT_EQ(p.j()["total_slots"], 2);
  EXPECT_EQ(p.j()["model_path"], hybrid_model().string());
  EXPECT_NE(p.j()["chat_template"].get<std::string>().find("im_start"), std::string::npos);
  EXPECT_TRUE(p.j()["build_info"].is_string());
}

TEST(ServerLlamaServerFlags, AliasesCorsAndXApiKey) {
  const fs::path tmpl = fs::temp_directory_path() / ("ws-flags-" + std::to_string(getpid()) + ".jinja");
  const std::string tmpl_text = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
  std::ofstream(tmpl) << tmpl_text;
  ServerProcess srv({"--ctx-size", "2048", "-np", "3", "--alias", "my-model", "--cache-ram", "32", "--threads", "2",
                     "--api-key", "k3y", "--cors-origin", "https://app.example", "--chat-template-file", tmpl.string()});
  fs::remove(tmpl);
  ASSERT_GT(srv.port(), 0) << srv.log();
  const HttpResult applied = curl(srv.port(), "/apply-template",
                                  json({{"messages", {{{"role", "user"}, {"content", "hey"}}}}}).dump(),
                                  "-H 'X-Api-Key: k3y'");
  EXPECT_EQ(applied.j()["prompt"], "[user] hey\n") << applied.body;
  const std::string hdr = (fs::temp_directory_path() / ("ws-hdr-" + std::to_string(getpid()))).string();
  const HttpResult pre = curl(srv.port(), "/v1/chat/completions", "",
                              "-X OPTIONS -D " + hdr + " -H 'Origin: https://app.example' "
                              "-H 'Access-Control-Request-Method: POST'");
  EXPECT_EQ(pre.status, 204);
  std::string h = slurp(hdr);
  EXPECT_NE(h.find("Access-Control-Allow-Origin: https://app.example"), std::string::npos) << h;
  EXPECT_NE(h.find("Access-Control-Allow-Headers:"), std::string::npos) << h;
  const HttpResult m = curl(srv.port(), "/v1/models", "", "-D " + hdr + " -H 'Origin: https://app.example'");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.j()["data"][0]["id"], "my-model");
  h = slurp(hdr);
  EXPECT_NE(h.find("Access-Control-Allow-Origin: https://app.example"), std::string::npos) << h;
  // The model list is public, as llama-server leaves it; the rest needs the key.
  EXPECT_EQ(curl(srv.port(), "/v1/models", "", "-H 'X-Api-Key: nope'").status, 200);
  EXPECT_EQ(curl(srv.port(), "/props", "", "-H 'X-Api-Key: nope'").status, 401);
  EXPECT_EQ(curl(srv.port(), "/props").status, 401);
  const json props = curl(srv.port(), "/props", "", "-H 'Authorization: Bearer k3y'").j();
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 2048);
  EXPECT_EQ(props["total_slots"], 3);
  EXPECT_EQ(props["chat_template"], tmpl_text);
  EXPECT_NE(srv.log().find("cache budget 32 MiB"), std::string::npos) << srv.log();
  fs::remove(hdr);
  // Without --cors-origin no CORS header is sent.
  ServerProcess plain({"-t", "1"});
  ASSERT_GT(plain.port(), 0);
  curl(plain.port(), "/health", "", "-D " + hdr);
  EXPECT_EQ(slurp(hdr).find("Access-Control"), std::string::npos);
  fs::remove(hdr);
}

// ---- Structured output (issue 21, item 2): response_format and grammar on a random-weight
// model. The schema check below is written independently of the converter.

// Whether `v` validates against `s` for the keywords these tests use.
bool validates(const json& v, const json& s, std::string& why) {
  auto no = [&](const std::string& w) {
    why = w + " in " + v.dump();
    return false;
  };
  if (s.contains("anyOf")) {
    for (const auto& alt : s["anyOf"])
      if (validates(v, alt, why)) return true;
    return no("no anyOf branch matches");
  }
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return no("not in enum");
  if (!s.contains("type")) return true;
  const std::string t = s["type"];
  if (t == "null") return v.is_null() || no("not null");
  if (t == "boolean") return v.is_boolean() || no("not a boolean");
  if (t == "integer") return v.is_number_integer() || no("not an integer");
  if (t == "number") return v.is_number() || no("not a number");
  if (t == "string") {
    if (!v.is_string()) return no("not a string");
    const std::string str = v;
    size_t n = 0;  // code points
    for (const unsigned char c : str) n += (c & 0xC0) != 0x80;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return no("too long");
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return no("too short");
    if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) return no("pattern");
    return true;
  }
  if (t == "array") {
    if (!v.is_array()) return no("not an array");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return no("too many items");
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return no("too few items");
    for (const auto& e : v)
      if (!validates(e, s["items"], why)) return false;
    return true;
  }
  if (!v.is_object()) return no("not an object");
  for (const auto& r : s.value("required", json::array()))
    if (!v.contains(r.get<std::string>())) return no("missing " + r.get<std::string>());
  for (const auto& [k, e] : v.items()) {
    if (!s["properties"].contains(k)) return no("extra key " + k);
    if (!validates(e, s["properties"][k], why)) return false;
  }
  return true;
}

TEST_F(ServerSamplingTest, JsonSchemaRepliesValidateForEverySeedAndTemperature) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer"},
      "color": {"enum": ["red", "green", "blue"]},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "maxItems": 3},
      "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2}$"},
      "ok": {"type": "boolean"},
      "where": {"type": "object", "properties": {"x": {"type": "number"}, "note": {"anyOf": [{"type": "null"},
                {"type": "string", "maxLength": 4}]}}, "required": ["x", "note"], "additionalProperties": false}
    },
    "required": ["name", "age", "color", "tags", "code", "where"],
    "additionalProperties": false
  })");
  const json msgs = {{{"role", "user"}, {"content", "Describe a person as JSON."}}};
  int n = 0;
  for (const double temp : {0.0, 0.8, 1.5})
    for (const int seed : {1, 2, 3}) {
      json body = chat_body(msgs, 600, seed == 3);
      body["temperature"] = temp;
      body["seed"] = seed;
      body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}, {"strict", true}}}};
      const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      std::string text, finish;
      if (seed == 3) {
        bool done = false;
        for (const auto& e : sse_events(r.body, &done)) {
          if (e["choices"].empty()) continue;
          text += delta_text(e["choices"][0]);
          if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
        }
        EXPECT_TRUE(done);
      } else {
        text = r.j()["choices"][0]["message"]["content"];
        finish = r.j()["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(finish, "stop") << "temperature " << temp << " seed " << seed << ": " << text;
      const json v = json::parse(text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << "temperature " << temp << " seed " << seed << ": not JSON: " << text;
      std::string why;
      EXPECT_TRUE(validates(v, schema, why)) << "temperature " << temp << " seed " << seed << ": " << why;
      ++n;
    }
  EXPECT_EQ(n, 9);
}

// Whether `text` is a prefix of some JSON text (the parser fails only at its end).
bool json_prefix(const std::string& text) {
  struct Sax : nlohmann::json_sax<json> {
    size_t at = std::string::npos;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception&) override {
      at = pos;
      return false;
    }
  } sax;
  json::sax_parse(text, &sax);
  return sax.at == std::string::npos || sax.at >= text.size();
}

TEST_F(ServerSamplingTest, JsonObjectRepliesAreObjects) {
  for (const int seed : {1, 2, 3, 4}) {
    json body = chat_body({{{"role", "user"}, {"content", "JSON please."}}}, 300);
    body["temperature"] = 1.0;
    body["seed"] = seed;
    body["response_format"] = {{"type", "json_object"}};
    const HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = r.j()["choices"][0]["message"]["content"];
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text[0], '{') << text;
    // An unbounded string may outlast max_tokens on a random model; then the text must
    // still be a prefix of an object.
    if (r.j()["choices"][0]["finish_reason"] == "stop") {
      const json v = json::parse(text, nullptr, false);
      EXPECT_TRUE(v.is_object()) << text;
    } else {
      EXPECT_TRUE(json_prefix(text)) << text;
    }
  }
}

TEST_F(ServerSamplingTest, GrammarFieldConstrainsCompletions) {
  const std::string gbnf = R"(root ::= ("yes" | "no") " " num ("," word){0,3}
num ::= [1-9] [0-9]{0,2}   # no leading zero
word ::= [a-z]{1,4})";
  const std::regex same("(yes|no) [1-9][0-9]{0,2}(,[a-z]{1,4}){0,3}");
  for (const double temp : {0.0, 1.0})
    for (const int seed : {5, 6, 7}) {
      const json body = {{"prompt", "Answer:"}, {"max_tokens", 60}, {"temperature", temp}, {"seed", seed}, {"grammar", gbnf}};
      const HttpResult r = curl(port(), "/v1/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const std::string text = r.j()["choices"][0]["text"];
      EXPECT_EQ(r.j()["choices"][0]["finish_reason"], "stop") << text;
      EXPECT_TRUE(std::regex_match(text, same)) << "temperature " << temp << " seed " << seed << ": " << text;
    }
  // n = 2: each reply has its own grammar state.
  const json body = {{"prompt", "Answer:"}, {"max_tokens", 60}, {"temperature", 1.0}, {"seed", 9}, {"n", 2}, {"grammar", gbnf}};
  const HttpResult r = curl(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.j()["choices"].size(), 2u) << r.body;
  for (const auto& c : r.j()["choices"]) { EXPECT_TRUE(std::regex_match(c["text"].get<std::string>(), same)) << c; }
}

TEST_F(ServerSamplingTest, UnsupportedSchemasAndBadGrammarsAre400NamingTheProblem) {
  json body = chat_body({{{"role", "user"}, {"content", "x"}}}, 4);
  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"name", "n"}, {"schema", {{"type", "integer"}, {"minimum", 3}}}}}};
  HttpResult r = curl(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("'minimum'"), std::string::npos) << r.body;
  EXPECT_EQ(r.j()["error"]["param"], "response_format.json_schema.schema");
  body["response_format"] = {{"type", "xml"}};
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).status, 400);
  body.erase("response_format");
  body["grammar"] = "root ::= \"a\" bogus";
  r = curl(port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("line 1, column 14: undefined rule 'bogus'"), std::string::npos)
      << r.body;
  body["response_format"] = {{"type", "json_object"}};
  EXPECT_EQ(curl(port(), "/v1/chat/completions", body.dump()).status, 400);
  const json text = {{"prompt", "p"}, {"grammar", "root ::= [a-"}};
  EXPECT_EQ(curl(port(), "/v1/completions", text.dump()).status, 400);
}

}  // namespace
