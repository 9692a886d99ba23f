// Where the storage tiers keep their records (cache/tier_record.h): a directory on disk or
// a Redis server. A store moves bytes and knows which records it holds; what the bytes
// mean, and whether to trust them, is the tiers' business (cache/tiers.h).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/tier_record.h"

struct redisContext;
struct redisReply;

namespace ws {

enum class RecordKind : uint8_t { checkpoint, page };

// The store cannot answer now (an I/O error, a full disk, a timeout, a refused
// connection): the caller goes on without it. The message says which and why.
struct StoreUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StoredRecord {
  RecordKind kind = RecordKind::page;
  RecordKey key;
  std::span<const uint8_t> bytes;
  int32_t depth = 0;  // checkpoints: tokens of the prefix
};

class RecordStore {
 public:
  virtual ~RecordStore() = default;
  virtual const char* name() const = 0;
  // The depths d > min_depth, deepest first, whose checkpoint (key keys[d - 1]) is stored.
  virtual std::vector<int32_t> stored_depths(uint64_t identity, std::span<const RecordKey> keys, int32_t min_depth) = 0;
  // Calls each(i, bytes) for every stored record of `keys` (i: its index in keys); the bytes
  // are valid during the call only (a store reads many pages through one buffer).
  using RecordVisitor = std::function<void(size_t i, std::span<const uint8_t> bytes)>;
  virtual void read(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys, const RecordVisitor& each) = 0;
  std::optional<std::vector<uint8_t>> get(RecordKind kind, uint64_t identity, const RecordKey& key) {
    std::optional<std::vector<uint8_t>> out;
    read(kind, identity, {&key, 1}, [&](size_t, std::span<const uint8_t> b) { out.emplace(b.begin(), b.end()); });
    return out;
  }
  // Which of `keys` are stored.
  virtual std::vector<bool> contains(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys) = 0;
  // Stores the records in order (pages before the checkpoint naming them, so that a
  // checkpoint is never found before its pages are).
  virtual void put(uint64_t identity, std::span<const StoredRecord> records) = 0;
  virtual void drop(RecordKind kind, uint64_t identity, const RecordKey& key) = 0;
  // Bytes held and the budget (0: the store's own limits, as Redis's maxmemory).
  virtual size_t bytes_in_use() const { return 0; }
  virtual uint64_t evictions() const { return 0; }
};

// A directory: DIR/v1/<identity>/c/<key>.rec (checkpoints) and .../p/<key>.page (pages),
// each written to a temporary file and renamed into place. The index (which records, how
// large, which pages each checkpoint names) is rebuilt from the directory at start-up,
// where leftover temporary files (a process killed mid-write), unreadable checkpoint
// fronts and pages no checkpoint names are deleted. Over the budget, the least recently
// used checkpoints go, and with them the pages no other checkpoint names. One process per
// directory (an advisory lock refuses a second).
class DiskStore final : public RecordStore {
 public:
  // Throws std::runtime_error if DIR cannot be created or is locked by another process.
  DiskStore(std::string dir, size_t budget_bytes);
  ~DiskStore() override;
  const char* name() const override { return "disk"; }
  std::vector<int32_t> stored_depths(uint64_t identity, std::span<const RecordKey> keys, int32_t min_depth) override;
  void read(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys, const RecordVisitor& each) override;
  std::vector<bool> contains(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys) override;
  void put(uint64_t identity, std::span<const StoredRecord> records) override;
  void drop(RecordKind kind, uint64_t identity, const RecordKey& key) override;
  size_t bytes_in_use() const override;
  uint64_t evictions() const override;
  // What start-up found: records indexed, and files removed (temporary, unreadable, orphaned).
  struct Recovery {
    size_t checkpoints = 0, pages = 0, removed = 0;
  };
  Recovery recovery() const { return recovery_; }

 private:
  struct Id {
    uint64_t identity;
    RecordKey key;
    bool operator==(const Id&) const = default;
  };
  struct IdHash {
    size_t operator()(const Id& i) const { return RecordKeyHash{}(i.key) ^ size_t(i.identity); }
  };
  struct Checkpoint {
    int32_t depth = 0;
    size_t bytes = 0;
    std::vector<RecordKey> pages;
    uint64_t last_used = 0;
  };
  struct Page {
    size_t bytes = 0;
    int refs = 0;  // checkpoints naming it
  };
  std::string path(RecordKind kind, uint64_t identity, const RecordKey& key) const;
  void rebuild_index();
  void index_checkpoint(const Id& id, Checkpoint c);
  void remove_checkpoint(const Id& id);  // and its pages no other checkpoint names
  void evict_for(size_t incoming);
  // Under mu_; pages: those a checkpoint names (its header, parsed by put).
  void write_record(uint64_t identity, const StoredRecord& r, const std::vector<RecordKey>& pages);

  std::string root_;  // DIR/v1
  size_t budget_;
  int lock_fd_ = -1;
  mutable std::mutex mu_;
  std::unordered_map<Id, Checkpoint, IdHash> checkpoints_;
  std::unordered_map<Id, Page, IdHash> pages_;
  size_t bytes_ = 0;
  uint64_t clock_ = 0, evictions_ = 0;
  Recovery recovery_;
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;            // AUTH (empty: none)
  std::string user;                // AUTH user password (Redis 6 ACLs; empty: the default user)
  std::string key_prefix = "warmstart:";
  int timeout_ms = 500;            // connect and every command; then the store is skipped
  int retry_after_ms = 2000;       // after a failure, calls fail at once until then
  int64_t ttl_s = 0;               // expiry of every record (0: none; rely on maxmemory-policy)
};
// Parses HOST:PORT (or [V6]:PORT); throws std::invalid_argument.
RedisOptions parse_redis_address(const std::string& host_port);

// Redis through hiredis: <prefix>c:<identity>:<key> and <prefix>p:<identity>:<key> hold the
// records, <prefix>d:<identity> is a sorted set of the depths stored (so a lookup asks
// for the few depths that exist, not every prefix of the prompt). Commands of one call
// are pipelined. Every command has a timeout; after a failure the store refuses at once
// for retry_after_ms, then reconnects.
class RedisStore final : public RecordStore {
 public:
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;
  const char* name() const override { return "redis"; }
  std::vector<int32_t> stored_depths(uint64_t identity, std::span<const RecordKey> keys, int32_t min_depth) override;
  void read(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys, const RecordVisitor& each) override;
  std::vector<bool> contains(RecordKind kind, uint64_t identity, std::span<const RecordKey> keys) override;
  void put(uint64_t identity, std::span<const StoredRecord> records) override;
  void drop(RecordKind kind, uint64_t identity, const RecordKey& key) override;

 private:
  std::string record_key(RecordKind kind, uint64_t identity, const RecordKey& key) const;
  std::string depths_key(uint64_t identity) const;
  // Lookups and writes have a connection each: a lookup never waits behind a large write.
  struct Connection {
    std::mutex mu;  // one command pipeline at a time; held by the caller of the methods below
    redisContext* ctx = nullptr;
    std::chrono::steady_clock::time_point retry_at{};
    std::string last_failure;  // what the last failed call said
  };
  redisContext* connect(Connection& c);  // connected, or throws StoreUnavailable
  // Sends the commands in one pipeline and hands each reply to `each` as it arrives (then
  // frees it); throws StoreUnavailable.
  void run_each(Connection& c, const std::vector<std::vector<std::string_view>>& commands,
                const std::function<void(size_t i, const redisReply& reply)>& each);
  [[noreturn]] void fail(Connection& c, const std::string& why);

  RedisOptions opt_;
  Connection lookups_, writes_;
};

}  // namespace ws
