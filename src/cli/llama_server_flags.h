// llama-server's command-line flags that `warmstart serve` does not declare itself: the
// multi-letter short names CLI11 cannot take (-np, -ub, -ctk...) and the flags whose
// meaning warmstart lacks. Each is taken into the options, accepted with a note printed at
// startup (it changes nothing here, and the note says why), or refused by name with the
// reason. Nothing is dropped silently.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace ws::cli {

// CLI11 reads "-ctk" as "-c tk" and "-md" as "-m d": before parsing, llama-server's
// multi-letter short names (-np, -ub, -ctk, -fa, -ngl, -md...) become their long names.
std::vector<std::string> expand_llama_server_short_flags(std::vector<std::string> args);

struct LlamaServerExtras {
  std::vector<std::string> notes;  // flags accepted that change nothing, with why
};

// `rest`: what CLI11 left over, in order. Throws std::runtime_error naming the flag for a
// refused or unknown one, or a bad value.
LlamaServerExtras parse_llama_server_extras(const std::vector<std::string>& rest);

}  // namespace ws::cli
