// llama-server's contract beyond the OpenAI routes, as its README (tools/server/README.md)
// and its test suite describe it: the paths without /v1, public health and model routes,
// error types, the model list's fields, its command-line flags, and /slots with save,
// restore and erase. Run against the real `warmstart serve` binary with curl.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server_client.h"

using namespace ws::test;

namespace {

std::string temp_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("ws-" + tag + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// A fixture language model other than `not_this` (other weights, so another model id).
fs::path other_model(const fs::path& not_this) {
  for (const auto& e : fs::directory_iterator(kSharedDir / "fixtures" / "models")) {
    const std::string name = e.path().filename().string();
    if (e.path() != not_this && name.ends_with("-tiny-f32.gguf") && name.rfind("mmproj", 0) != 0 &&
        name.find("-vl-") == std::string::npos)
      return e.path();
  }
  return {};
}

json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

TEST(LlamaServerApi, PathsWithoutV1AnswerAsTheV1Ones) {
  ServerProcess srv({"-t", "2"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const std::string chat = chat_body(user("Say something."), 6).dump();
  const HttpResult a = curl(srv.port(), "/v1/chat/completions", chat), b = curl(srv.port(), "/chat/completions", chat);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(a.j()["choices"][0]["message"], b.j()["choices"][0]["message"]);
  const std::string text = json({{"prompt", "Once upon"}, {"max_tokens", 5}, {"temperature", 0}}).dump();
  EXPECT_EQ(curl(srv.port(), "/v1/completions", text).j()["choices"][0]["text"],
            curl(srv.port(), "/completions", text).j()["choices"][0]["text"]);
  EXPECT_EQ(curl(srv.port(), "/models").j()["data"], curl(srv.port(), "/v1/models").j()["data"]);
  const std::string emb = json({{"input", "hello"}}).dump();
  for (const char* path : {"/embeddings", "/v1/embeddings", "/embedding"})
    EXPECT_EQ(curl(srv.port(), path, emb).status, 200) << path;
  EXPECT_EQ(curl(srv.port(), "/v1/health").j(), json({{"status", "ok"}}));
  for (const char* path : {"/rerank", "/v1/rerank", "/lora-adapters"}) {
    const HttpResult r = curl(srv.port(), path, "{}");
    EXPECT_EQ(r.status, 501) << path;
    EXPECT_EQ(r.j()["error"]["type"], "not_supported_error") << r.body;
  }
  const HttpResult missing = curl(srv.port(), "/no/such/route");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.j()["error"]["type"], "not_found_error") << missing.body;
}

TEST(LlamaServerApi, ModelListHasLlamaServersFieldsAndAliases) {
  ServerProcess srv({"-t", "1", "--alias", "first-name,second-name", "--api-key", "k"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const HttpResult r = curl(srv.port(), "/v1/models");  // public, as in llama-server
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.j();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "first-name");
  EXPECT_EQ(j["data"][0]["aliases"], json::array({"first-name", "second-name"}));
  // meta holds the model's numbers: compare with what the file says.
  const auto file = ws::gguf::File::open(hybrid_model().string());
  const json meta = j["data"][0]["meta"];
  EXPECT_EQ(meta["n_vocab"], file.find("tokenizer.ggml.tokens")->as_array().items.size());
  int64_t n_params = 0;
  for (const auto& t : file.tensors()) n_params += t.n_elements();
  EXPECT_EQ(meta["n_params"], n_params);
  EXPECT_EQ(meta["vocab_type"], file.get_string("tokenizer.ggml.model") == "gpt2" ? 2 : 1);
  ASSERT_EQ(j["models"].size(), 1u);
  EXPECT_EQ(j["models"][0]["name"], "first-name");
  EXPECT_EQ(j["models"][0]["details"]["format"], "gguf");
  // Replies name the model by its first alias; everything but health and models needs the key.
  const HttpResult chat = curl(srv.port(), "/chat/completions", json({{"messages", user("hi")}, {"max_tokens", 2}}).dump(),
                               "-H 'Authorization: Bearer k'");
  EXPECT_EQ(chat.j()["model"], "first-name") << chat.body;
  const HttpResult refused = curl(srv.port(), "/chat/completions", chat_body(user("hi"), 2).dump());
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.j()["error"]["type"], "authentication_error");
  EXPECT_EQ(curl(srv.port(), "/models").status, 200);
  EXPECT_EQ(curl(srv.port(), "/health").status, 200);
}

TEST(LlamaServerApi, NPredictIsTheDefaultReplyLength) {
  ServerProcess srv({"-t", "1", "--n-predict", "3"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const json body = {{"messages", user("Tell me a long story.")}, {"temperature", 0}};
  const json capped = curl(srv.port(), "/v1/chat/completions", body.dump()).j();
  ASSERT_TRUE(capped.contains("usage")) << capped;
  EXPECT_LE(capped["usage"]["completion_tokens"].get<int>(), 3);
  if (capped["choices"][0]["finish_reason"] == "length") { EXPECT_EQ(capped["usage"]["completion_tokens"], 3); }
  // llama-server's n_predict on the OpenAI routes, and a request's own limit wins.
  json n_predict = body;
  n_predict["n_predict"] = 2;
  const json two = curl(srv.port(), "/v1/chat/completions", n_predict.dump()).j();
  EXPECT_LE(two["usage"]["completion_tokens"].get<int>(), 2) << two;
  n_predict["n_predict"] = 0;
  EXPECT_EQ(curl(srv.port(), "/v1/chat/completions", n_predict.dump()).j()["error"]["param"], "n_predict");
  json longer = body;
  longer["max_tokens"] = 6;
  const json own = curl(srv.port(), "/v1/chat/completions", longer.dump()).j();
  if (own["choices"][0]["finish_reason"] == "length") { EXPECT_EQ(own["usage"]["completion_tokens"], 6); }
}

TEST(LlamaServerApi, FlagsAreTakenNotedOrRefusedByName) {
  // Accepted: multi-letter short names CLI11 alone would misread (-ctk as "-c tk").
  ServerProcess ok({"-t", "1", "-np", "2", "-ub", "64", "-ctk", "f32", "-ctv", "f16", "-fa", "on", "-ngl", "99",
                    "--jinja", "-cb", "--no-webui", "--embeddings", "-n", "4"});
  ASSERT_GT(ok.port(), 0) << ok.log();
  EXPECT_NE(ok.log().find("--flash-attn accepted, changes nothing"), std::string::npos) << ok.log();
  EXPECT_NE(ok.log().find("--gpu-layers accepted"), std::string::npos) << ok.log();
  EXPECT_EQ(curl(ok.port(), "/slots").j().size(), 2u);
  // Refused by name, with the reason, and the server does not start.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--lora", "x.gguf"}, "--lora is refused: LoRA"},
      {{"-ctk", "q5_1"}, "q5_1 not in"},
      {{"-md", "draft.gguf"}, "--model-draft is refused: speculative"},
      {{"-hf", "org/repo"}, "--hf-repo is refused"},
      {{"--temp", "0.5"}, "set the field per request"},
      {{"--reranking"}, "no reranking models"},
      {{"--no-such-flag"}, "unknown option"},
      {{"--chat-template", "not-a-template-name"}, "neither a built-in template"},
  };
  for (const auto& [args, why] : refused) {
    std::vector<std::string> all = {"-t", "1"};
    all.insert(all.end(), args.begin(), args.end());
    ServerProcess srv(all);
    EXPECT_EQ(srv.port(), 0) << args[0];
    for (int i = 0; i < 50 && srv.alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_NE(srv.log().find(why), std::string::npos) << args[0] << ": " << srv.log();
  }
  // Quantized cache types are taken (the model's head_dim 64 is whole q8_0/q4_0 blocks) ...
  ServerProcess quantized({"-t", "1", "-ctk", "q8_0", "-ctv", "q4_0"});
  ASSERT_GT(quantized.port(), 0) << quantized.log();
  EXPECT_EQ(curl(quantized.port(), "/completion", R"({"prompt": "Hello", "n_predict": 3})").status, 200);
  // ... and refused at start-up, saying why, for a head_dim that is not (the smallest lfm2
  // fixture whose attention heads are not whole 32-element blocks).
  fs::path odd_model;
  for (const auto& e : fs::directory_iterator(kSharedDir / "fixtures" / "models")) {
    if (e.path().extension() != ".gguf") continue;
    const auto f = ws::gguf::File::open(e.path().string());
    const int64_t heads = f.get_int("lfm2.attention.head_count", 0);
    if (f.get_string("general.architecture") == "lfm2" && heads > 0 && f.get_int("lfm2.embedding_length", 0) / heads % 32)
      odd_model = e.path();
  }
  if (odd_model.empty()) GTEST_SKIP() << "no lfm2 fixture with a head_dim that is not a multiple of 32";
  ServerProcess odd({"-t", "1", "-ctv", "q8_0"}, odd_model);
  EXPECT_EQ(odd.port(), 0);
  for (int i = 0; i < 50 && odd.alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(odd.log().find("stores blocks of 32 elements, but this model's head_dim is"), std::string::npos) << odd.log();
}

TEST(LlamaServerApi, ChatTemplateByBuiltInNameOrInlineText) {
  ServerProcess named({"-t", "1", "--chat-template", "chatml"});
  ASSERT_GT(named.port(), 0) << named.log();
  // ChatML as OpenAI documented it and llama.cpp's built-in formats it.
  EXPECT_EQ(curl(named.port(), "/apply-template", json({{"messages", user("hey")}}).dump()).j()["prompt"],
            "<|im_start|>user\nhey<|im_end|>\n<|im_start|>assistant\n");
  ServerProcess inline_text({"-t", "1", "--chat-template", "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"});
  ASSERT_GT(inline_text.port(), 0) << inline_text.log();
  EXPECT_EQ(curl(inline_text.port(), "/apply-template", json({{"messages", user("hey")}}).dump()).j()["prompt"],
            "<user>hey");
}

TEST(LlamaServerApi, CorsOriginsEchoTheAllowedOrigin) {
  ServerProcess srv({"-t", "1", "--cors-origins", "https://a.example,https://b.example"});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const std::string hdr = (fs::temp_directory_path() / ("ws-cors-" + std::to_string(getpid()))).string();
  for (const std::string origin : {"https://a.example", "https://b.example"}) {
    curl(srv.port(), "/health", "", "-D " + hdr + " -H 'Origin: " + origin + "'");
    EXPECT_NE(slurp(hdr).find("Access-Control-Allow-Origin: " + origin), std::string::npos) << origin;
  }
  curl(srv.port(), "/health", "", "-D " + hdr + " -H 'Origin: https://evil.example'");
  EXPECT_EQ(slurp(hdr).find("Access-Control-Allow-Origin"), std::string::npos);
  fs::remove(hdr);
}

TEST(LlamaServerApi, SlotSaveRestoreAcrossServersGivesTheSameReplyWithReuse) {
  const std::string dir = temp_dir("slots");
  const std::string first = chat_body(user("Remember this sentence about the blue lighthouse."), 8).dump();
  json second_body = chat_body(json::array({{{"role", "user"}, {"content", "Remember this sentence about the blue lighthouse."}},
                                            {{"role", "assistant"}, {"content", "ok"}},
                                            {{"role", "user"}, {"content", "What colour was it?"}}}),
                               8);
  json cold_reply;
  int n_saved = 0;
  {
    ServerProcess a({"-t", "2", "--parallel", "1", "--slot-save-path", dir});
    ASSERT_GT(a.port(), 0) << a.log();
    ASSERT_EQ(curl(a.port(), "/v1/chat/completions", first).status, 200);
    const HttpResult saved = curl(a.port(), "/slots/0?action=save", json({{"filename", "conv.bin"}}).dump());
    ASSERT_EQ(saved.status, 200) << saved.body;
    n_saved = saved.j()["n_saved"];
    EXPECT_GT(n_saved, 0);
    EXPECT_EQ(saved.j()["n_written"], fs::file_size(fs::path(dir) / "conv.bin"));
    const json slots = curl(a.port(), "/slots").j();
    EXPECT_GE(slots[0]["n_tokens"].get<int>(), n_saved);
    const HttpResult erased = curl(a.port(), "/slots/0?action=erase", "{}");
    EXPECT_EQ(erased.j()["n_erased"], slots[0]["n_tokens"]) << erased.body;
    EXPECT_EQ(curl(a.port(), "/slots").j()[0]["n_tokens"], 0);
  }
  {  // The reply a server with nothing cached gives: the truth the restored one must match.
    ServerProcess cold({"-t", "2", "--parallel", "1", "--cache-budget-mb", "0"});
    ASSERT_GT(cold.port(), 0) << cold.log();
    cold_reply = curl(cold.port(), "/v1/chat/completions", second_body.dump()).j();
  }
  ServerProcess b({"-t", "2", "--parallel", "1", "--slot-save-path", dir});
  ASSERT_GT(b.port(), 0) << b.log();
  const HttpResult restored = curl(b.port(), "/slots/0?action=restore", json({{"filename", "conv.bin"}}).dump());
  ASSERT_EQ(restored.status, 200) << restored.body;
  EXPECT_EQ(restored.j()["n_restored"], n_saved);
  const json warm = curl(b.port(), "/v1/chat/completions", second_body.dump()).j();
  EXPECT_EQ(warm["choices"][0]["message"], cold_reply["choices"][0]["message"]);
  EXPECT_GT(warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << warm["usage"];
  fs::remove_all(dir);
}

// llama-server's slot test: a completion pinned to slot 1 is what slot 1 then holds and saves.
TEST(LlamaServerApi, IdSlotPicksTheSlotWhoseSequenceIsSaved) {
  const std::string dir = temp_dir("slots-id");
  ServerProcess srv({"-t", "2", "--parallel", "2", "--slot-save-path", dir});
  ASSERT_GT(srv.port(), 0) << srv.log();
  const json body = {{"prompt", "What is the capital of France?"}, {"n_predict", 4}, {"id_slot", 1},
                     {"cache_prompt", true}, {"temperature", 0}};
  const HttpResult r = curl(srv.port(), "/completion", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["id_slot"], 1);
  const json slots = curl(srv.port(), "/slots").j();
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0]["n_tokens"], 0);
  EXPECT_GT(slots[1]["n_tokens"].get<int>(), 0);
  const HttpResult saved = curl(srv.port(), "/slots/1?action=save", json({{"filename", "one.bin"}}).dump());
  ASSERT_EQ(saved.status, 200) << saved.body;
  EXPECT_GE(saved.j()["n_saved"].get<int>(), r.j()["tokens_evaluated"].get<int>());
  EXPECT_EQ(curl(srv.port(), "/slots/0?action=save", json({{"filename", "zero.bin"}}).dump()).status, 400);
  fs::remove_all(dir);
}

TEST(LlamaServerApi, SlotActionsRefuseBadRequestsAndBadFiles) {
  const std::string dir = temp_dir("slots-bad");
  ServerProcess srv({"-t", "1", "--parallel", "1", "--slot-save-path", dir});
  ASSERT_GT(srv.port(), 0) << srv.log();
  ASSERT_EQ(curl(srv.port(), "/v1/chat/completions", chat_body(user("A short turn."), 3).dump()).status, 200);
  ASSERT_EQ(curl(srv.port(), "/slots/0?action=save", json({{"filename", "good.bin"}}).dump()).status, 200);
  const std::string good = slurp(fs::path(dir) / "good.bin");
  auto restore = [&](const std::string& name) {
    return curl(srv.port(), "/slots/0?action=restore", json({{"filename", name}}).dump());
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  std::ofstream(fs::path(dir) / "flipped.bin", std::ios::binary) << flipped;
  std::ofstream(fs::path(dir) / "cut.bin", std::ios::binary) << good.substr(0, good.size() / 3);
  std::ofstream(fs::path(dir) / "junk.bin", std::ios::binary) << "not a slot file at all";
  for (const char* name : {"flipped.bin", "cut.bin", "junk.bin"}) {
    const HttpResult r = restore(name);
    EXPECT_EQ(r.status, 400) << name << ": " << r.body;
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("not a valid warmstart slot file"), std::string::npos)
        << r.body;
  }
  EXPECT_EQ(restore("good.bin").status, 200);
  EXPECT_EQ(restore("absent.bin").status, 404);
  for (const char* name : {"../escape.bin", "sub/dir.bin", ".hidden", ""})
    EXPECT_EQ(restore(name).status, 400) << name;
  EXPECT_EQ(curl(srv.port(), "/slots/0?action=explode", "{}").status, 400);
  EXPECT_EQ(curl(srv.port(), "/slots/7?action=erase", "{}").status, 400);
  ServerProcess no_path({"-t", "1"});
  ASSERT_GT(no_path.port(), 0);
  const HttpResult r = curl(no_path.port(), "/slots/0?action=save", json({{"filename", "x.bin"}}).dump());
  EXPECT_EQ(r.status, 501);
  EXPECT_EQ(r.j()["error"]["type"], "not_supported_error");
  // A file of another model is refused by name.
  const fs::path other = other_model(hybrid_model());
  if (!other.empty()) {
    ServerProcess o({"-t", "1", "--parallel", "1", "--slot-save-path", dir}, other);
    ASSERT_GT(o.port(), 0) << o.log();
    const HttpResult wrong = curl(o.port(), "/slots/0?action=restore", json({{"filename", "good.bin"}}).dump());
    EXPECT_EQ(wrong.status, 400);
    EXPECT_NE(wrong.body.find("another model"), std::string::npos) << wrong.body;
  }
  fs::remove_all(dir);
}

}  // namespace
