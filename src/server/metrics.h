// Prometheus text exposition of the server's counters and the prefix cache's state.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cache/prefix_cache.h"
#include "cache/tiers.h"
#include "engine/step_loop.h"
#include "engine/turn.h"

namespace ws::server {

// Point-in-time values that belong to other components, passed in when rendering.
struct MetricsSnapshot {
  CacheStats cache;
  std::vector<TierStats> tiers;  // --cache-dir, --cache-redis (in lookup order)
  int slots_total = 0, slots_busy = 0, queue_waiting = 0;
  StepStats steps;
};

class Metrics {
 public:
  // `endpoint` must be from a fixed set (the routes) to keep label cardinality bounded.
  void count_request(const std::string& endpoint, int status);
  // `client_gone`: the turn stopped because the client disconnected.
  void record_turn(const TurnResult& turn, bool client_gone);
  std::string render(const MetricsSnapshot& now) const;

  static constexpr std::array<double, 11> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                          0.5,   1,    2.5,   5,    10};

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t turns_ = 0, prompt_tokens_ = 0, reused_tokens_ = 0, computed_tokens_ = 0, generated_tokens_ = 0;
  uint64_t client_disconnects_ = 0;
  std::array<uint64_t, kTtftBuckets.size()> ttft_counts_{};  // non-cumulative per bucket
  uint64_t ttft_count_ = 0;
  double ttft_sum_s_ = 0;
};

}  // namespace ws::server
