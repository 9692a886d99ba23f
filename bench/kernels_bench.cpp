// Matmul throughput per weight type, ISA, thread count and batch size.
//
//   kernels_bench [rows cols] [--types q8_0,q4_k,...] [--tokens 1,512] [--threads 1,2] [--cpu-time]
//                 [--copies N]
//
// Prints GFLOP/s (2 flops per multiply-add, activation conversion included) and, for
// decode-sized batches, the weight bandwidth in GB/s (decode is memory-bound).
// --copies N: N copies of the matrix, packed into one arena as a model's matrices are,
// called in turn, so that decode reads its weights from memory as in a model (one matrix
// of a layer's size stays in the last-level cache from call to call).
#include <algorithm>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/quant.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Seconds per call, measured over at least `min_s` seconds (one warm-up call first):
// wall time, and with `cpu` the process CPU time divided by the thread count, which is
// what a call costs on a busy (shared) machine where wall time mostly measures waiting.
double time_matmul(const std::vector<ws::Matrix>& copies, const float* x, int64_t n, float* y,
                   ws::ThreadPool& pool, ws::Isa isa, double min_s, bool cpu) {
  using clock = std::chrono::steady_clock;
  for (const ws::Matrix& w : copies) ws::matmul(w, x, n, y, pool, isa);
  int reps = 0;
  const auto start = clock::now();
  const double cpu0 = cpu_seconds();
  double elapsed = 0;
  do {
    ws::matmul(copies[size_t(reps) % copies.size()], x, n, y, pool, isa);
    ++reps;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < min_s);
  if (cpu) return (cpu_seconds() - cpu0) / pool.size() / reps;
  return elapsed / reps;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 960, cols = 2560;
  std::vector<std::string> types = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"};
  std::vector<int64_t> token_counts = {1, 512};
  std::vector<int> thread_counts = {1, 2};
  std::vector<std::string> pos;
  bool cpu_time = false;
  int n_copies = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cpu-time") cpu_time = true;
    else if (a == "--copies" && i + 1 < argc) n_copies = std::max(1, std::stoi(argv[++i]));
    else if (a == "--types" && i + 1 < argc) types = split(argv[++i]);
    else if (a == "--tokens" && i + 1 < argc) {
      token_counts.clear();
      for (const auto& s : split(argv[++i])) token_counts.push_back(std::stoll(s));
    } else if (a == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      for (const auto& s : split(argv[++i])) thread_counts.push_back(std::stoi(s));
    } else pos.push_back(a);
  }
  if (pos.size() == 2) {
    rows = std::stoll(pos[0]);
    cols = std::stoll(pos[1]);
  }
  const int64_t max_tokens = *std::max_element(token_counts.begin(), token_counts.end());
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> wf(size_t(rows * cols));  // [rows][cols] f32 source weights
  for (auto& v : wf) v = dist(rng);
  std::vector<float> x(size_t(max_tokens * cols));  // [max_tokens][cols] f32 activations
  for (auto& v : x) v = dist(rng);
  std::vector<float> y(size_t(max_tokens * rows));  // [max_tokens][rows] f32 outputs

  std::vector<ws::Isa> isas = {ws::Isa::scalar};
  if (ws::detected_isa() == ws::Isa::avx2) isas.push_back(ws::Isa::avx2);
  std::printf("matmul %lld x %lld (rows x cols), %d cop%s\n", (long long)rows, (long long)cols, n_copies, n_copies == 1 ? "y" : "ies");
  std::printf("%-6s %-6s %7s %7s %10s %10s %8s\n", "type", "isa", "threads", "tokens",
              "ms/call", "GFLOP/s", "GB/s(w)");
  for (const auto& name : types) {
    const auto t = ws::dtype_from_name(name);
    if (!t) {
      std::fprintf(stderr, "unknown type %s\n", name.c_str());
      return 1;
    }
    const size_t stride = ws::row_bytes(*t, cols);
    std::vector<uint8_t> wq(size_t(rows) * stride);  // [rows][stride] quantized weights
    for (int64_t r = 0; r < rows; ++r)
      ws::quantize_row(*t, wf.data() + r * cols, wq.data() + r * stride, cols);
    // As models load them: rows repacked once for the SIMD kernels, into one arena.
    // Types read as they are (not packed) get a copy of the bytes each.
    std::vector<std::vector<uint8_t>> wq_copies(size_t(n_copies - 1), wq);  // [n_copies - 1][rows * stride]
    ws::PackedArena arena;
    std::vector<ws::Matrix> copies;
    for (int c = 0; c < n_copies; ++c) {
      const uint8_t* bytes = c == 0 ? wq.data() : wq_copies[size_t(c - 1)].data();
      copies.push_back(ws::pack_for_cpu(ws::Matrix{*t, rows, cols, bytes}, &arena));
    }
    for (ws::Isa isa : isas) {
      for (int threads : thread_counts) {
        ws::ThreadPool pool(threads);
        for (int64_t n : token_counts) {
          const double s = time_matmul(copies, x.data(), n, y.data(), pool, isa, 0.3, cpu_time);
          const double gflops = 2.0 * double(rows) * double(cols) * double(n) / s * 1e-9;
          const double gbs = double(wq.size()) / s * 1e-9;
          std::printf("%-6s %-6s %7d %7lld %10.3f %10.2f %8.2f\n", name.c_str(),
                      isa == ws::Isa::avx2 ? "avx2" : "scalar", threads, (long long)n, s * 1e3,
                      gflops, gbs);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
