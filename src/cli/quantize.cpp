// `warmstart quantize IN.gguf OUT.gguf TYPE [-t THREADS]`: rewrites a model with its weight
// matrices quantized, choosing per-tensor types the way llama-quantize does (see
// tensor/quantize_policy.h), and writing the file in llama-quantize's layout.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "tensor/quant.h"
#include "tensor/quantize_policy.h"

namespace ws::cli {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

struct QuantizeOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string token_embd_type;  // --token-embedding-type, empty: the mix's choice
  std::string output_type;      // --output-tensor-type
  int threads = 0;
};

// A tensor type named on the command line (F16, BF16, Q8_0, ...), or none for "".
std::optional<DType> tensor_type_option(const std::string& name, const char* option) {
  if (name.empty()) return std::nullopt;
  const auto t = dtype_from_name(name);
  if (!t || *t == DType::q8_k)
    throw std::runtime_error(std::string(option) + ": unknown tensor type '" + name +
                             "' (expected F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K)");
  return t;
}

ModelFacts model_facts(const gguf::File& f) {
  ModelFacts m;
  m.arch = f.get_string("general.architecture");
  const std::string p = m.arch + ".";
  m.n_layer = int(f.get_int(p + "block_count", 0));
  m.n_expert = int(f.get_int(p + "expert_count", 0));
  // head counts may be per-layer arrays; the first entry is enough for the 70B check.
  auto first_int = [&](const std::string& key) -> int {
    const gguf::Value* v = f.find(key);
    if (!v) return 0;
    if (v->type == gguf::ValueType::array) {
      const auto ints = f.get_ints(key);
      return ints.empty() ? 0 : int(ints[0]);
    }
    return int(v->as_int());
  };
  m.n_head = first_int(p + "attention.head_count");
  m.n_head_kv = first_int(p + "attention.head_count_kv");
  if (m.n_layer == 0) {  // no block_count: count the blocks present
    for (const auto& t : f.tensors()) {
      int layer = -1;
      if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1) m.n_layer = std::max(m.n_layer, layer + 1);
    }
  }
  return m;
}

// Converts one tensor to `to`, splitting its rows over `threads` workers.
std::vector<uint8_t> convert_tensor(const gguf::TensorInfo& t, DType to, int threads) {
  const int64_t n_per_row = t.ne.empty() ? 1 : t.ne[0];
  const int64_t nrows = t.rows();
  const size_t in_row = row_bytes(t.type, n_per_row);
  const size_t out_row = row_bytes(to, n_per_row);
  std::vector<uint8_t> out(size_t(nrows) * out_row);  // [nrows * out_row] bytes of type `to`
  auto work = [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(n_per_row));  // [n_per_row] f32: one dequantized row
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(t.type, t.data + size_t(r) * in_row, row.data(), n_per_row);
      quantize_row(to, row.data(), out.data() + size_t(r) * out_row, n_per_row);
    }
  };
  const int n_threads = int(std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, nrows / 16)));
  if (n_threads == 1) {
    work(0, nrows);
    return out;
  }
  std::vector<std::thread> pool;
  const int64_t per = (nrows + n_threads - 1) / n_threads;
  for (int i = 0; i < n_threads; ++i) {
    const int64_t r0 = i * per, r1 = std::min(nrows, r0 + per);
    if (r0 < r1) pool.emplace_back(work, r0, r1);
  }
  for (auto& th : pool) th.join();
  return out;
}

void check_convertible(const gguf::TensorInfo& t, DType to) {
  const bool src_plain = t.type == DType::f32 || t.type == DType::f16 || t.type == DType::bf16;
  if (!src_plain) {
    // llama-quantize refuses this too by default: requantizing compounds the error.
    throw std::runtime_error("tensor '" + t.name + "' is already " + dtype_name(t.type) +
                             "; converting it to " + dtype_name(to) +
                             " would requantize. Quantize from an F32/F16/BF16 model instead.");
  }
}

int run_quantize(const QuantizeOptions& o) {
  const auto target = parse_quant_target(o.type);
  if (!target)
    throw std::runtime_error("unknown quantization type '" + o.type + "' (expected one of: " +
                             quant_target_names() + ")");
  if (o.input == o.output) throw std::runtime_error("input and output must be different files");
  const gguf::File in = gguf::File::open(o.input);
  const ModelFacts facts = model_facts(in);

  std::vector<std::string> names;
  for (const auto& t : in.tensors()) names.push_back(t.name);
  const auto order = llama_tensor_order(names);
  std::vector<TensorDesc> descs;
  for (size_t i : order) descs.push_back({in.tensors()[i].name, in.tensors()[i].ne, in.tensors()[i].type});
  const TypeOverrides overrides{tensor_type_option(o.token_embd_type, "--token-embedding-type"),
                                tensor_type_option(o.output_type, "--output-tensor-type")};
  const auto plans = plan_tensor_types(descs, *target, facts, overrides);

  gguf::Writer w;
  w.copy_metadata(in);
  w.set_u32("general.quantization_version", kQuantizationVersion);
  w.set_u32("general.file_type", uint32_t(target->ftype));
  for (const char* k : {"split.no", "split.count", "split.tensors.count"}) w.remove(k);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& t = in.tensors()[order[k]];
    if (t.type != plans[k].type) check_convertible(t, plans[k].type);
    if (plans[k].fallback) std::fprintf(stderr, "warning: %s: %s\n", t.name.c_str(), plans[k].note.c_str());
    w.add_tensor(t.name, t.ne, plans[k].type);
  }

  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  w.open(o.output);
  uint64_t bytes_in = 0, bytes_out = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& t = in.tensors()[order[k]];
    const DType to = plans[k].type;
    bytes_in += t.nbytes;
    if (t.type == to) {
      w.write_tensor({t.data, size_t(t.nbytes)});
      bytes_out += t.nbytes;
      continue;
    }
    const auto data = convert_tensor(t, to, threads);
    w.write_tensor(data);
    bytes_out += data.size();
    std::fprintf(stderr, "[%3zu/%3zu] %-36s %5s -> %-5s\n", k + 1, order.size(), t.name.c_str(),
                 dtype_name(t.type), dtype_name(to));
  }
  w.finish();
  std::fprintf(stderr, "quantized %s -> %s (%s): %.2f MiB -> %.2f MiB\n", o.input.c_str(),
               o.output.c_str(), target->name, bytes_in / 1048576.0, bytes_out / 1048576.0);
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& root) {
  auto opts = std::make_shared<QuantizeOptions>();
  CLI::App* app = root.add_subcommand(
      "quantize", "Quantize a GGUF model (per-tensor types chosen like llama-quantize)");
  app->add_option("input", opts->input, "input GGUF (F32/F16/BF16 weights)")->required();
  app->add_option("output", opts->output, "output GGUF path")->required();
  app->add_option("type", opts->type, "target: " + quant_target_names() + " (case-insensitive)")
      ->required();
  app->add_option("-t,--threads", opts->threads, "worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--token-embedding-type", opts->token_embd_type,
                  "type of token_embd.weight (e.g. BF16 for a mixed file), as llama-quantize's option");
  app->add_option("--output-tensor-type", opts->output_type,
                  "type of the LM head (output.weight, or the tied token_embd.weight), as llama-quantize's option");
  return {app, [opts] { return run_quantize(*opts); }};
}

}  // namespace ws::cli
