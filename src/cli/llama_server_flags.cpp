#include "cli/llama_server_flags.h"

#include <initializer_list>
#include <stdexcept>
#include <string_view>

namespace ws::cli {
namespace {

enum class Action { note, refuse };
enum class Arity { none, one, maybe_on_off };  // maybe_on_off: -fa [on|off|auto]

struct Flag {
  std::initializer_list<std::string_view> names;
  Arity arity;
  Action action;
  std::string_view why;  // note: why it changes nothing; refuse: why it cannot be honoured
};

// llama-server's flags by what warmstart does with them (its README, "Server-specific
// params" and the common params it shares with llama-cli). A short name stands for the
// first long name after it.
const Flag kFlags[] = {
    {{"--jinja"}, Arity::none, Action::note, "chat templates are always rendered as Jinja"},
    {{"-fa", "--flash-attn"}, Arity::maybe_on_off, Action::note,
     "attention always runs as one fused pass over the cache on the CPU"},
    {{"-cb", "--cont-batching"}, Arity::none, Action::note, "the slots' forward passes are always batched together"},
    {{"--metrics", "--slots", "--props"}, Arity::none, Action::note, "this endpoint is always served"},
    {{"--no-webui"}, Arity::none, Action::note, "warmstart has no web UI"},
    {{"--no-warmup"}, Arity::none, Action::note, "warmstart runs no warm-up pass"},
    {{"-tb", "--threads-batch"}, Arity::one, Action::note, "prompt and generation share the -t threads"},
    {{"-ngl", "--gpu-layers", "--n-gpu-layers"}, Arity::one, Action::note,
     "warmstart runs on the CPU: every layer stays there"},
    {{"--no-mmap"}, Arity::none, Action::note, "weights are repacked into their own memory at load anyway"},
    {{"--cache-reuse"}, Arity::one, Action::note,
     "prompt prefixes are reused through the prefix cache (--cache-budget-mb) without a minimum chunk"},
    {{"-v", "--verbose", "--log-verbose", "--log-disable", "--log-colors"}, Arity::none, Action::note,
     "the server logs one line per start and stop; requests are counted in /metrics"},
    {{"--lora", "--lora-scaled", "--lora-init-without-apply", "--control-vector"}, Arity::one, Action::refuse,
     "LoRA adapters and control vectors are not supported"},
    {{"-md", "--model-draft", "-ngld", "--gpu-layers-draft", "--draft", "--draft-max", "--draft-min",
      "--draft-p-min", "-cd", "--ctx-size-draft"},
     Arity::one, Action::refuse, "speculative decoding is not supported"},
    {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-mu", "--model-url", "-hft", "--hf-token"}, Arity::one,
     Action::refuse, "warmstart does not download models: pass a local GGUF file with -m"},
    {{"--ssl-key-file", "--ssl-cert-file"}, Arity::one, Action::refuse,
     "TLS is not built in: put a TLS-terminating reverse proxy in front"},
    {{"--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx",
      "--yarn-ext-factor", "--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast"},
     Arity::one, Action::refuse, "RoPE overrides are not supported: the GGUF's own settings are used"},
    {{"--grammar", "--grammar-file", "--json-schema", "-j"}, Arity::one, Action::refuse,
     "server-wide grammars are not supported: send grammar or json_schema / response_format per request"},
    {{"--temp", "--top-k", "--top-p", "--min-p", "-s", "--seed", "--repeat-penalty", "--repeat-last-n",
      "--presence-penalty", "--frequency-penalty", "--samplers", "--typical", "--mirostat"},
     Arity::one, Action::refuse, "server-wide sampling defaults are not supported: set the field per request"},
    {{"--mlock"}, Arity::none, Action::refuse, "locking the weights in RAM is not supported"},
    {{"--numa"}, Arity::one, Action::refuse, "NUMA placement is not supported"},
    {{"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu", "-dev", "--device"}, Arity::one,
     Action::refuse, "warmstart runs on the CPU only"},
    {{"-to", "--timeout"}, Arity::one, Action::refuse,
     "use --read-timeout (seconds a client may stall before it is cut off)"},
    {{"--threads-http"}, Arity::one, Action::refuse, "connection threads follow --max-connections"},
    {{"--api-key-file"}, Arity::one, Action::refuse, "pass the key with --api-key"},
};

const Flag* find_flag(std::string_view name) {
  for (const Flag& f : kFlags)
    for (std::string_view n : f.names)
      if (n == name) return &f;
  return nullptr;
}

void take(const std::string& flag, const Flag& f, const std::string& value, LlamaServerExtras& out) {
  switch (f.action) {
    case Action::note: out.notes.push_back(flag + " accepted, changes nothing: " + std::string(f.why)); break;
    case Action::refuse: throw std::runtime_error("serve: llama-server's " + flag + " is refused: " + std::string(f.why));
  }
}

}  // namespace

std::vector<std::string> expand_llama_server_short_flags(std::vector<std::string> args) {
  for (auto& a : args) {
    if (a.size() < 3 || a[0] != '-' || a[1] == '-') continue;
    if (a == "-np") a = "--parallel";
    else if (a == "-ub") a = "--ubatch-size";
    else if (a == "-ctk") a = "--cache-type-k";
    else if (a == "-ctv") a = "--cache-type-v";
    else if (const Flag* f = find_flag(a)) {
      // A short name stands for the first long name after it in its entry.
      bool seen = false;
      for (std::string_view n : f->names) {
        seen = seen || n == a;
        if (seen && n.starts_with("--")) {
          a = std::string(n);
          break;
        }
      }
    }
  }
  return args;
}

LlamaServerExtras parse_llama_server_extras(const std::vector<std::string>& rest) {
  LlamaServerExtras out;
  for (size_t i = 0; i < rest.size(); ++i) {
    std::string flag = rest[i], value;
    bool has_value = false;
    if (const size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1), flag = flag.substr(0, eq), has_value = true;
    }
    const Flag* f = find_flag(flag);
    if (!f) throw std::runtime_error("serve: unknown option or argument '" + rest[i] + "'");
    if (f->action == Action::refuse) take(flag, *f, value, out);  // before reading a value it may lack
    if (f->arity == Arity::one && !has_value) {
      if (i + 1 >= rest.size()) throw std::runtime_error("serve: " + flag + " needs a value");
      value = rest[++i], has_value = true;
    }
    if (f->arity == Arity::maybe_on_off && !has_value && i + 1 < rest.size() &&
        (rest[i + 1] == "on" || rest[i + 1] == "off" || rest[i + 1] == "auto"))
      value = rest[++i];
    if (f->arity == Arity::none && has_value) throw std::runtime_error("serve: " + flag + " takes no value");
    take(flag, *f, value, out);
  }
  return out;
}

}  // namespace ws::cli
