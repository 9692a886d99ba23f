// Per-request bounds (server/request_limits): the prompt-length refusal before tokenizing
// must be sound (never refuse what would fit) on every fixture vocabulary, and image decoding
// must respect the pixel budget and the bound on concurrent decodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "server/api_error.h"
#include "server/request_limits.h"
#include "vision/image.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(WS_SHARED_DIR) / "fixtures";

std::vector<std::pair<std::string, std::unique_ptr<ws::Tokenizer>>> vocabularies() {
  std::vector<std::pair<std::string, std::unique_ptr<ws::Tokenizer>>> out;
  for (const auto& e : fs::directory_iterator(kFixtures / "vocab")) {
    if (e.path().extension() != ".gguf") continue;
    try {
      out.emplace_back(e.path().filename().string(), ws::Tokenizer::from_gguf(ws::gguf::File::open(e.path().string())));
    } catch (const std::runtime_error&) {
      // A tokenizer model this engine does not support (tokenizer_test covers which).
    }
  }
  return out;
}

int64_t non_space(const std::string& s) {
  return int64_t(std::count_if(s.begin(), s.end(), [](char c) { return !std::isspace(static_cast<unsigned char>(c)); }));
}

// Texts that pack the most bytes into each token: the vocabulary's longest pieces repeated,
// special-token texts back to back, whitespace runs after them, and random bytes.
std::vector<std::string> dense_texts(const ws::Tokenizer& tok) {
  std::vector<std::pair<int64_t, ws::Token>> by_len;
  for (ws::Token t = 0; t < tok.n_vocab(); ++t) by_len.emplace_back(non_space(tok.token_to_piece(t, true)), t);
  std::sort(by_len.rbegin(), by_len.rend());
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min<size_t>(8, by_len.size()); ++i) {
    std::string s;
    for (int r = 0; r < 16; ++r) s += tok.token_to_piece(by_len[i].second, true);
    out.push_back(s);
    out.push_back(s + std::string(300, ' ') + s);
  }
  std::string specials;
  for (ws::Token t = 0; t < tok.n_vocab(); ++t)
    if (tok.is_control(t)) specials += tok.token_to_piece(t, true) + "   \n ";
  out.push_back(specials);
  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (char& c : noise) c = char(rng() & 0xff);
  out.push_back(noise);
  return out;
}

}  // namespace

TEST(PromptLengthGuard, NeverRefusesAPromptThatFits) {
  const auto vocabs = vocabularies();
  ASSERT_FALSE(vocabs.empty()) << "no loadable vocabulary in " << kFixtures / "vocab";
  for (const auto& [name, tok] : vocabs) {
    const ws::server::PromptLengthGuard guard(*tok);
    const int64_t b = guard.max_bytes_per_token();
    for (const std::string& text : dense_texts(*tok)) {
      const int64_t tokens = int64_t(tok->encode(text, /*add_special=*/false, /*parse_special=*/true).size());
      // The guard's premise: no token stands for more than b non-whitespace bytes.
      EXPECT_GE(tokens * b, non_space(text)) << name << ": a token covers more than " << b << " bytes";
      // So a context of exactly `tokens` must not be refused by the guard.
      EXPECT_NO_THROW(guard.check(text, int32_t(std::max<int64_t>(tokens, 1)), "prompt")) << name;
    }
  }
}

TEST(PromptLengthGuard, RefusesTextThatCannotFitAndNamesTheContext) {
  const auto vocabs = vocabularies();
  ASSERT_FALSE(vocabs.empty());
  const ws::server::PromptLengthGuard guard(*vocabs.front().second);
  const int32_t n_ctx = 128;
  const std::string fits(size_t(n_ctx) * size_t(guard.max_bytes_per_token()), 'x');
  EXPECT_NO_THROW(guard.check(fits, n_ctx, "prompt"));
  // Whitespace never counts (some tokenizers drop it), however much of it there is.
  EXPECT_NO_THROW(guard.check(fits + std::string(fits.size() * 4, ' '), n_ctx, "prompt"));
  try {
    guard.check(fits + "x", n_ctx, "prompt");
    FAIL() << "a prompt longer than any " << n_ctx << " tokens can hold was accepted";
  } catch (const ws::server::ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find(std::to_string(n_ctx)), std::string::npos) << e.what();
    EXPECT_EQ(e.to_json()["error"]["code"], "context_length_exceeded");
  }
}

namespace {

std::vector<uint8_t> fixture_png(int64_t* pixels) {
  for (const auto& e : fs::directory_iterator(kFixtures / "images")) {
    if (e.path().extension() != ".png") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto img = ws::vision::decode_image(bytes);
    *pixels = int64_t(img.width) * img.height;
    return bytes;
  }
  return {};
}

}  // namespace

TEST(ImageBudget, RefusedFromTheHeaderWhenOverTheLimit) {
  int64_t pixels = 0;
  const auto png = fixture_png(&pixels);
  ASSERT_FALSE(png.empty()) << "no PNG in " << kFixtures / "images";
  EXPECT_NO_THROW(ws::vision::decode_image(png, pixels));
  EXPECT_THROW(ws::vision::decode_image(png, pixels - 1), ws::vision::ImageTooLargeError);
}

TEST(ImageBudget, OneRequestsImagesShareItsBudget) {
  int64_t pixels = 0;
  const auto png = fixture_png(&pixels);
  ASSERT_FALSE(png.empty());
  ws::server::ImageDecodeGate gate(1);
  const auto decode = ws::server::request_image_decoder(gate, pixels + pixels / 2);
  EXPECT_EQ(int64_t(decode(png).rgb.size()), pixels * 3);
  try {
    decode(png);  // only half an image's pixels are left
    FAIL() << "the second image passed a budget of 1.5 images";
  } catch (const ws::vision::ImageTooLargeError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(pixels + pixels / 2)), std::string::npos) << e.what();
  }
  EXPECT_EQ(gate.active(), 0) << "a refused decode kept its place in the gate";
  // A fresh request has a fresh budget.
  EXPECT_NO_THROW(ws::server::request_image_decoder(gate, pixels)(png));
}

TEST(ImageBudget, ConcurrentDecodesStayUnderTheGate) {
  int64_t pixels = 0;
  const auto png = fixture_png(&pixels);
  ASSERT_FALSE(png.empty());
  constexpr int kLimit = 2, kThreads = 6;
  ws::server::ImageDecodeGate gate(kLimit);
  std::atomic<int> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        gate.enter();
        int seen = gate.active(), prev = most.load();
        while (seen > prev && !most.compare_exchange_weak(prev, seen)) {
        }
        ws::vision::decode_image(png);
        gate.leave();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), kLimit);
  EXPECT_GE(most.load(), 1);
  EXPECT_EQ(gate.active(), 0);
}
