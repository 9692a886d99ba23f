// warmstart: command-line entry point. Subcommands are in the other files of src/cli/.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/llama_server_flags.h"

namespace {

// A forward pass allocates and frees activation buffers of a few MB per layer. glibc's
// defaults hand such buffers back to the kernel (munmap, heap trim) and fault them in again
// zeroed on the next layer: a quarter of a million page faults and ~10% of the CPU time of
// a 512-token prefill (bench/results/perf-notes-20261201.md). Keeping them in the heap
// costs no peak RSS: the next layer reuses the same memory.
void keep_activation_buffers_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);   // below 32 MiB: from the heap, not a fresh mmap
  mallopt(M_TRIM_THRESHOLD, 128 << 20);  // keep up to 128 MiB of free heap for reuse
}

}  // namespace

int main(int argc, char** argv) {
  keep_activation_buffers_in_heap();
  CLI::App root{"warmstart: a GGUF inference engine that never re-reads history it has already read"};
  root.set_version_flag("--version", std::string("warmstart ") + WARMSTART_VERSION);
  root.require_subcommand(1);
  std::vector<ws::cli::Command> commands = {
      ws::cli::add_run(root), ws::cli::add_logits(root), ws::cli::add_tokenize(root),
      ws::cli::add_quantize(root), ws::cli::add_replay(root), ws::cli::add_chat(root), ws::cli::add_serve(root),
      ws::cli::add_bench(root)};
  std::vector<std::string> args(argv, argv + argc);
  if (argc > 1 && args[1] == "serve") args = ws::cli::expand_llama_server_short_flags(std::move(args));
  std::vector<char*> arg_ptrs;  // [argc] pointers into args
  for (auto& a : args) arg_ptrs.push_back(a.data());
  try {
    root.parse(int(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    return root.exit(e);
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 1;
}
