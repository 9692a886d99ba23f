// Helpers shared by the CLI subcommands.
#pragma once
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "cache/prefix_cache.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ws::cli {

// A GGUF file with the model and tokenizer built from it (the model points into the file).
struct LoadedModel {
  gguf::File file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};
LoadedModel load(const std::string& path);

// A quarter of physical memory, at most 8 GiB: room for the model and the OS.
double default_cache_budget_mb();

inline int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

// KV cache storage for the commands that serve, generate or measure: --kv-type for K and
// V, or llama-server's --cache-type-k / --cache-type-v (-ctk / -ctv in serve) one by one:
// f16 (the default, as llama.cpp: half the memory and bandwidth of f32), f32, q8_0 or
// q4_0 (a half or a quarter again). A warm turn still equals a cold run, which uses the
// same types. `logits` defaults to f32, the type of the goldens.
struct CliKvType {
  std::string both, k, v;  // as given; empty: not given
  KvTypes types(KvType fallback = KvType::f16) const;
  std::string name(bool keys) const;  // the type K (V) is stored as, as named on the command line
};
void add_kv_type_option(CLI::App* app, CliKvType& kv);

// -c / --ctx and --allow-ctx-beyond-training (run, chat, serve, replay). `ctx`: -1 when not
// given (the default: 4096, or the model's context if smaller), 0 for the model's context.
struct CliContext {
  int ctx = -1;
  bool allow_beyond_training = false;
  // The context to use with `m`; throws, naming both numbers and the flag, when an explicit
  // -c exceeds the model's usable context (usable_context) without the override.
  int32_t resolve(const LoadedModel& m) const;
};
void add_context_options(CLI::App* app, CliContext& c, const std::string& help,
                         const std::string& names = "-c,--ctx");

// Throws at start-up, naming the bytes, unless `slots` sequences of `model` filled to
// mem.n_ctx (ingested in batches of n_batch) fit in the memory available now: an
// impossible -c fails here instead of being killed for memory mid-request.
void check_context_memory(const Model& model, const MemoryOptions& mem, int slots, int32_t n_batch);
size_t available_memory_bytes();  // MemAvailable (/proc/meminfo), else free physical pages
// The start-up of a command that takes -c: resolve() then check_context_memory().
int32_t start_context(const LoadedModel& m, const CliContext& c, KvTypes kv, int slots, int32_t n_batch);

// --checkpoint-every and --checkpoint-mib-per-token (serve, replay): CheckpointPolicy's knobs.
struct CliCheckpoints {
  int every = 512;
  double mib_per_token = 1;
  CheckpointPolicy policy() const;
};
void add_checkpoint_options(CLI::App* app, CliCheckpoints& c);

// Parses decimal ids separated by commas and/or whitespace; throws on anything else.
std::vector<Token> parse_token_list(const std::string& text, const std::string& source);
std::string read_file(const std::string& path);  // verbatim; throws naming the file

// The model shipped with warmstart (models/warmstart-chat.gguf), used when no -m is given:
// looked up next to the executable (<exe dir>/../models, <exe dir>/models) and in the
// source tree this binary was built from. Throws a clear error when none exists.
std::string shipped_model_path();

}  // namespace ws::cli
