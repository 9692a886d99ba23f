// Per-turn TTFT of a multi-turn chat with an image in turn 1, prefix cache on vs off,
// through the Engine (the server has no image input yet). Driven by bench/vision_bench.sh.
// usage: vision_bench LM.gguf MMPROJ.gguf IMAGE TURNS THREADS
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "cache/prefix_cache.h"
#include "engine/turn.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "engine/media_prompt.h"
#include "vision/context.h"

using namespace ws;

namespace {

void run(const char* label, const Model& model, const Tokenizer& tok, const gguf::File& mm,
         const std::vector<uint8_t>& image, int turns, ThreadPool& pool, bool cache_on) {
  vision::VisionContext vis(mm, cache_on ? size_t(256) << 20 : 0);
  PrefixCache cache(cache_on ? size_t(1024) << 20 : 0);
  EngineOptions eo;
  eo.memory.n_ctx = 8192;
  Engine engine(model, tok, &cache, eo, pool);
  const std::string first =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHere is a picture:\n"
      "<__media__>\nDescribe it.<|im_end|>\n<|im_start|>assistant\n";
  const std::vector<std::vector<uint8_t>> images = {image};
  std::vector<Token> prompt;
  for (int k = 1; k <= turns; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto mp = build_media_prompt(tok, model.config().n_embd, first, images, vis, pool);
    if (k == 1) prompt = mp.tokens;
    TurnRequest req;
    req.prompt = prompt;
    req.media = mp.media;
    req.media_ends = mp.media_ends;
    req.max_tokens = 32;
    req.sampling.temperature = 0;
    const auto res = engine.run_turn(req);
    const double ttft = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() -
                        (res.total_ms - res.ttft_ms);
    std::printf("%s turn %d: prompt %d, reused %d, encoder calls %llu, ttft %.1f ms\n", label, k, res.prompt_tokens,
                res.reused, (unsigned long long)vis.encode_calls(), ttft);
    std::fflush(stdout);
    prompt.insert(prompt.end(), res.generated.begin(), res.generated.end());
    const auto more = tok.encode("<|im_end|>\n<|im_start|>user\nTell me more about the colors in turn " +
                                     std::to_string(k + 1) + ".<|im_end|>\n<|im_start|>assistant\n",
                                 false, true);
    prompt.insert(prompt.end(), more.begin(), more.end());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s LM.gguf MMPROJ.gguf IMAGE TURNS THREADS\n", argv[0]);
    return 2;
  }
  try {
    const gguf::File lm = gguf::File::open(argv[1]);
    const gguf::File mm = gguf::File::open(argv[2]);
    const auto model = load_model(lm);
    const auto tok = Tokenizer::from_gguf(lm);
    std::ifstream in(argv[3], std::ios::binary);
    const std::vector<uint8_t> image{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    ThreadPool pool(std::stoi(argv[5]));
    run("cache-on ", *model, *tok, mm, image, std::stoi(argv[4]), pool, true);
    run("cache-off", *model, *tok, mm, image, std::stoi(argv[4]), pool, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
