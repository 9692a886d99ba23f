#include "server/metrics.h"

#include <sstream>

namespace ws::server {

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::record_turn(const TurnResult& turn, bool client_gone) {
  std::lock_guard<std::mutex> lock(mu_);
  ++turns_;
  prompt_tokens_ += uint64_t(turn.prompt_tokens);
  reused_tokens_ += uint64_t(turn.reused);
  computed_tokens_ += uint64_t(turn.computed);
  generated_tokens_ += turn.generated.size();
  if (client_gone) ++client_disconnects_;
  const double s = turn.ttft_ms / 1000.0;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    if (s <= kTtftBuckets[i]) {
      ++ttft_counts_[i];
      break;
    }
  }
  ++ttft_count_;
  ttft_sum_s_ += s;
}

namespace {

void header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

template <class T>
void metric(std::ostringstream& o, const char* name, const char* type, const char* help, T value) {
  header(o, name, type, help);
  o << name << ' ' << value << '\n';
}

// The batching loop (engine/step_loop.h): how many rows each forward pass carried.
void render_steps(std::ostringstream& o, const StepStats& s) {
  header(o, "warmstart_step_rows", "histogram", "Rows per batched forward pass (decode tokens and prompt rows)");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < StepStats::kRowBuckets.size(); ++i) {
    cumulative += s.rows_histogram[i];
    o << "warmstart_step_rows_bucket{le=\"" << StepStats::kRowBuckets[i] << "\"} " << cumulative << '\n';
  }
  o << "warmstart_step_rows_bucket{le=\"+Inf\"} " << s.steps << '\n';
  o << "warmstart_step_rows_sum " << s.rows_sum << '\n';
  o << "warmstart_step_rows_count " << s.steps << '\n';
  header(o, "warmstart_step_rows_total", "counter", "Rows evaluated by kind: decode (one token) or prompt");
  o << "warmstart_step_rows_total{kind=\"decode\"} " << s.decode_rows << '\n';
  o << "warmstart_step_rows_total{kind=\"prompt\"} " << s.prompt_rows << '\n';
  metric(o, "warmstart_step_last_rows", "gauge", "Rows of the latest forward pass", s.last_rows);
  metric(o, "warmstart_step_last_sequences", "gauge", "Sequences in the latest forward pass", s.last_sequences);
  metric(o, "warmstart_step_busy_seconds_total", "counter", "Time spent in forward passes", s.busy_seconds);
  metric(o, "warmstart_step_waiting", "gauge", "Batches waiting for the next forward pass", s.waiting);
  metric(o, "warmstart_decode_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s",
         s.decode_tokens_per_second);
}

// One family per quantity, a `tier` label per store ("disk", "redis").
void render_tiers(std::ostringstream& o, const std::vector<TierStats>& tiers) {
  if (tiers.empty()) return;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    header(o, name, type, help);
    for (const TierStats& t : tiers) o << name << "{tier=\"" << t.name << "\"} " << value(t) << '\n';
  };
  family("warmstart_tier_up", "gauge", "1 if the tier's last call succeeded",
         [](const TierStats& t) { return t.available ? 1 : 0; });
  family("warmstart_tier_lookups_total", "counter", "Lookups that reached the tier (RAM had nothing as deep)",
         [](const TierStats& t) { return t.lookups; });
  family("warmstart_tier_hits_total", "counter", "Lookups the tier answered with a checkpoint",
         [](const TierStats& t) { return t.hits; });
  family("warmstart_tier_read_bytes_total", "counter", "Bytes of checkpoints and pages read from the tier",
         [](const TierStats& t) { return t.bytes_read; });
  family("warmstart_tier_read_seconds_total", "counter", "Time of the tier's hits: lookup, transfer and checks",
         [](const TierStats& t) { return t.read_ms / 1000.0; });
  family("warmstart_tier_checkpoints_written_total", "counter", "Checkpoints written to the tier",
         [](const TierStats& t) { return t.checkpoints_written; });
  family("warmstart_tier_pages_written_total", "counter", "KV pages written to the tier (each stored once)",
         [](const TierStats& t) { return t.pages_written; });
  family("warmstart_tier_written_bytes_total", "counter", "Bytes written to the tier",
         [](const TierStats& t) { return t.bytes_written; });
  family("warmstart_tier_read_errors_total", "counter", "Lookups the tier failed (down, timed out, I/O error)",
         [](const TierStats& t) { return t.read_errors; });
  family("warmstart_tier_write_errors_total", "counter", "Writes the tier failed (down, timed out, disk full)",
         [](const TierStats& t) { return t.write_errors; });
  family("warmstart_tier_records_rejected_total", "counter",
         "Records that failed their checks (truncated, corrupted, other model) and were dropped, or were "
         "skipped as larger than the RAM cache's budget",
         [](const TierStats& t) { return t.records_rejected; });
  family("warmstart_tier_writes_skipped_total", "counter", "Checkpoints not written because the write queue was full",
         [](const TierStats& t) { return t.writes_skipped; });
  family("warmstart_tier_bytes", "gauge", "Bytes the tier holds (disk; Redis reports its own)",
         [](const TierStats& t) { return t.bytes_in_use; });
  family("warmstart_tier_evictions_total", "counter", "Checkpoints evicted from the tier to stay within its budget",
         [](const TierStats& t) { return t.evictions; });
}

}  // namespace

std::string Metrics::render(const MetricsSnapshot& now) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream o;
  o.precision(12);  // enough for sums; bucket bounds print as written (0.005, not 0.0050000000000000001)
  header(o, "warmstart_requests_total", "counter", "HTTP requests by endpoint and status");
  for (const auto& [key, n] : requests_)
    o << "warmstart_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
  metric(o, "warmstart_turns_total", "counter", "Generation turns run", turns_);
  metric(o, "warmstart_prompt_tokens_total", "counter", "Prompt tokens received", prompt_tokens_);
  metric(o, "warmstart_reused_tokens_total", "counter", "Prompt tokens restored from the prefix cache", reused_tokens_);
  metric(o, "warmstart_computed_tokens_total", "counter", "Tokens computed (prompt tail and generated)",
         computed_tokens_);
  metric(o, "warmstart_generated_tokens_total", "counter", "Tokens generated", generated_tokens_);
  metric(o, "warmstart_client_disconnects_total", "counter", "Turns stopped because the client went away",
         client_disconnects_);
  header(o, "warmstart_ttft_seconds", "histogram", "Time to first token (prompt lookup, restore, ingest, first sample)");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    cumulative += ttft_counts_[i];
    o << "warmstart_ttft_seconds_bucket{le=\"" << kTtftBuckets[i] << "\"} " << cumulative << '\n';
  }
  o << "warmstart_ttft_seconds_bucket{le=\"+Inf\"} " << ttft_count_ << '\n';
  o << "warmstart_ttft_seconds_sum " << ttft_sum_s_ << '\n';
  o << "warmstart_ttft_seconds_count " << ttft_count_ << '\n';

  const CacheStats& c = now.cache;
  metric(o, "warmstart_cache_bytes", "gauge", "Bytes held by prefix-cache checkpoints", c.bytes_in_use);
  metric(o, "warmstart_cache_budget_bytes", "gauge", "Prefix-cache budget (--cache-budget-mb)", c.budget_bytes);
  metric(o, "warmstart_cache_checkpoints", "gauge", "Checkpoints held", c.n_checkpoints);
  metric(o, "warmstart_cache_lookups_total", "counter", "Prefix-cache lookups", c.lookups);
  metric(o, "warmstart_cache_hits_total", "counter", "Prefix-cache lookups that reused a checkpoint", c.hits);
  metric(o, "warmstart_cache_misses_total", "counter", "Prefix-cache lookups that reused nothing", c.misses);
  metric(o, "warmstart_cache_evictions_total", "counter", "Checkpoints evicted to stay within the budget",
         c.evictions);
  metric(o, "warmstart_cache_checkpoints_stored_total", "counter", "Checkpoints stored", c.checkpoints_stored);
  metric(o, "warmstart_cache_corrupt_rejected_total", "counter", "Checkpoints rejected on restore",
         c.corrupt_rejected);
  metric(o, "warmstart_cache_restore_seconds_total", "counter", "Time spent restoring checkpoints",
         c.restore_ms_total / 1000.0);
  metric(o, "warmstart_cache_checkpoint_seconds_total", "counter",
         "Time spent taking checkpoints of prompts (the frontier included)", c.checkpoint_ms_total / 1000.0);
  render_tiers(o, now.tiers);
  metric(o, "warmstart_slots", "gauge", "Slots (--parallel)", now.slots_total);
  metric(o, "warmstart_slots_busy", "gauge", "Slots running a turn", now.slots_busy);
  metric(o, "warmstart_queue_waiting", "gauge", "Requests waiting for a slot", now.queue_waiting);
  render_steps(o, now.steps);
  return o.str();
}

}  // namespace ws::server
