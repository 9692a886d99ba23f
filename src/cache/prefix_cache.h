// Cross-turn reuse: a radix tree over token ids holding checkpoints (snapshots of a
// sequence's state), the policy that decides where checkpoints go, a byte budget with
// eviction by compute saved per byte, and statistics. Knows nothing of HTTP.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "memory/state.h"

namespace ws {

using Token = int32_t;
class CheckpointTiers;
struct TierHit;

enum class Boundary : uint8_t { message, media, periodic, frontier, reply };
const char* boundary_name(Boundary b);

// Which layer kinds a model has: decides how a cached state may be reused.
struct ReuseTraits {
  bool can_truncate = true;        // every layer is full KV: a deeper checkpoint can be cut back
  size_t fixed_snapshot_bytes = 0;  // copied by every snapshot whatever its position (recurrent layers)
};

// The result of looking a prompt up.
struct Hit {
  std::shared_ptr<const Snapshot> snapshot;  // null on a miss
  int32_t reuse = 0;           // tokens of the prompt covered (restore, then cut back to this)
  int32_t common_prefix = 0;   // longest prefix shared with anything cached
  std::string miss_reason;     // why less than common_prefix (and < prompt-1) was reused; "" otherwise
  uint64_t node_id = 0;        // pin handle: pass to release()
  // Where the checkpoint came from when it was not in RAM: a storage tier's name, the
  // bytes it moved and the time the lookup, transfer and checks took.
  std::string tier;
  size_t tier_bytes = 0;
  double tier_ms = 0;
};

struct CacheStats {
  uint64_t lookups = 0, hits = 0, misses = 0;
  uint64_t reused_tokens = 0, computed_tokens = 0;
  uint64_t checkpoints_stored = 0, evictions = 0, corrupt_rejected = 0;
  size_t bytes_in_use = 0, budget_bytes = 0;
  size_t n_checkpoints = 0;
  double restore_ms_total = 0, checkpoint_ms_total = 0;
};

// Where checkpoints go during one turn's prompt ingest.
struct CheckpointPolicy {
  int32_t every_n = 512;  // also at multiples of N tokens >= N/2 from other boundaries (0 = off)
  // Spacing for models whose every snapshot copies fixed-size state (recurrent layers): a
  // checkpoint must lie at least fixed_snapshot_bytes / copy_bytes_per_token tokens from
  // the next one. Copying fresh memory costs 1-5 ms per MiB (bench/state_bench --keep),
  // about one token of single-core prefill at the sizes where states reach MiBs, and each
  // copy displaces its size from the cache budget; a request that diverges between two
  // close boundaries recomputes only those few tokens. 0 = off.
  size_t copy_bytes_per_token = size_t(1) << 20;
  // Spacing for every model: a checkpoint inside the prompt cuts its batch, and a batch
  // costs about one pass over the weights besides its tokens (a 3-token batch costs what
  // ~30 tokens inside a large one do). This drops the end of a user message a header's
  // length before the frontier. 0 = off.
  int32_t min_cut_gap = 16;
  int32_t min_gap(const ReuseTraits& traits) const;  // the larger of the two spacings
  // Sorted, distinct positions in (from, to] at which to snapshot: message/media
  // boundaries, the frontier `to`, and the multiples of every_n at least every_n / 2 from
  // those and from `from`. Of two closer than min_gap the later is kept (the frontier
  // serves a regeneration, the end of a reply an edit of the next message), and none but
  // the frontier lies closer than min_gap after `from` (the point this turn restored,
  // itself a checkpoint: the end of a short reply is that close to the frontier before
  // it). Media boundaries are always kept (they save an image encode), and so is the
  // message end `keep` (-1: none; see TurnRequest::keep_message_end).
  std::vector<std::pair<int32_t, Boundary>> plan(int32_t from, int32_t to, std::span<const int32_t> message_ends,
                                                 std::span<const int32_t> media_ends, int32_t min_gap = 0,
                                                 int32_t keep = -1) const;
};

class PrefixCache {
 public:
  explicit PrefixCache(size_t budget_bytes) { stats_.budget_bytes = budget_bytes; }
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return stats_.budget_bytes > 0; }
  // Storage tiers below RAM (cache/tiers.h; may be null): every checkpoint stored is
  // offered to them, and a lookup that finds nothing as deep in RAM asks them. Set before
  // the first lookup; the tiers outlive the cache's use.
  void attach_tiers(CheckpointTiers* tiers) { tiers_ = tiers; }
  const CheckpointTiers* tiers() const { return tiers_; }
  // Deepest usable state for `prompt` of model `model_id`. At least one token is left to
  // compute (its logits are needed) unless a checkpoint of the whole prompt holds them.
  // The returned node is pinned (never evicted) until release().
  Hit acquire(uint64_t model_id, std::span<const Token> prompt, const ReuseTraits& traits);
  void release(const Hit& hit);
  // Stores a checkpoint for `prefix` (= the tokens the state has consumed, in order).
  void put(uint64_t model_id, std::span<const Token> prefix, Snapshot snapshot, Boundary kind);
  // Every checkpoint taken after a prefix of `tokens`, shallowest first (slot save); not
  // counted as a lookup.
  std::vector<std::shared_ptr<const Snapshot>> checkpoints_along(uint64_t model_id, std::span<const Token> tokens);
  // Drops a checkpoint that failed to restore (corrupted): the turn then runs cold.
  void reject(const Hit& hit);
  void record_turn(int32_t reused, int32_t computed, double restore_ms, double checkpoint_ms);

  CacheStats stats() const;
  // Test hook: the stored snapshot at exactly `prefix` (null if none), to corrupt it.
  std::shared_ptr<Snapshot> find_for_test(uint64_t model_id, std::span<const Token> prefix);

 private:
  struct Node {
    uint64_t id = 0;
    std::vector<Token> edge;                        // tokens from the parent to this node
    int32_t depth = 0;                              // position at the end of `edge`
    Node* parent = nullptr;
    std::map<Token, std::unique_ptr<Node>> children;  // by first token of the child's edge
    std::shared_ptr<Snapshot> checkpoint;           // state after `depth` tokens, or null
    Boundary kind = Boundary::periodic;
    int pins = 0;
    uint64_t last_used = 0;
    bool evicted = false;                           // a checkpoint here was evicted
  };
  struct Walk {
    Node* deepest = nullptr;     // last node fully or partly matched
    int32_t matched = 0;         // common prefix length
  };

  Hit acquire_in_ram(uint64_t model_id, std::span<const Token> prompt, const ReuseTraits& traits);
  // Replaces `hit` by a checkpoint a tier found at prompt[0..depth), kept in RAM from now on.
  void adopt(uint64_t model_id, std::span<const Token> prompt, TierHit found, Hit& hit);
  Node& root_for(uint64_t model_id);
  Walk walk(Node& root, std::span<const Token> prompt) const;
  Node* insert(Node& root, std::span<const Token> prefix);
  void account(const Snapshot& s, int sign);
  size_t unique_bytes(const Snapshot& s) const;  // bytes freed if s alone were dropped
  void evict_to_budget();
  Node* find_node(uint64_t id);
  void pin(Node& node, Hit& hit, int32_t reuse);  // hit = node's checkpoint, reusing `reuse` tokens

  mutable std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Node>> roots_;  // one tree per model identity
  std::map<const KvPage*, int> page_refs_;           // pages referenced by checkpoints
  uint64_t next_id_ = 1, clock_ = 0;
  CacheStats stats_;
  CheckpointTiers* tiers_ = nullptr;
};

}  // namespace ws
