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

// --kv-type for the commands that serve or generate: F16 by default, as llama.cpp (half
// the memory and bandwidth of F32 at long contexts; a warm turn still equals a cold run,
// which uses the same type). `logits` keeps F32, the type of the goldens.
struct CliKvType {
  std::string name = "f16";
  KvType type() const { return name == "f32" ? KvType::f32 : KvType::f16; }
};
void add_kv_type_option(CLI::App* app, CliKvType& kv);

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
std::string embedded_model_path();

}  // namespace ws::cli
