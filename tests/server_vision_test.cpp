// `warmstart serve --mmproj` end to end: images in OpenAI chat messages (data: and file://
// URLs) on every vision fixture pair, their history reused, bad images refused with 400.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_prompt.h"
#include "engine/media_prompt.h"
#include "engine/prompt.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "not_supported.h"
#include "server/media_turn.h"
#include "server_client.h"
#include "tokenizer/tokenizer.h"
#include "vision/context.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using namespace ws::test;

std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += abc[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | (two ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0);
    out += abc[(v >> 18) & 63];
    out += abc[(v >> 12) & 63];
    out += two ? abc[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

const fs::path kShared = kSharedDir;
const fs::path kShapesPng = kShared / "fixtures" / "images" / "shapes-256.png";

json png_url(const std::string& png) { return "data:image/png;base64," + base64(png); }

// A user message as OpenAI clients send an image: text, image_url, text.
json image_message(const json& url, const std::string& question) {
  return {{"role", "user"},
          {"content", json::array({{{"type", "text"}, {"text", "Here is a picture:"}},
                                   {{"type", "image_url"}, {"image_url", {{"url", url}}}},
                                   {{"type", "text"}, {"text", question}}})}};
}

// Every vision golden (dense, hybrid, sliding-window pairs).
std::vector<json> vision_goldens() {
  std::vector<json> out;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vision-", 0) != 0 || e.path().extension() != ".json") continue;
    json g = json::parse(slurp(e.path()));
    if (!ws::test::skip_not_supported_pair((kShared / g["model_file"].get<std::string>()).string(),
                                           (kShared / g["mmproj_file"].get<std::string>()).string(), name))
      out.push_back(std::move(g));
  }
  return out;
}

void expect_400(const HttpResult& r, const std::string& needle) {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = r.j();
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

TEST(ServerVision, ImageHistoryIsReusedAndBadImagesAre400) {
  const std::vector<json> goldens = vision_goldens();
  ASSERT_FALSE(goldens.empty()) << "no vision goldens under " << kShared / "fixtures" / "golden";
  const std::string png = slurp(kShapesPng);
  for (const json& g : goldens) {
    SCOPED_TRACE(g["model_file"].get<std::string>());
    // The rows before the image's end: its position under M-RoPE (an image takes fewer
    // positions than rows), so count by token when the golden has it.
    const int boundary = g["layout"].value("media_boundary_token", g["layout"]["media_boundary_pos"].get<int>());
    // The last server reads file:// URLs; the first refuses them.
    const bool local_files = &g == &goldens.back() && goldens.size() > 1;
    std::vector<std::string> args = {"--mmproj", (kShared / g["mmproj_file"].get<std::string>()).string(), "-t", "2",
                                     "-c", "2048", "--cache-budget-mb", "64"};
    if (local_files) args.push_back("--allow-local-files");
    ServerProcess srv(args, kShared / g["model_file"].get<std::string>());
    ASSERT_GT(srv.port(), 0) << srv.log();
    // Turn 1 with the image, then two turns that resend it in the history.
    json msgs = {{{"role", "system"}, {"content", "You are a helpful assistant. Describe pictures briefly and precisely."}},
                 image_message(png_url(png), "Which shapes and colors do you see in it, and where are they?")};
    for (int turn = 1; turn <= 3; ++turn) {
      const HttpResult r = curl(srv.port(), "/v1/chat/completions", chat_body(msgs, 4).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      const json j = r.j();
      const int cached = j["usage"]["prompt_tokens_details"]["cached_tokens"];
      const int prompt = j["usage"]["prompt_tokens"];
      EXPECT_GT(prompt, boundary) << "turn " << turn;
      if (turn > 1) {
        EXPECT_GE(cached, boundary) << "turn " << turn << ": the image was not reused";
      }
      std::printf("[ info ] %s turn %d: prompt %d, cached %d (media boundary %d)\n",
                  g["model_file"].get<std::string>().c_str(), turn, prompt, cached, boundary);
      msgs.push_back({{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
      msgs.push_back({{"role", "user"}, {"content", "And what else, in turn " + std::to_string(turn + 1) + "?"}});
    }
    if (local_files) {
      // The same bytes from a file: the same image, so its cached state is reused.
      msgs[1] = image_message("file://" + kShapesPng.string(), "Which shapes and colors do you see in it, and where are they?");
      const HttpResult r = curl(srv.port(), "/v1/chat/completions", chat_body(msgs, 4).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_GE(r.j()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), boundary);
    }
    if (&g != &goldens.front()) continue;  // bad input: once is enough
    const json q = "What is this?";
    expect_400(curl(srv.port(), "/v1/chat/completions",
                    chat_body(json::array({image_message(png_url(png.substr(0, png.size() / 2)), q)}), 4).dump()),
               "image");
    expect_400(curl(srv.port(), "/v1/chat/completions",
                    chat_body(json::array({image_message("http://example.com/cat.png", q)}), 4).dump()),
               "remote image URLs are not fetched");
    expect_400(curl(srv.port(), "/v1/chat/completions",
                    chat_body(json::array({image_message("file://" + kShapesPng.string(), q)}), 4).dump()),
               "--allow-local-files");
    // The server survives all of them.
    EXPECT_EQ(curl(srv.port(), "/health").status, 200);
  }
}

// Message ends (byte offsets in the rendered text) land on the token positions right after
// each message's closing tokens in the media prompt, on every vision pair's layout.
TEST(ServerVision, MessageEndsMapToTokenPositionsInMediaPrompts) {
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vision-", 0) != 0 || e.path().extension() != ".json") continue;
    SCOPED_TRACE(name);
    const json g = json::parse(slurp(e.path()));
    if (ws::test::skip_not_supported_pair((kShared / g["model_file"].get<std::string>()).string(),
                                          (kShared / g["mmproj_file"].get<std::string>()).string(), name))
      continue;
    const auto lm = ws::gguf::File::open((kShared / g["model_file"].get<std::string>()).string());
    const auto mm = ws::gguf::File::open((kShared / g["mmproj_file"].get<std::string>()).string());
    const auto model = ws::load_model(lm);
    const auto tok = ws::Tokenizer::from_gguf(lm);
    ws::vision::VisionContext vis(mm, 0);
    ws::ThreadPool pool(1);
    const ws::chat::RenderedPrompt text = ws::chat::render_chatml(g["prompt"]["messages"], true);
    const std::string png = slurp(kShared / g["image_file"].get<std::string>());
    const std::vector<std::vector<uint8_t>> images = {std::vector<uint8_t>(png.begin(), png.end())};
    const auto mp = ws::build_media_prompt(*tok, model->config().n_embd, text.text, images, vis, pool);
    const auto ends = ws::media_message_ends(mp, text.message_ends);
    ASSERT_EQ(ends.size(), 2u);  // system, user
    // Before the image: the same position as text-only tokenization gives.
    EXPECT_EQ(ends[0], ws::tokenize_prompt(*tok, text.text, text.message_ends).message_ends[0]);
    EXPECT_GT(ends[1], g["layout"].value("media_boundary_token", g["layout"]["media_boundary_pos"].get<int32_t>()));
    for (int32_t at : ends) {
      ASSERT_GE(at, 2);
      ASSERT_LT(size_t(at), mp.tokens.size());
      EXPECT_EQ(tok->token_to_piece(mp.tokens[size_t(at) - 2], true) + tok->token_to_piece(mp.tokens[size_t(at) - 1], true),
                "<|im_end|>\n");
      EXPECT_EQ(tok->token_to_piece(mp.tokens[size_t(at)], true), "<|im_start|>");
    }
  }
}

class ServerVisionTest : public SharedServerTest<ServerVisionTest> {};

TEST_F(ServerVisionTest, ImageWithoutMmprojIs400) {
  const std::string png = slurp(kShapesPng);
  expect_400(curl(port(), "/v1/chat/completions", chat_body(json::array({image_message(png_url(png), "What is this?")}), 4).dump()),
             "--mmproj");
}

}  // namespace
