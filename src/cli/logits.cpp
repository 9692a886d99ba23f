// `warmstart logits`: evaluates a token sequence and writes the llama-golden-v1 report.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/eval.h"
#include "engine/logit_report.h"
#include "engine/vision_report.h"

namespace ws::cli {
namespace {

struct LogitsOptions {
  std::string model, tokens, tokens_file, text, out;
  CliKvType kv;  // f32 unless given
  bool special = false;
  int ubatch = 512;
  int threads = default_threads();
  int ctx = 0;  // 0 = just enough for the tokens
  int restore_at = -1;  // evaluate [0, K), snapshot, drop the state, restore, evaluate the rest
  std::string mmproj, positions;   // vision: projector GGUF, full-logit rows "33,34,97"
  std::vector<std::string> images; // vision: one per <__media__> marker in --text
};

// --mmproj: the text's media markers become image chunks; writes llama-golden-vision-v1.
int run_vision_logits(const LogitsOptions& o) {
  if (o.text.empty()) throw std::runtime_error("logits --mmproj needs --text with a <__media__> marker per --image");
  if (!o.special) throw std::runtime_error("logits --mmproj needs --special (image marker tokens are special tokens)");
  LoadedModel m = load(o.model);
  const gguf::File mm_file = gguf::File::open(o.mmproj);
  vision::VisionContext vis(mm_file, 0);
  std::vector<std::vector<uint8_t>> images;
  for (const auto& path : o.images) {
    const std::string bytes = read_file(path);
    images.emplace_back(bytes.begin(), bytes.end());
  }
  ThreadPool pool(o.threads);
  const auto ev = evaluate_multimodal(*m.model, *m.tokenizer, vis, o.text, images, o.ubatch, pool);
  ReportFiles files{o.model, o.mmproj, o.images.empty() ? "" : o.images[0], 0, 0};
  if (!images.empty()) {
    const auto first = vision::decode_image(images[0]);
    files.image_width = first.width;
    files.image_height = first.height;
  }
  std::vector<int32_t> positions;
  if (!o.positions.empty()) positions = parse_token_list(o.positions, "--positions");
  write_vision_report(o.out, ev, vis, m.model->config(), files, positions);
  std::fprintf(stderr, "%zu positions (%zu image chunks) -> %s.json, %s.f32\n", ev.prompt.tokens.size(),
               ev.embeddings.size(), o.out.c_str(), o.out.c_str());
  return 0;
}

// Evaluates tokens[0:K], takes a snapshot, destroys the live state, restores the snapshot
// into a fresh state and evaluates the rest: the output must equal a straight run.
std::vector<float> eval_with_restore(const Model& model, const MemoryOptions& mem, const std::vector<Token>& tokens,
                                     int32_t k, int32_t ubatch, ThreadPool& pool) {
  const size_t n_vocab = size_t(model.config().n_vocab);
  std::vector<float> head, tail;  // [K][n_vocab], [n-K][n_vocab]
  const std::span<const Token> all(tokens);
  Snapshot snap;
  {
    SeqState live = model.make_state(mem);
    eval_tokens(model, live, all.first(size_t(k)), ubatch, LogitsMode::all, head, pool);
    snap = live.snapshot();
  }
  SeqState fresh = model.make_state(mem);
  fresh.restore(snap);
  eval_tokens(model, fresh, all.subspan(size_t(k)), ubatch, LogitsMode::all, tail, pool);
  head.resize(size_t(k) * n_vocab);
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

int run_logits(const LogitsOptions& o) {
  LoadedModel m = load(o.model);
  std::vector<Token> tokens;
  if (!o.tokens.empty()) tokens = parse_token_list(o.tokens, "--tokens");
  else if (!o.tokens_file.empty()) tokens = parse_token_list(read_file(o.tokens_file), o.tokens_file);
  else tokens = m.tokenizer->encode(o.text, /*add_special=*/true, o.special);
  if (tokens.empty()) throw std::runtime_error("no tokens to evaluate");
  MemoryOptions mem;
  mem.n_ctx = o.ctx > 0 ? o.ctx : int32_t(tokens.size());
  mem.kv_types = o.kv.types(KvType::f32);
  if (int64_t(tokens.size()) > mem.n_ctx)
    throw std::runtime_error(std::to_string(tokens.size()) + " tokens do not fit in a context of " +
                             std::to_string(mem.n_ctx) + " (raise -c)");
  ThreadPool pool(o.threads);
  std::vector<float> logits;  // [n][n_vocab]
  if (o.restore_at >= 0) {
    if (o.restore_at > int(tokens.size()))
      throw std::runtime_error("--restore-at " + std::to_string(o.restore_at) + " is past the " +
                               std::to_string(tokens.size()) + " tokens");
    logits = eval_with_restore(*m.model, mem, tokens, o.restore_at, o.ubatch, pool);
  } else {
    SeqState state = m.model->make_state(mem);
    eval_tokens(*m.model, state, tokens, o.ubatch, LogitsMode::all, logits, pool);
  }
  const auto probe = make_probe("warmstart", tokens, logits, m.model->config().n_vocab, o.ubatch);
  write_golden(o.out, probe, o.model);
  std::fprintf(stderr, "%zu tokens, mean NLL %.6f -> %s.json, %s.logits.f32\n", tokens.size(), probe.mean_nll,
               o.out.c_str(), o.out.c_str());
  return 0;
}

}  // namespace

Command add_logits(CLI::App& root) {
  auto o = std::make_shared<LogitsOptions>();
  auto* app = root.add_subcommand("logits", "Evaluate tokens and write logits in the llama-golden-v1 format");
  app->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* tok = app->add_option("--tokens", o->tokens, "token ids, e.g. 1,2,3");
  auto* tokf = app->add_option("--tokens-file", o->tokens_file, "file of token ids (commas and/or whitespace)");
  auto* text = app->add_option("--text", o->text, "text to tokenize (BOS/EOS as the GGUF says)");
  tok->excludes(tokf)->excludes(text);
  tokf->excludes(text);
  app->add_flag("--special", o->special, "parse special tokens in --text");
  app->add_option("--ubatch", o->ubatch, "micro-batch size")->check(CLI::PositiveNumber);
  app->add_option("-t,--threads", o->threads, "threads")->check(CLI::PositiveNumber);
  app->add_option("-c,--ctx", o->ctx, "context size (default: the number of tokens)");
  add_kv_type_option(app, o->kv);
  app->add_option("--restore-at", o->restore_at,
                  "evaluate tokens[0:K], snapshot, destroy, restore into a fresh state, evaluate the rest")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--out", o->out, "output prefix: PREFIX.json and PREFIX.logits.f32 (vision: PREFIX.f32)")->required();
  app->add_option("--mmproj", o->mmproj, "vision projector GGUF: write the llama-golden-vision-v1 format");
  app->add_option("--image", o->images, "image file (PNG/JPEG) for each <__media__> marker in --text");
  app->add_option("--positions", o->positions, "vision: positions of the full logit rows, e.g. 33,34,97");
  return {app, [o] {
            if (o->tokens.empty() && o->tokens_file.empty() && o->text.empty())
              throw std::runtime_error("logits: give --tokens, --tokens-file or --text");
            if (!o->mmproj.empty()) return run_vision_logits(*o);
            if (!o->images.empty()) throw std::runtime_error("logits: --image needs --mmproj");
            return run_logits(*o);
          }};
}

}  // namespace ws::cli
