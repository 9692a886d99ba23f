#include "cache/tiers.h"

#include <chrono>
#include <cstdio>
#include <map>

namespace ws {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void log_line(const std::string& s) {
  std::fprintf(stderr, "warmstart: %s\n", s.c_str());
  std::fflush(stderr);
}

}  // namespace

CheckpointTiers::CheckpointTiers(std::vector<std::unique_ptr<RecordStore>> stores, MemoryOptions memory,
                                 size_t max_checkpoint_bytes, size_t queue_bytes)
    : memory_(memory), max_checkpoint_bytes_(max_checkpoint_bytes), queue_limit_(queue_bytes) {
  for (auto& s : stores) {
    stores_.push_back({std::move(s), {}});
    stores_.back().stats.name = stores_.back().store->name();
  }
  writer_ = std::thread([this] { write_loop(); });
}

CheckpointTiers::~CheckpointTiers() {
  flush();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void CheckpointTiers::failed(Store& s, const std::exception& e, bool reading) {
  std::lock_guard lock(mu_);
  ++(reading ? s.stats.read_errors : s.stats.write_errors);
  const bool was_available = s.stats.available;
  s.stats.available = false;
  s.stats.last_error = e.what();
  if (was_available) log_line(std::string(e.what()) + " (going on without it)");
}

std::optional<TierHit> CheckpointTiers::find(uint64_t model_id, std::span<const Token> prompt, int32_t min_depth) {
  if (stores_.empty() || prompt.empty()) return std::nullopt;
  const uint64_t identity = tier_identity(model_id, memory_);
  const std::vector<RecordKey> keys = prefix_keys(identity, prompt);  // [n]
  for (size_t i = 0; i < stores_.size(); ++i) {
    auto hit = find_in(i, identity, model_id, prompt, keys, min_depth);
    if (!hit) continue;
    if (i > 0)  // found further away: the nearer stores keep it for next time
      enqueue({identity, {prompt.begin(), prompt.begin() + hit->depth}, hit->snapshot, 0, i, 0});
    return hit;
  }
  return std::nullopt;
}

void CheckpointTiers::reject(Store& s, RecordKind kind, uint64_t identity, const RecordKey& key,
                             const std::string& why) {
  log_line(std::string(s.store->name()) + " tier: dropped a record: " + why);
  {
    std::lock_guard lock(mu_);
    ++s.stats.records_rejected;
  }
  s.store->drop(kind, identity, key);
}

std::optional<CheckpointTiers::Loaded> CheckpointTiers::load(Store& s, uint64_t identity, uint64_t model_id,
                                                              std::span<const Token> prefix, const RecordKey& key) {
  RecordStore& store = *s.store;
  const auto rec = store.get(RecordKind::checkpoint, identity, key);
  if (!rec) return std::nullopt;
  const std::string label = std::string(store.name()) + " record " + key.hex();
  size_t bytes = rec->size();
  try {
    const CheckpointHeader h = read_checkpoint_header(*rec, label);
    std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const KvPage>> pages;  // missing: decode says so
    std::vector<std::pair<size_t, std::string>> bad;  // pages (of h.pages) that failed, and why
    bool too_large = bytes > max_checkpoint_bytes_;
    // (The visitor must not throw: a Redis pipeline's replies are read to the end.)
    store.read(RecordKind::page, identity, too_large ? std::span<const RecordKey>() : std::span(h.pages),
               [&](size_t p, std::span<const uint8_t> b) {
                 bytes += b.size();
                 too_large = too_large || bytes > max_checkpoint_bytes_;
                 if (too_large) return;
                 try {
                   pages[{h.pages[p].hi, h.pages[p].lo}] = decode_page(
                       b, std::string(store.name()) + " page " + h.pages[p].hex(), identity, h.pages[p]);
                 } catch (const std::runtime_error& e) {
                   bad.emplace_back(p, e.what());
                 }
               });
    for (const auto& [p, why] : bad) reject(s, RecordKind::page, identity, h.pages[p], why);
    if (too_large) {  // skipped, not dropped: a replica with a larger budget may use it
      log_line(std::string(store.name()) + " tier: skipped " + label + ": more than " +
               std::to_string(max_checkpoint_bytes_) + " bytes, the RAM cache's budget");
      std::lock_guard lock(mu_);
      ++s.stats.records_rejected;
      return std::nullopt;
    }
    auto page = [&](const RecordKey& k) {
      auto it = pages.find({k.hi, k.lo});
      return it == pages.end() ? nullptr : it->second;
    };
    return Loaded{std::make_shared<Snapshot>(decode_checkpoint(*rec, label, identity, model_id, prefix, page)), bytes};
  } catch (const TierMiss& e) {
    log_line(std::string(store.name()) + " tier: " + e.what() + "; dropping its checkpoint");
    store.drop(RecordKind::checkpoint, identity, key);
  } catch (const StoreUnavailable&) {
    throw;
  } catch (const std::runtime_error& e) {
    reject(s, RecordKind::checkpoint, identity, key, e.what());
  }
  return std::nullopt;
}

std::optional<TierHit> CheckpointTiers::find_in(size_t index, uint64_t identity, uint64_t model_id,
                                                std::span<const Token> prompt, std::span<const RecordKey> keys,
                                                int32_t min_depth) {
  Store& s = stores_[index];
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const std::vector<int32_t> depths = s.store->stored_depths(identity, keys, min_depth);
    {
      std::lock_guard lock(mu_);
      ++s.stats.lookups;
      if (!s.stats.available) log_line(std::string(s.store->name()) + " tier: available again");
      s.stats.available = true;
    }
    for (int32_t d : depths) {
      auto loaded = load(s, identity, model_id, prompt.first(size_t(d)), keys[size_t(d - 1)]);
      // The whole prompt is of use only with the logits after it.
      if (!loaded || (size_t(d) == prompt.size() && loaded->snapshot->logits.empty())) continue;
      TierHit hit{std::move(loaded->snapshot), d, s.store->name(), loaded->bytes, ms_since(t0)};
      std::lock_guard lock(mu_);
      ++s.stats.hits;
      s.stats.bytes_read += hit.bytes;
      s.stats.read_ms += hit.ms;
      return hit;
    }
  } catch (const StoreUnavailable& e) {
    failed(s, e, true);
  }
  return std::nullopt;
}

void CheckpointTiers::offer(uint64_t model_id, std::span<const Token> prefix, std::shared_ptr<const Snapshot> snapshot) {
  if (stores_.empty() || !snapshot) return;
  enqueue({tier_identity(model_id, memory_), {prefix.begin(), prefix.end()}, std::move(snapshot), 0, stores_.size(), 0});
}

void CheckpointTiers::enqueue(Job job) {
  job.bytes = job.prefix.size() * sizeof(Token) + job.snapshot->copied_bytes();
  {
    std::lock_guard lock(mu_);
    if (queued_bytes_ + job.bytes > queue_limit_) {
      for (size_t i = job.first_store; i < job.end_store; ++i) ++stores_[i].stats.writes_skipped;
      return;
    }
    queued_bytes_ += job.bytes;
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void CheckpointTiers::flush() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

void CheckpointTiers::write_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ with nothing left
    Job job = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    for (size_t i = job.first_store; i < job.end_store; ++i) write(stores_[i], job);
    lock.lock();
    writing_ = false;
    queued_bytes_ -= job.bytes;
    if (queue_.empty()) idle_.notify_all();
  }
}

void CheckpointTiers::write(Store& s, const Job& job) {
  try {
    const std::vector<RecordKey> keys = prefix_keys(job.identity, job.prefix);
    if (keys.empty() || s.store->contains(RecordKind::checkpoint, job.identity, {&keys.back(), 1})[0]) return;
    const EncodedCheckpoint enc = encode_checkpoint(job.identity, job.prefix, *job.snapshot);
    std::vector<RecordKey> page_keys;  // [n_pages]
    for (const auto& [k, p] : enc.pages) page_keys.push_back(k);
    const std::vector<bool> stored = s.store->contains(RecordKind::page, job.identity, page_keys);
    std::vector<std::vector<uint8_t>> page_records;  // the pages the store lacks, encoded
    std::vector<StoredRecord> records;
    page_records.reserve(enc.pages.size());
    for (size_t p = 0; p < enc.pages.size(); ++p)
      if (!stored[p]) {
        page_records.push_back(encode_page(job.identity, enc.pages[p].first, *enc.pages[p].second));
        records.push_back({RecordKind::page, enc.pages[p].first, page_records.back(), 0});
      }
    records.push_back({RecordKind::checkpoint, keys.back(), enc.bytes, int32_t(job.prefix.size())});
    s.store->put(job.identity, records);
    size_t bytes = 0;
    for (const auto& r : records) bytes += r.bytes.size();
    std::lock_guard lock(mu_);
    ++s.stats.checkpoints_written;
    s.stats.pages_written += records.size() - 1;
    s.stats.bytes_written += bytes;
    if (!s.stats.available) log_line(std::string(s.store->name()) + " tier: available again");
    s.stats.available = true;
  } catch (const StoreUnavailable& e) {
    failed(s, e, false);
  }
}

std::vector<TierStats> CheckpointTiers::stats() const {
  std::vector<TierStats> out;
  std::lock_guard lock(mu_);
  for (const auto& s : stores_) {
    out.push_back(s.stats);
    out.back().bytes_in_use = s.store->bytes_in_use();
    out.back().evictions = s.store->evictions();
  }
  return out;
}

}  // namespace ws
