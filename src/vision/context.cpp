#include "vision/context.h"

namespace ws::vision {
namespace {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t entry_key(uint64_t image_hash, int32_t entry) { return mix64(image_hash ^ (uint64_t(uint32_t(entry)) << 40)); }

uint64_t entry_row_key(uint64_t image_hash, int32_t entry, int32_t row) {
  return mix64(entry_key(image_hash, entry) + uint64_t(uint32_t(row)) * 0x9e3779b97f4a7c15ull);
}

EncoderCache::Rows EncoderCache::find(uint64_t key) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.rows;
}

void EncoderCache::put(uint64_t key, Rows rows) {
  std::lock_guard lock(mu_);
  const size_t sz = rows->size() * sizeof(float);
  if (sz > budget_ || slots_.count(key)) return;
  while (bytes_ + sz > budget_ && !lru_.empty()) {
    const uint64_t victim = lru_.back();
    bytes_ -= slots_[victim].rows->size() * sizeof(float);
    slots_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  slots_[key] = Slot{std::move(rows), lru_.begin()};
  bytes_ += sz;
}

size_t EncoderCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t EncoderCache::entries() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

EncoderCache::Rows VisionContext::embeddings(uint64_t image_hash, int32_t entry, const PixelEntry& e,
                                             ThreadPool& pool) {
  const uint64_t key = entry_key(image_hash, entry);
  if (auto rows = cache_.find(key)) return rows;
  auto rows = std::make_shared<const std::vector<float>>(model_.encode(e, pool));
  {
    std::lock_guard lock(mu_);
    ++encode_calls_;
  }
  cache_.put(key, rows);
  return rows;
}

uint64_t VisionContext::encode_calls() const {
  std::lock_guard lock(mu_);
  return encode_calls_;
}

}  // namespace ws::vision
