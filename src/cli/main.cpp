// warmstart: command-line entry point. Subcommands are in the other files of src/cli/.
#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App root{"warmstart: a GGUF inference engine that never re-reads history it has already read"};
  root.set_version_flag("--version", std::string("warmstart ") + WARMSTART_VERSION);
  root.require_subcommand(1);
  std::vector<ws::cli::Command> commands = {
      ws::cli::add_run(root), ws::cli::add_logits(root), ws::cli::add_tokenize(root),
      ws::cli::add_quantize(root), ws::cli::add_replay(root), ws::cli::add_chat(root), ws::cli::add_serve(root),
      ws::cli::add_bench(root)};
  try {
    root.parse(argc, argv);
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
