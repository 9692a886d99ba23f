// `warmstart run`: generates text from a prompt, streaming it to stdout.
#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/eval.h"
#include "engine/sampling.h"
#include "engine/turn.h"
#include "engine/media_prompt.h"

namespace ws::cli {
namespace {

struct RunOptions {
  std::string model, prompt, tokens;
  int n_predict = 128;
  int threads = default_threads();
  CliContext context;
  int ctx = 0;  // context.resolve()d once the model is loaded
  CliKvType kv;
  int ubatch = 512;
  SamplingParams sampling;
  std::string mmproj;
  std::vector<std::string> images;  // one per <__media__> marker (prepended when the prompt has none)
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --mmproj/--image: the prompt's media markers become image chunks; generation through
// the engine (no cache), which feeds image embeddings at their positions.
int run_with_images(RunOptions o) {
  if (o.mmproj.empty()) throw std::runtime_error("run: --image needs --mmproj (the vision projector GGUF)");
  if (!o.tokens.empty()) throw std::runtime_error("run: --image works with -p, not --tokens");
  LoadedModel m = load(o.model);
  o.ctx = start_context(m, o.context, o.kv.types(), 1, o.ubatch);
  const gguf::File mm_file = gguf::File::open(o.mmproj);
  vision::VisionContext vis(mm_file, 0);
  std::string text = o.prompt;
  if (text.find(kMediaMarker) == std::string::npos)
    for (size_t i = 0; i < o.images.size(); ++i) text = std::string(kMediaMarker) + "\n" + text;
  std::vector<std::vector<uint8_t>> images;
  for (const auto& path : o.images) {
    const std::string bytes = read_file(path);
    images.emplace_back(bytes.begin(), bytes.end());
  }
  ThreadPool pool(o.threads);
  const auto mp = build_media_prompt(*m.tokenizer, m.model->config().n_embd, text, images, vis, pool);
  if (int64_t(mp.tokens.size()) + 1 > o.ctx)
    throw std::runtime_error("the prompt with its images has " + std::to_string(mp.tokens.size()) +
                             " positions; the context holds " + std::to_string(o.ctx) + " (raise -c)");
  EngineOptions eo;
  eo.memory.n_ctx = o.ctx;
  eo.memory.kv_types = o.kv.types();
  eo.n_ubatch = o.ubatch;
  Engine engine(*m.model, *m.tokenizer, nullptr, eo, pool);
  TurnRequest req;
  req.prompt = mp.tokens;
  req.media = mp.media;
  req.media_ends = mp.media_ends;
  req.max_tokens = o.n_predict;
  req.sampling = o.sampling;
  StreamDecoder stream(*m.tokenizer);
  const auto res = engine.run_turn(req, [&](Token t) {
    const std::string s = stream.push(t);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  const std::string rest = stream.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fprintf(stderr, "prompt: %d positions (%zu image chunks, %llu encoded), ttft %.1f ms, %zu tokens generated\n",
               res.prompt_tokens, mp.media.size(), (unsigned long long)vis.encode_calls(), res.ttft_ms,
               res.generated.size());
  return 0;
}

int run_generate(RunOptions o) {
  if (!o.images.empty() || !o.mmproj.empty()) return run_with_images(o);
  LoadedModel m = load(o.model);
  o.ctx = start_context(m, o.context, o.kv.types(), 1, o.ubatch);
  const Tokenizer& tok = *m.tokenizer;
  const std::vector<Token> prompt = o.tokens.empty()
                                        ? tok.encode(o.prompt, /*add_special=*/true, /*parse_special=*/true)
                                        : parse_token_list(o.tokens, "--tokens");
  if (prompt.empty()) throw std::runtime_error("the prompt is empty after tokenization");
  if (int64_t(prompt.size()) + 1 > o.ctx)
    throw std::runtime_error("the prompt has " + std::to_string(prompt.size()) + " tokens; the context holds " +
                             std::to_string(o.ctx) + " (raise -c)");
  MemoryOptions mem;
  mem.n_ctx = o.ctx;
  mem.kv_types = o.kv.types();
  ThreadPool pool(o.threads);
  SeqState state = m.model->make_state(mem);
  Sampler sampler(o.sampling);
  for (Token t : prompt) sampler.accept(t);

  std::vector<float> logits;  // [n_vocab] of the last evaluated token
  const auto t_prompt = std::chrono::steady_clock::now();
  eval_tokens(*m.model, state, prompt, o.ubatch, LogitsMode::last, logits, pool);
  const double prompt_s = seconds_since(t_prompt);

  StreamDecoder stream(tok);
  int n_gen = 0;
  const auto t_gen = std::chrono::steady_clock::now();
  while (n_gen < o.n_predict && state.position() < o.ctx) {
    const Token next = sampler.sample(logits);
    if (tok.is_eog(next)) break;
    sampler.accept(next);
    ++n_gen;
    const std::string text = stream.push(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (n_gen == o.n_predict || state.position() >= o.ctx) break;
    const Token one[1] = {next};
    eval_tokens(*m.model, state, one, 1, LogitsMode::last, logits, pool);
  }
  const std::string rest = stream.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  const double gen_s = seconds_since(t_gen);
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.2f tokens/s)\n", prompt.size(), prompt_s,
               double(prompt.size()) / prompt_s);
  std::fprintf(stderr, "generation: %d tokens in %.3f s (%.2f tokens/s)\n", n_gen, gen_s,
               n_gen > 0 ? double(n_gen) / gen_s : 0.0);
  return 0;
}

}  // namespace

Command add_run(CLI::App& root) {
  auto o = std::make_shared<RunOptions>();
  auto* app = root.add_subcommand("run", "Generate text from a prompt");
  app->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* prompt = app->add_option("-p,--prompt", o->prompt, "prompt text (special tokens are parsed)");
  auto* tokens = app->add_option("--tokens", o->tokens, "prompt as token ids, e.g. 1,2,3 (for benchmarks)");
  prompt->excludes(tokens);
  app->add_option("-n,--n-predict", o->n_predict, "tokens to generate")->check(CLI::NonNegativeNumber);
  app->add_option("--temp", o->sampling.temperature, "temperature (0 = greedy)");
  app->add_option("--top-k", o->sampling.top_k, "top-k (0 = off)");
  app->add_option("--top-p", o->sampling.top_p, "top-p (1 = off)");
  app->add_option("--min-p", o->sampling.min_p, "min-p (0 = off)");
  app->add_option("--repeat-penalty", o->sampling.repeat_penalty, "repetition penalty (1 = off)");
  app->add_option("--repeat-last-n", o->sampling.repeat_last_n, "tokens the penalty looks back");
  app->add_option("-s,--seed", o->sampling.seed, "random seed");
  app->add_option("-t,--threads", o->threads, "threads")->check(CLI::PositiveNumber);
  add_context_options(app, o->context, "context size");
  add_kv_type_option(app, o->kv);
  app->add_option("--ubatch", o->ubatch, "prompt micro-batch size")->check(CLI::PositiveNumber);
  app->add_option("--mmproj", o->mmproj, "vision projector GGUF (for --image)");
  app->add_option("--image", o->images, "image file (PNG/JPEG); its chunks go at each <__media__> marker in -p");
  return {app, [o] {
            if (o->prompt.empty() && o->tokens.empty()) throw std::runtime_error("run: give -p PROMPT or --tokens IDS");
            return run_generate(*o);
          }};
}

}  // namespace ws::cli
