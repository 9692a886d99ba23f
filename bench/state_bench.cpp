// Prefill and decode speed, peak RSS, and the time and size of one snapshot/restore.
// Never run in CI. Usage:
//   build/bench/state_bench MODEL.gguf [--prompt 512,2048] [--gen 32] [--threads N] [--keep K]
// --keep K: also takes K snapshots held alive at once, as a filling prefix cache does, and
// prints their mean, fastest and slowest time (fresh memory each, unlike the single one).
// Prompts are fixed pseudo-random ordinary token ids (ids below 8000 or n_vocab).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/eval.h"
#include "gguf/gguf.h"
#include "models/model.h"

using namespace ws;
using clock_type = std::chrono::steady_clock;

namespace {

double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--prompt 512,2048] [--gen 32] [--threads N]\n", argv[0]);
    return 2;
  }
  std::vector<int> prompts = {512, 2048};
  int n_gen = 32, threads = 2, keep = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--prompt")) prompts = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--gen")) n_gen = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--keep")) keep = std::atoi(argv[i + 1]);
  }
  try {
    const auto file = gguf::File::open(argv[1]);
    const auto model = load_model(file);
    ThreadPool pool(threads);
    const int32_t n_vocab = std::min(model->config().n_vocab, 8000);
    std::printf("model %s (%s), %d threads\n", argv[1], model->config().arch.c_str(), threads);
    for (int n_prompt : prompts) {
      std::vector<Token> tokens(static_cast<size_t>(n_prompt));  // [n_prompt] token ids
      uint64_t x = 12345;
      for (auto& t : tokens) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        t = Token((x >> 33) % uint64_t(n_vocab));
      }
      MemoryOptions mem;
      mem.n_ctx = n_prompt + n_gen + 1;
      SeqState state = model->make_state(mem);
      std::vector<float> logits;  // [n_vocab] of the last token
      auto t0 = clock_type::now();
      eval_tokens(*model, state, tokens, 512, LogitsMode::last, logits, pool);
      const double pp_s = since(t0);

      t0 = clock_type::now();
      const Snapshot snap = state.snapshot();
      const double snap_ms = since(t0) * 1e3;
      SeqState fresh = model->make_state(mem);
      t0 = clock_type::now();
      fresh.restore(snap);
      const double restore_ms = since(t0) * 1e3;

      t0 = clock_type::now();
      for (int i = 0; i < n_gen; ++i) {
        const Token next[1] = {Token(i % n_vocab)};
        eval_tokens(*model, fresh, next, 1, LogitsMode::last, logits, pool);
      }
      const double tg_s = since(t0);
      std::printf(
          "pp%-5d %8.2f tok/s | tg%d %7.2f tok/s | snapshot %7.3f ms restore %7.3f ms, %.2f MiB copied + %.2f MiB "
          "shared pages | state %.2f MiB | peak RSS %.0f MiB\n",
          n_prompt, n_prompt / pp_s, n_gen, n_gen / tg_s, snap_ms, restore_ms, snap.copied_bytes() / 1048576.0,
          snap.page_bytes() / 1048576.0, state.bytes() / 1048576.0, peak_rss_mb());
      std::fflush(stdout);
      if (keep > 0) {
        std::vector<Snapshot> held;  // [keep] snapshots alive at once
        double sum = 0, lo = 1e30, hi = 0;
        for (int k = 0; k < keep; ++k) {
          t0 = clock_type::now();
          held.push_back(state.snapshot());
          const double ms = since(t0) * 1e3;
          sum += ms, lo = std::min(lo, ms), hi = std::max(hi, ms);
        }
        std::printf("  %d snapshots held: mean %.2f ms, fastest %.2f, slowest %.2f | peak RSS %.0f MiB\n", keep,
                    sum / keep, lo, hi, peak_rss_mb());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
