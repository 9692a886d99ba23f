// Each `warmstart` subcommand lives in its own file and registers itself here.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace ws::cli {

struct Command {
  CLI::App* app;             // the parsed subcommand
  std::function<int()> run;  // called once after parsing; returns the exit code
};

Command add_run(CLI::App& root);
Command add_logits(CLI::App& root);
Command add_tokenize(CLI::App& root);
Command add_quantize(CLI::App& root);
Command add_replay(CLI::App& root);
Command add_chat(CLI::App& root);
Command add_serve(CLI::App& root);
Command add_bench(CLI::App& root);

}  // namespace ws::cli
