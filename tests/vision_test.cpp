// Vision projectors against llama.cpp's vision goldens (shared/fixtures/golden/vision-*.json,
// README section 8), image decoding, and cross-turn reuse with images through the Engine:
// the encoder runs once, reuse covers the image, results are bit-identical to a cold run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cache/prefix_cache.h"
#include "engine/logit_report.h"
#include "engine/turn.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"
#include "engine/media_prompt.h"
#include "engine/vision_report.h"
#include "server/image_url.h"
#include "vision/context.h"
#include "not_supported.h"

namespace fs = std::filesystem;
using namespace ws;
using nlohmann::json;
using ws::test::Unsupported;

namespace {

const fs::path kShared = WS_SHARED_DIR;

std::vector<std::string> vision_goldens() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kShared / "fixtures" / "golden")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("vision-", 0) == 0 && e.path().extension() == ".json") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One golden pair, loaded: LM, tokenizer, projector, blob.
struct Pair {
  json g;
  std::vector<float> blob;
  gguf::File lm_file, mm_file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<vision::VisionContext> vis;
  std::vector<uint8_t> png;

  explicit Pair(const std::string& path)
      : g(json::parse(std::ifstream(path))),
        lm_file(gguf::File::open((kShared / g["model_file"].get<std::string>()).string())),
        mm_file(gguf::File::open((kShared / g["mmproj_file"].get<std::string>()).string())) {
    const auto raw = read_bytes(fs::path(path).parent_path() / g["blob_file"].get<std::string>());
    blob.resize(raw.size() / 4);
    std::memcpy(blob.data(), raw.data(), blob.size() * 4);
    model = load_model(lm_file);
    tok = Tokenizer::from_gguf(lm_file);
    vis = std::make_unique<vision::VisionContext>(mm_file, size_t(64) << 20);
    png = read_bytes(kShared / g["image_file"].get<std::string>());
  }
  std::span<const float> tensor(const json& d) const {
    size_t count = 1;
    for (const auto& s : d["shape"]) count *= s.get<size_t>();
    return std::span<const float>(blob).subspan(d["offset_bytes"].get<size_t>() / 4, count);
  }
  std::string text() const { return g["prompt"]["text"].get<std::string>(); }
  // Row (token index) of the media boundary: M-RoPE goldens give it apart from its position.
  int32_t boundary() const {
    const auto& l = g["layout"];
    return (l.contains("media_boundary_token") ? l["media_boundary_token"] : l["media_boundary_pos"]).get<int32_t>();
  }
  int32_t first_image() const {
    const auto& e = g["image_entries"][0];
    return (e.contains("tok0") ? e["tok0"] : e["pos0"]).get<int32_t>();
  }
  std::string projector() const { return g["projector"]["type"].get<std::string>(); }
};

// The logit report's max |a - b|, with equal sizes an expectation.
double same_size_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  return max_abs_diff(a, b);
}

vision::RgbImage flipped(const vision::RgbImage& img) {
  vision::RgbImage out = img;
  for (int32_t y = 0; y < img.height; ++y)
    for (int32_t x = 0; x < img.width; ++x)
      std::copy_n(img.pixel(img.width - 1 - x, y), 3, out.pixel(x, y));
  return out;
}

std::vector<uint8_t> to_png(const vision::RgbImage& img, const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("ws_vision_" + std::to_string(::getpid()) + "_" + name + ".png");
  vision::write_png(p.string(), img);
  auto bytes = read_bytes(p);
  fs::remove(p);
  return bytes;
}

EngineOptions engine_options() {
  EngineOptions eo;
  eo.memory.n_ctx = 1024;
  eo.n_ubatch = 512;
  return eo;
}

// Section 8's bounds per projector family (8.8 for idefics3 / lfm2 / gemma3, 8.10, 8.11): the
// patch embeddings with ggml's fp16 convolution reproduced, the tower output, the embeddings
// of a float32 tower, the stored logit rows end to end and with the golden's own embeddings
// fed to the language model, and argmax agreement over all positions. The tiny qwen35 LM is
// 3-10 x more sensitive to its input embeddings, hence its looser end-to-end bound.
struct Bounds {
  double patch, vit, emb, logits, logits_golden_emb, agreement;
};
Bounds bounds_for(const std::string& projector) {
  if (projector == "qwen3vl_merger") return {1e-5, 3e-3, 3e-3, 0.15, 1e-4, 0.95};
  if (projector == "gemma4v") return {1e-5, 1e-2, 3e-3, 5e-2, 2e-2, 0.98};
  if (projector == "gemma3") return {1e-5, 2e-3, 2e-3, 5e-2, 1e-2, 0.98};
  return {1e-5, 2e-3, 2e-3, 5e-2, 1e-4, 0.98};
}

// Max |d| of our logits [rows][V] against the golden's stored full rows; also over the rows
// from `from` on (the text after the image).
std::pair<double, double> stored_rows_diff(const Pair& p, const std::vector<float>& logits, int32_t from) {
  const size_t V = size_t(p.model->config().n_vocab);
  const auto& fl = p.g["full_logits"];
  const auto rows = p.tensor(fl);
  double all = 0, after = 0;
  size_t j = 0;
  for (const auto& r : fl["positions"]) {
    const size_t q = r.get<size_t>();
    EXPECT_LE((q + 1) * V, logits.size());
    if ((q + 1) * V > logits.size()) break;
    const double d = same_size_diff(std::span(logits).subspan(q * V, V), rows.subspan(j++ * V, V));
    all = std::max(all, d);
    if (int32_t(q) >= from) after = std::max(after, d);
  }
  return {all, after};
}

class VisionGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const json g = json::parse(std::ifstream(GetParam()));
    const Unsupported* u = nullptr;
    for (const char* key : {"model_file", "mmproj_file"})
      if (!u) u = test::needs_unsupported(gguf::File::open((kShared / g[key].get<std::string>()).string()));
    if (u) GTEST_SKIP() << test::not_supported_message(*u, fs::path(GetParam()).stem().string());
  }
};

TEST_P(VisionGolden, PixelsTowerEmbeddingsAndLogits) {
  Pair p(GetParam());
  const std::string name = p.g["name"];
  // The PNG decodes to exactly the raw RGB reference.
  const auto img = vision::decode_image(p.png);
  EXPECT_EQ(img.rgb, read_bytes(kShared / p.g["image_rgb_file"].get<std::string>())) << name;

  const Bounds b = bounds_for(p.projector());
  ThreadPool pool(4);
  const std::vector<std::vector<uint8_t>> images = {p.png};
  const auto ev = evaluate_multimodal(*p.model, *p.tok, *p.vis, p.text(), images, 512, pool);
  // Same chunk layout and tokens (null in the golden <=> a placeholder here).
  ASSERT_EQ(ev.prompt.tokens.size(), p.g["tokens"].size()) << name;
  for (size_t i = 0; i < ev.prompt.tokens.size(); ++i) {
    const auto& t = p.g["tokens"][i];
    if (t.is_null()) EXPECT_LT(ev.prompt.tokens[i], 0) << name << " position " << i;
    else EXPECT_EQ(ev.prompt.tokens[i], t.get<Token>()) << name << " position " << i;
  }
  ASSERT_EQ(ev.embeddings.size(), p.g["image_entries"].size()) << name;
  for (size_t i = 0; i < ev.embeddings.size(); ++i) {
    const auto& e = p.g["image_entries"][i];
    const auto& c = ev.prompt.chunks[e["chunk_index"].get<size_t>()];
    ASSERT_TRUE(c.image);
    EXPECT_EQ(c.pos0, (e.contains("tok0") ? e["tok0"] : e["pos0"]).get<int32_t>());
    const auto& pix = ev.prompt.images[size_t(c.image_index)]->entries[size_t(c.entry)].pixels;
    const auto gp = p.tensor(e["pixels"]);
    ASSERT_EQ(pix.size(), gp.size());
    EXPECT_EQ(std::memcmp(pix.data(), gp.data(), gp.size() * 4), 0) << name << ": pixels are not bit-identical";
    const double d_patch = same_size_diff(ev.traces[i].patch_embd_plus_pos, p.tensor(e["patch_embd_plus_pos"]));
    const double d_vit = same_size_diff(ev.traces[i].vit_out, p.tensor(e["vit_out"]));
    const double d_emb = same_size_diff(ev.embeddings[i], p.tensor(e["embeddings"]));
    std::printf("%s entry %zu: patch_embd_plus_pos %.3g, vit_out %.3g, embeddings %.3g\n", name.c_str(), i, d_patch,
                d_vit, d_emb);
    EXPECT_LE(d_patch, b.patch) << name;
    EXPECT_LE(d_vit, b.vit) << name;
    EXPECT_LE(d_emb, b.emb) << name;
  }
  // M-RoPE goldens list the position components every row got: ours must be the same.
  if (p.g.contains("positions")) {
    const auto pos = mrope_positions(p.model->config(), ev.prompt.media, 0, int32_t(ev.prompt.tokens.size()));
    ASSERT_EQ(pos.size(), p.g["positions"].size() * 4) << name << ": the model must use M-RoPE positions";
    for (size_t r = 0; r < p.g["positions"].size(); ++r)
      for (size_t c = 0; c < 4; ++c)
        ASSERT_EQ(pos[r * 4 + c], p.g["positions"][r][c].get<int32_t>()) << name << " row " << r << " component " << c;
  }
  // Logits: the stored full rows, and argmax at every position.
  const int64_t V = p.model->config().n_vocab;
  const auto [d_all, d_after] = stored_rows_diff(p, ev.logits, p.boundary());
  int agree = 0;
  const size_t n = ev.prompt.tokens.size();
  for (size_t q = 0; q < n; ++q) {
    const float* r = ev.logits.data() + q * size_t(V);
    agree += int(std::max_element(r, r + V) - r) == p.g["argmax"][q].get<int>();
  }
  const double agreement = double(agree) / double(n);
  std::printf("%s logits: stored rows max|d| %.3g (after the image %.3g), argmax agreement %.3f\n", name.c_str(), d_all,
              d_after, agreement);
  EXPECT_LE(d_all, b.logits) << name;
  EXPECT_GE(agreement, b.agreement) << name;
}

// The language model alone, fed the golden's image embeddings: isolates the LM's handling of
// image rows (positions, M-RoPE components, bidirectional chunks, per-layer inputs).
TEST_P(VisionGolden, LogitsFromGoldenEmbeddings) {
  Pair p(GetParam());
  const std::string name = p.g["name"];
  ThreadPool pool(4);
  const std::vector<std::vector<uint8_t>> images = {p.png};
  const auto mp = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, *p.vis, pool);
  TurnRequest req;
  req.prompt = mp.tokens;
  req.media = mp.media;
  for (const auto& e : p.g["image_entries"]) {
    const int32_t row = (e.contains("tok0") ? e["tok0"] : e["pos0"]).get<int32_t>();
    const auto gold = p.tensor(e["embeddings"]);
    auto rows = std::make_shared<const std::vector<float>>(gold.begin(), gold.end());
    auto it = std::find_if(req.media.begin(), req.media.end(), [&](const MediaChunk& c) { return c.pos0 == row; });
    ASSERT_NE(it, req.media.end()) << name << ": no image chunk at row " << row;
    it->embeddings = [rows] { return rows; };
  }
  req.max_tokens = 1;
  req.sampling.temperature = 0;
  req.record_logits = true;
  // Micro-batches of 16 split the image rows (and their M-RoPE positions) across batches;
  // a bidirectional chunk still goes whole.
  for (const int32_t ubatch : {512, 16}) {
    EngineOptions eo = engine_options();
    eo.n_ubatch = ubatch;
    Engine engine(*p.model, *p.tok, nullptr, eo, pool);
    const auto res = engine.run_turn(req);
    const auto [d_all, d_after] = stored_rows_diff(p, res.logits, p.boundary());
    std::printf("%s fed the golden's embeddings, n_ubatch %d: stored rows max|d| %.3g (after the image %.3g)\n",
                name.c_str(), ubatch, d_all, d_after);
    EXPECT_LE(d_all, bounds_for(p.projector()).logits_golden_emb) << name << " n_ubatch " << ubatch;
  }
}

TEST_P(VisionGolden, UnseenImagesRunEndToEnd) {
  Pair p(GetParam());
  ThreadPool pool(4);
  const auto img = vision::decode_image(p.png);
  const std::vector<std::vector<uint8_t>> flip = {to_png(flipped(img), "flip")};
  const auto ev = evaluate_multimodal(*p.model, *p.tok, *p.vis, p.text(), flip, 512, pool);
  const auto gold = p.tensor(p.g["image_entries"][0]["embeddings"]);
  EXPECT_GT(same_size_diff(ev.embeddings[0], gold), 0.1) << "a mirrored image must change the embeddings";
  for (float v : ev.logits) ASSERT_TRUE(std::isfinite(v));
  // A non-square, smaller image goes through the resize paths.
  const std::vector<std::vector<uint8_t>> small = {to_png(vision::crop(img, 10, 30, 200, 120), "crop")};
  const auto ev2 = evaluate_multimodal(*p.model, *p.tok, *p.vis, p.text(), small, 512, pool);
  EXPECT_FALSE(ev2.embeddings.empty());
  for (float v : ev2.logits) ASSERT_TRUE(std::isfinite(v));
}

TEST_P(VisionGolden, BadImagesGiveClearErrors) {
  Pair p(GetParam());
  ThreadPool pool(2);
  auto build = [&](std::vector<uint8_t> bytes) {
    const std::vector<std::vector<uint8_t>> images = {std::move(bytes)};
    return build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, *p.vis, pool);
  };
  std::vector<uint8_t> truncated(p.png.begin(), p.png.begin() + long(p.png.size() / 2));
  EXPECT_THROW(build(truncated), vision::ImageError);
  std::vector<uint8_t> corrupt = p.png;
  for (size_t i = 100; i < corrupt.size(); i += 7) corrupt[i] ^= 0x5a;
  EXPECT_THROW(build(corrupt), vision::ImageError);
  EXPECT_THROW(build({'G', 'I', 'F', '8', '9', 'a', 0, 0}), vision::ImageError);
  EXPECT_THROW(build({}), vision::ImageError);
  EXPECT_THROW(build({0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 'J', 'F', 'I', 'F', 0}), vision::ImageError);
  // Marker / image count mismatch.
  const std::vector<std::vector<uint8_t>> none;
  EXPECT_THROW(build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), none, *p.vis, pool),
               std::invalid_argument);
}

// The report writer (warmstart logits --mmproj) lays out chunks, positions and the layout
// summary as the golden does, M-RoPE fields included.
TEST_P(VisionGolden, ReportLayoutMatchesGolden) {
  Pair p(GetParam());
  const std::string name = p.g["name"];
  ThreadPool pool(4);
  const std::vector<std::vector<uint8_t>> images = {p.png};
  const auto ev = evaluate_multimodal(*p.model, *p.tok, *p.vis, p.text(), images, 512, pool);
  const fs::path prefix = fs::temp_directory_path() / ("ws_vision_report_" + std::to_string(::getpid()));
  write_vision_report(prefix.string(), ev, *p.vis, p.model->config(), {}, {});
  const json ours = json::parse(std::ifstream(prefix.string() + ".json"));
  fs::remove(prefix.string() + ".json");
  fs::remove(prefix.string() + ".f32");
  for (const char* key : {"n_positions", "n_image_tokens", "first_image_pos", "media_boundary_pos", "n_tokens",
                          "media_boundary_token"})
    if (p.g["layout"].contains(key)) {
      EXPECT_EQ(ours["layout"][key], p.g["layout"][key]) << name << " layout." << key;
    }
  ASSERT_EQ(ours["chunks"].size(), p.g["chunks"].size()) << name;
  for (size_t i = 0; i < ours["chunks"].size(); ++i)
    for (const char* key : {"type", "pos0", "n_pos", "n_tokens", "tok0", "non_causal"})
      if (p.g["chunks"][i].contains(key)) {
        EXPECT_EQ(ours["chunks"][i][key], p.g["chunks"][i][key]) << name << " chunk " << i << " " << key;
      }
  EXPECT_EQ(ours.contains("positions"), p.g.contains("positions")) << name;
  if (p.g.contains("positions")) {
    EXPECT_EQ(ours["positions"], p.g["positions"]) << name;
  }
}

// M-RoPE positions as README 8.10 states mtmd assigns them, on a layout the fixtures do not
// have: two images (a 3 x 2 grid and a strip of 4 rows), text between and after, and rows
// past the prompt (generated text).
TEST(VisionMrope, PositionsFollowTheImageGrids) {
  ModelConfig cfg;
  cfg.mrope = true;
  std::vector<MediaChunk> media(2);
  media[0].pos0 = 3, media[0].n_rows = 6, media[0].grid_w = 3, media[0].grid_h = 2;
  media[1].pos0 = 12, media[1].n_rows = 4;  // no grid: one row of 4 (mtmd's nx = n_tokens, ny = 1)
  std::vector<int32_t> want;  // [20][4]
  auto add = [&](int32_t t, int32_t h, int32_t w) { want.insert(want.end(), {t, h, w, 0}); };
  for (int32_t r = 0; r < 3; ++r) add(r, r, r);
  for (int32_t i = 0; i < 6; ++i) add(3, 3 + i / 3, 3 + i % 3);  // the image takes max(3, 2) = 3 positions
  for (int32_t r = 9; r < 12; ++r) add(r - 3, r - 3, r - 3);
  for (int32_t i = 0; i < 4; ++i) add(9, 9, 9 + i);              // a strip takes as many positions as rows
  for (int32_t r = 16; r < 20; ++r) add(r - 3, r - 3, r - 3);
  EXPECT_EQ(mrope_positions(cfg, media, 0, 20), want);
  EXPECT_EQ(mrope_positions(cfg, media, 10, 14), std::vector<int32_t>(want.begin() + 40, want.begin() + 56));
  EXPECT_TRUE(mrope_positions(cfg, media, 0, 3).empty()) << "rows before any image rotate as text does";
  cfg.mrope = false;
  EXPECT_TRUE(mrope_positions(cfg, media, 0, 20).empty()) << "models without M-RoPE take state positions";
}

TEST(VisionImageUrl, DataFileAndRemoteUrls) {
  const auto png = read_bytes(kShared / "fixtures" / "images" / "shapes-256.png");
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;  // the PNG in base64, to go through a data: URL
  for (size_t i = 0; i < png.size(); i += 3) {
    const size_t left = png.size() - i;
    uint32_t v = uint32_t(png[i]) << 16;
    if (left > 1) v |= uint32_t(png[i + 1]) << 8;
    if (left > 2) v |= uint32_t(png[i + 2]);
    b64 += kAlphabet[(v >> 18) & 63];
    b64 += kAlphabet[(v >> 12) & 63];
    b64 += left > 1 ? kAlphabet[(v >> 6) & 63] : '=';
    b64 += left > 2 ? kAlphabet[v & 63] : '=';
  }
  EXPECT_EQ(server::load_image_url("data:image/png;base64," + b64, false), png);
  const std::string file_url = "file://" + (kShared / "fixtures" / "images" / "shapes-256.png").string();
  EXPECT_THROW(server::load_image_url(file_url, false), vision::ImageError);
  EXPECT_EQ(server::load_image_url(file_url, true), png);
  EXPECT_THROW(server::load_image_url("https://example.com/cat.png", true), vision::ImageError);
  EXPECT_THROW(server::load_image_url("data:image/png;base64,@@@", false), vision::ImageError);
  EXPECT_THROW(server::load_image_url("data:image/png,rawbytes", false), vision::ImageError);
}

// ---- Reuse across turns through the Engine ----

struct Turn {
  MediaPrompt mp;
  TurnResult res;
};

TurnRequest request_for(const MediaPrompt& mp, const std::vector<Token>& prompt) {
  TurnRequest req;
  req.prompt = prompt;
  req.media = mp.media;
  req.media_ends = mp.media_ends;
  req.max_tokens = 3;
  req.sampling.temperature = 0;
  req.record_logits = true;
  return req;
}

// The text of turn k after the first: the previous prompt, its reply, a new user message.
std::vector<Token> extend(const Tokenizer& tok, std::vector<Token> prompt, const std::vector<Token>& reply, int k) {
  prompt.insert(prompt.end(), reply.begin(), reply.end());
  const auto more = tok.encode("<|im_end|>\n<|im_start|>user\nAnd what about part " + std::to_string(k) +
                                   "?<|im_end|>\n<|im_start|>assistant\n",
                               false, true);
  prompt.insert(prompt.end(), more.begin(), more.end());
  return prompt;
}

TEST_P(VisionGolden, FourTurnsEncodeOnceAndMatchCold) {
  Pair p(GetParam());
  const std::string name = p.g["name"];
  ThreadPool pool(4);
  PrefixCache cache(size_t(256) << 20);
  Engine warm(*p.model, *p.tok, &cache, engine_options(), pool);
  const std::vector<std::vector<uint8_t>> images = {p.png};
  const auto mp = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, *p.vis, pool);
  const size_t n_entries = mp.images[0]->entries.size();
  std::vector<Token> prompt = mp.tokens;
  std::vector<Token> reply;
  for (int k = 1; k <= 4; ++k) {
    if (k > 1) prompt = extend(*p.tok, prompt, reply, k);
    // Rebuilt every turn, as a server would from the resent conversation.
    const auto mpk = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, *p.vis, pool);
    const auto res = warm.run_turn(request_for(mpk, prompt));
    reply = res.generated;
    std::printf("%s turn %d: %d positions, reused %d, encoder calls %llu\n", name.c_str(), k, res.prompt_tokens,
                res.reused, (unsigned long long)p.vis->encode_calls());
    if (k > 1) {
      EXPECT_GE(res.reused, p.boundary()) << name << " turn " << k << ": reuse must cover the image";
    }
    // Cold: no cache, a fresh encoder; logits of the computed tail must be bit-identical.
    vision::VisionContext cold_vis(p.mm_file, 0);
    const auto cold_mp = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, cold_vis, pool);
    Engine cold(*p.model, *p.tok, nullptr, engine_options(), pool);
    const auto cres = cold.run_turn(request_for(cold_mp, prompt));
    const size_t V = size_t(p.model->config().n_vocab), skip = size_t(res.reused) * V;
    ASSERT_EQ(cres.logits.size(), res.logits.size() + skip) << name;
    EXPECT_TRUE(std::equal(res.logits.begin(), res.logits.end(), cres.logits.begin() + long(skip)))
        << name << " turn " << k << ": warm logits differ from a cold run";
    EXPECT_EQ(res.generated, cres.generated) << name;
  }
  EXPECT_EQ(p.vis->encode_calls(), n_entries) << name << ": each image entry must be encoded exactly once";
}

TEST_P(VisionGolden, EditAfterImageRestoresMediaCheckpoint) {
  Pair p(GetParam());
  const std::string name = p.g["name"];
  ThreadPool pool(4);
  PrefixCache cache(size_t(256) << 20);
  Engine warm(*p.model, *p.tok, &cache, engine_options(), pool);
  const std::vector<std::vector<uint8_t>> images = {p.png};
  const auto mp = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, *p.vis, pool);
  warm.run_turn(request_for(mp, mp.tokens));
  const uint64_t calls = p.vis->encode_calls();
  // Same image, the question after it edited.
  std::string edited = p.text();
  const size_t at = edited.find("Which shapes");
  ASSERT_NE(at, std::string::npos);
  edited.replace(at, 12, "Name the shapes");
  const auto mp2 = build_media_prompt(*p.tok, p.model->config().n_embd, edited, images, *p.vis, pool);
  const auto res = warm.run_turn(request_for(mp2, mp2.tokens));
  std::printf("%s edit after the image: reused %d (media boundary %d), miss '%s'\n", name.c_str(), res.reused,
              p.boundary(), res.miss_reason.c_str());
  EXPECT_GE(res.reused, p.boundary()) << name;
  EXPECT_EQ(p.vis->encode_calls(), calls) << name << ": a cached image must not be encoded again";
  // Bit-identical to a cold run of the edited prompt.
  Engine cold(*p.model, *p.tok, nullptr, engine_options(), pool);
  const auto cres = cold.run_turn(request_for(mp2, mp2.tokens));
  const size_t skip = size_t(res.reused) * size_t(p.model->config().n_vocab);
  ASSERT_EQ(cres.logits.size(), res.logits.size() + skip);
  EXPECT_TRUE(std::equal(res.logits.begin(), res.logits.end(), cres.logits.begin() + long(skip))) << name;
}

TEST_P(VisionGolden, DifferentImageInSamePlaceIsNotReused) {
  Pair p(GetParam());
  const std::string name = p.g["name"];
  ThreadPool pool(4);
  PrefixCache cache(size_t(256) << 20);
  Engine warm(*p.model, *p.tok, &cache, engine_options(), pool);
  const std::vector<std::vector<uint8_t>> images = {p.png};
  const auto mp = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), images, *p.vis, pool);
  warm.run_turn(request_for(mp, mp.tokens));
  const uint64_t calls = p.vis->encode_calls();
  const std::vector<std::vector<uint8_t>> other = {to_png(flipped(vision::decode_image(p.png)), "other")};
  const auto mp2 = build_media_prompt(*p.tok, p.model->config().n_embd, p.text(), other, *p.vis, pool);
  ASSERT_EQ(mp2.tokens.size(), mp.tokens.size());
  const auto res = warm.run_turn(request_for(mp2, mp2.tokens));
  std::printf("%s different image: reused %d (first image position %d)\n", name.c_str(), res.reused, p.first_image());
  EXPECT_LE(res.reused, p.first_image()) << name << ": nothing past the image start may be reused";
  EXPECT_EQ(res.reused, p.first_image()) << name << ": the text before the image is reused (media-start checkpoint)";
  EXPECT_GT(p.vis->encode_calls(), calls) << name << ": the new image must be encoded";
  Engine cold(*p.model, *p.tok, nullptr, engine_options(), pool);
  const auto cres = cold.run_turn(request_for(mp2, mp2.tokens));
  const size_t skip = size_t(res.reused) * size_t(p.model->config().n_vocab);
  ASSERT_EQ(cres.logits.size(), res.logits.size() + skip);
  EXPECT_TRUE(std::equal(res.logits.begin(), res.logits.end(), cres.logits.begin() + long(skip))) << name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VisionGolden, ::testing::ValuesIn(vision_goldens()),
                         [](const auto& info) {
                           std::string n = fs::path(info.param).stem().string();
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
