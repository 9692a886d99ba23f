#include "cli/common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "models/config.h"

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
  const auto types = CLI::IsMember({"f16", "f32", "q8_0", "q4_0"});
  app->add_option("--kv-type", kv.both, "KV cache storage of K and V: f16 (default, as llama.cpp), f32, q8_0 or q4_0")
      ->check(types);
  app->add_option("--cache-type-k", kv.k, "K cache storage (overrides --kv-type for K; -ctk in serve)")->check(types);
  app->add_option("--cache-type-v", kv.v, "V cache storage (overrides --kv-type for V; -ctv in serve)")->check(types);
}

std::string CliKvType::name(bool keys) const {
  const std::string& own = keys ? k : v;
  return !own.empty() ? own : !both.empty() ? both : std::string();
}

KvTypes CliKvType::types(KvType fallback) const {
  auto pick = [&](bool keys) {
    const std::string n = name(keys);
    return n.empty() ? fallback : parse_kv_type(n).value_or(fallback);
  };
  return {pick(true), pick(false)};
}

int32_t CliContext::resolve(const LoadedModel& m) const {
  const int32_t usable = usable_context(m.file, m.model->config());
  if (ctx < 0) return std::min<int32_t>(4096, usable);
  if (ctx == 0) return usable;
  if (ctx > usable && !allow_beyond_training)
    throw std::runtime_error("context " + std::to_string(ctx) + " (-c) exceeds the model's trained context of " +
                             std::to_string(usable) + " tokens (beyond it output degrades); use -c " +
                             std::to_string(usable) + " or less (-c 0 = the trained context), or pass "
                             "--allow-ctx-beyond-training to use it anyway");
  if (ctx > usable)
    std::fprintf(stderr, "warmstart: -c %d exceeds the model's trained context of %d tokens "
                 "(--allow-ctx-beyond-training)\n", ctx, usable);
  return ctx;
}

void add_context_options(CLI::App* app, CliContext& c, const std::string& help, const std::string& names) {
  app->add_option(names, c.ctx, help + " (default: 4096, or the model's trained context if smaller; "
                  "0 = the trained context)")->check(CLI::NonNegativeNumber);
  app->add_flag("--allow-ctx-beyond-training", c.allow_beyond_training,
                "accept a -c above the model's trained context (output may degrade past it)");
}

size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  size_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : SIZE_MAX;
}

void check_context_memory(const Model& model, const MemoryOptions& mem, int slots, int32_t n_batch) {
  // make_state allocates only fixed buffers (recurrent); KV pages come as positions do.
  const size_t per_slot = model.make_state(mem).bytes_at_full_context(n_batch);
  const size_t total = per_slot * size_t(std::max(1, slots)), available = available_memory_bytes();
  if (total <= available) return;
  const auto gib = [](size_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2f GiB", double(b) / double(1ull << 30));
    return std::string(s);
  };
  throw std::runtime_error(
      "context " + std::to_string(mem.n_ctx) + " needs " + std::to_string(per_slot) + " bytes (" + gib(per_slot) +
      ") of KV/state per slot (" + std::to_string(total) + " bytes, " + gib(total) + ", for " +
      std::to_string(slots) + " slot(s)), " + std::to_string(available) + " bytes (" + gib(available) +
      ") available; lower -c" + (slots > 1 ? " or --parallel" : "") +
      (mem.kv_types.k == KvType::f32 || mem.kv_types.v == KvType::f32 ? ", or use --kv-type f16"
       : mem.kv_types.k == KvType::f16 || mem.kv_types.v == KvType::f16 ? ", or use --kv-type q8_0"
                                                                        : ""));
}

int32_t start_context(const LoadedModel& m, const CliContext& c, KvTypes kv, int slots, int32_t n_batch) {
  MemoryOptions mem;
  mem.n_ctx = c.resolve(m);
  mem.kv_types = kv;
  check_context_memory(*m.model, mem, slots, n_batch);
  return mem.n_ctx;
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

std::string shipped_model_path() {
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
