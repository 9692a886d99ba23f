// Prefill attention throughput at depth: ops::attention over a real paged KV store, as a
// model layer calls it (the new tokens' K/V appended, then their queries attended).
//
//   attn_bench [--depth 680,2048] [--tokens 512] [--heads 15] [--kv-heads 5] [--head-dim 64]
//              [--kv-type f16|f32|q8_0|q4_0] [--threads 1] [--cpu-time]
//
// Prints the median and best GFLOP/s, counting 4 flops per (query, visible key, d): the q.k dot and the p.v sum.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "memory/state.h"
#include "models/ops.h"
#include "tensor/threadpool.h"

namespace {

std::vector<int64_t> split_ints(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> depths = {680, 2048};
  int64_t tokens = 512, n_head = 15, n_kv = 5, hd = 64, threads = 1;
  bool cpu_time = false;
  ws::KvType kv_type = ws::KvType::f16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--cpu-time") cpu_time = true;
    else if (a == "--depth" && has) depths = split_ints(argv[++i]);
    else if (a == "--tokens" && has) tokens = std::stoll(argv[++i]);
    else if (a == "--heads" && has) n_head = std::stoll(argv[++i]);
    else if (a == "--kv-heads" && has) n_kv = std::stoll(argv[++i]);
    else if (a == "--head-dim" && has) hd = std::stoll(argv[++i]);
    else if (a == "--threads" && has) threads = std::stoll(argv[++i]);
    else if (a == "--kv-type" && has && ws::parse_kv_type(argv[i + 1])) kv_type = *ws::parse_kv_type(argv[++i]);
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (n_head <= 0 || n_kv <= 0 || n_head % n_kv != 0 || hd <= 0 || tokens <= 0) {
    std::fprintf(stderr, "need heads divisible by kv-heads, positive head-dim and tokens\n");
    return 2;
  }
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  ws::ThreadPool pool{int(threads)};
  std::printf("attention: %lld heads, %lld kv heads, head_dim %lld, %s KV, %lld threads\n", (long long)n_head,
              (long long)n_kv, (long long)hd, ws::kv_type_name(kv_type), (long long)threads);
  std::printf("%7s %7s %10s %10s %10s\n", "depth", "tokens", "ms/call", "GFLOP/s", "best");
  for (int64_t depth : depths) {
    const int64_t n = depth + tokens;
    std::vector<float> k(size_t(n * n_kv * hd)), v(k.size());  // [n][n_kv][hd] f32
    for (auto& x : k) x = dist(rng);
    for (auto& x : v) x = dist(rng);
    std::vector<float> q(size_t(tokens * n_head * hd));  // [tokens][n_head][hd] f32
    for (auto& x : q) x = dist(rng);
    std::vector<float> out(q.size());  // [tokens][n_head][hd] f32
    ws::FullKvState kv(int32_t(n_kv), int32_t(hd), {kv_type, kv_type}, 64);
    kv.append(k.data(), v.data(), int32_t(n));
    const ws::ops::AttentionParams p{int32_t(n_head), 0.125f, 0, false};
    ws::ops::attention(q.data(), kv, tokens, int32_t(depth), p, out.data(), pool);  // warm-up
    // Per call: wall or (--cpu-time) process CPU time per thread; the median of the calls
    // in about a second and the fastest, which on a shared machine is the least disturbed.
    std::vector<double> times;
    for (double total = 0; total < 1.0 || times.size() < 5;) {
      const auto w0 = std::chrono::steady_clock::now();
      const double c0 = cpu_seconds();
      ws::ops::attention(q.data(), kv, tokens, int32_t(depth), p, out.data(), pool);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      times.push_back(cpu_time ? (cpu_seconds() - c0) / double(threads) : wall);
      total += wall;
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2], best = times[0];
    // Visible keys summed over the queries: depth + t + 1 for token t.
    const double pairs = double(n_head) * (double(tokens) * double(depth) + double(tokens) * double(tokens + 1) / 2);
    const double flops = 4.0 * pairs * double(hd);
    std::printf("%7lld %7lld %10.3f %10.2f %10.2f\n", (long long)depth, (long long)tokens, median * 1e3,
                flops / median * 1e-9, flops / best * 1e-9);
    std::fflush(stdout);
  }
  return 0;
}
