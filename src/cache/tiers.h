// Storage tiers under the prefix cache: checkpoints written through to a directory and/or
// Redis (cache/record_store.h) so that they outlive the process and are shared between
// replicas, and found there when RAM has nothing as deep. Which checkpoints: every one the
// prefix cache stores (message and reply ends, the frontier, periodic ones), written by a
// background thread so that a turn never waits for a disk or a network; pages already
// stored are not sent again. A lookup asks the stores in order (disk, then Redis) for the
// deepest checkpoint of a prefix of the prompt; a record is untrusted input (decoded by
// cache/tier_record.h), and one that fails its checks is dropped from its store and
// counted, the lookup going on as if it were not there. A store that fails (down, slow,
// full) is skipped for that call; each failure is logged and counted.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/record_store.h"

namespace ws {

struct TierStats {
  std::string name;
  bool available = true;  // the last call succeeded
  uint64_t lookups = 0, hits = 0;
  uint64_t bytes_read = 0;
  double read_ms = 0;
  uint64_t checkpoints_written = 0, pages_written = 0, bytes_written = 0;
  uint64_t read_errors = 0, write_errors = 0;  // the store failed (down, slow, full)
  uint64_t records_rejected = 0;               // a record failed its checks and was dropped
  uint64_t writes_skipped = 0;                 // the write queue was full
  size_t bytes_in_use = 0;                     // disk: records held (Redis: see INFO memory)
  uint64_t evictions = 0;
  std::string last_error;
};

// A checkpoint found in a tier.
struct TierHit {
  std::shared_ptr<Snapshot> snapshot;
  int32_t depth = 0;
  std::string tier;  // the store's name
  size_t bytes = 0;  // moved from the store
  double ms = 0;     // lookup, transfer and checks
};

class CheckpointTiers {
 public:
  // stores: in lookup order. memory: the KV layout of the states (part of the identity).
  // max_checkpoint_bytes: a checkpoint whose records add up to more is refused unread
  // (the RAM cache's budget: it could not be kept). queue_bytes: snapshots waiting to be
  // written beyond this are skipped (counted).
  CheckpointTiers(std::vector<std::unique_ptr<RecordStore>> stores, MemoryOptions memory,
                  size_t max_checkpoint_bytes = SIZE_MAX, size_t queue_bytes = size_t(512) << 20);
  ~CheckpointTiers();  // writes what is queued, then stops
  CheckpointTiers(const CheckpointTiers&) = delete;
  CheckpointTiers& operator=(const CheckpointTiers&) = delete;

  // The deepest checkpoint of a prefix of `prompt` deeper than `min_depth` and at most
  // prompt.size() - 1 tokens, or of the whole prompt if it holds the logits after it.
  std::optional<TierHit> find(uint64_t model_id, std::span<const Token> prompt, int32_t min_depth);
  // Queues the checkpoint after `prefix` for writing to every store.
  void offer(uint64_t model_id, std::span<const Token> prefix, std::shared_ptr<const Snapshot> snapshot);
  // Waits until everything queued so far is written (or failed).
  void flush();
  std::vector<TierStats> stats() const;

 private:
  struct Job {
    uint64_t identity = 0;
    std::vector<Token> prefix;
    std::shared_ptr<const Snapshot> snapshot;
    size_t first_store = 0, end_store = 0;  // the stores [first, end) to write to
    size_t bytes = 0;                       // counted against queue_bytes
  };
  struct Store {
    std::unique_ptr<RecordStore> store;
    TierStats stats;
  };
  void enqueue(Job job);
  void write_loop();
  void write(Store& s, const Job& job);
  std::optional<TierHit> find_in(size_t store, uint64_t identity, uint64_t model_id,
                                 std::span<const Token> prompt, std::span<const RecordKey> keys, int32_t min_depth);
  // The checkpoint after `prefix` (key `key`) and its pages from one store, checked; nullopt
  // when it is not there, too large (skipped) or bad (dropped and counted).
  struct Loaded {
    std::shared_ptr<Snapshot> snapshot;
    size_t bytes = 0;  // read from the store
  };
  std::optional<Loaded> load(Store& s, uint64_t identity, uint64_t model_id, std::span<const Token> prefix,
                             const RecordKey& key);
  void reject(Store& s, RecordKind kind, uint64_t identity, const RecordKey& key, const std::string& why);
  void failed(Store& s, const std::exception& e, bool reading);

  MemoryOptions memory_;
  size_t max_checkpoint_bytes_, queue_limit_;
  std::vector<Store> stores_;
  mutable std::mutex mu_;  // the queue and every store's stats
  std::condition_variable wake_, idle_;
  std::deque<Job> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false, stop_ = false;
  std::thread writer_;
};

}  // namespace ws
