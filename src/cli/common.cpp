#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ws::cli {

LoadedModel load(const std::string& path) {
  LoadedModel m{gguf::File::open(path), nullptr, nullptr};
  m.model = load_model(m.file);
  m.tokenizer = Tokenizer::from_gguf(m.file);
  return m;
}

std::vector<Token> parse_token_list(const std::string& text, const std::string& source) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == ',' || std::isspace(c)) {
      ++i;
      continue;
    }
    if (!std::isdigit(c))
      throw std::runtime_error(source + ": unexpected character '" + std::string(1, char(c)) + "' at offset " +
                               std::to_string(i) + " (expected decimal token ids separated by commas or spaces)");
    size_t j = i;
    long long v = 0;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) {
      v = v * 10 + (text[j] - '0');
      if (v > INT32_MAX) throw std::runtime_error(source + ": token id too large at offset " + std::to_string(i));
      ++j;
    }
    out.push_back(Token(v));
    i = j;
  }
  return out;
}

void add_kv_type_option(CLI::App* app, CliKvType& kv) {
  app->add_option("--kv-type", kv.name, "KV cache storage: f16 (default, as llama.cpp) or f32")
      ->check(CLI::IsMember({"f16", "f32"}));
}

CheckpointPolicy CliCheckpoints::policy() const {
  CheckpointPolicy p;
  p.every_n = every;
  p.copy_bytes_per_token = size_t(mib_per_token * 1024 * 1024);
  return p;
}

void add_checkpoint_options(CLI::App* app, CliCheckpoints& c) {
  app->add_option("--checkpoint-every", c.every, "also checkpoint every N prompt tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--checkpoint-mib-per-token", c.mib_per_token,
                  "recurrent models: checkpoints at least one token apart per N MiB a snapshot copies (0 = "
                  "only the 16-token spacing every model has)")
      ->check(CLI::NonNegativeNumber);
}

double default_cache_budget_mb() {
  const double total_mb = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / 1048576.0;
  return std::min(8192.0, total_mb / 4);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string embedded_model_path() {
  namespace fs = std::filesystem;
  const char* name = "warmstart-chat.gguf";
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / "models" / name);  // build/warmstart -> models/
    candidates.push_back(exe.parent_path() / "models" / name);
  }
  // The source tree (this file is <src>/src/cli/common.cpp; CMake passes absolute paths).
  const fs::path source = fs::path(__FILE__);
  if (source.is_absolute()) candidates.push_back(source.parent_path() / ".." / ".." / "models" / name);
  std::string tried;
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) {
      const fs::path canonical = fs::weakly_canonical(p, ec);
      return ec ? p.string() : canonical.string();
    }
    tried += "\n  " + p.lexically_normal().string();
  }
  throw std::runtime_error(std::string("the embedded model ") + name + " was not found; looked in:" + tried +
                           "\n(pass a model with -m)");
}

}  // namespace ws::cli
