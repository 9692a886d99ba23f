#include "memory/prepared_memory.h"

#include <algorithm>
#include <new>
#include <system_error>

#include "memory/state.h"

namespace ws {

PreparedSnapshotMemory::PreparedSnapshotMemory(std::vector<size_t> sizes) : sizes_(std::move(sizes)) {}

PreparedSnapshotMemory::~PreparedSnapshotMemory() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  space_cv_.notify_one();
  if (helper_.joinable()) helper_.join();
}

void PreparedSnapshotMemory::start(size_t count) {
  const bool nothing_to_copy = std::all_of(sizes_.begin(), sizes_.end(), [](size_t n) { return n == 0; });
  if (nothing_to_copy || count == 0 || helper_.joinable()) return;
  untaken_ = count;
  try {
    helper_ = std::thread([this, count] { prepare(count); });
  } catch (const std::system_error&) {
    untaken_ = 0;  // no thread to spare: each snapshot allocates its own memory
  }
}

void PreparedSnapshotMemory::prepare(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    {
      std::unique_lock lock(mu_);
      space_cv_.wait(lock, [&] { return stop_ || ready_.size() < kAhead; });
      if (stop_) return;
    }
    Set set;  // stays empty if memory runs out: the snapshot then allocates (and reports) itself
    try {
      set = prepare_snapshot_memory(sizes_);
    } catch (const std::bad_alloc&) {
    }
    std::lock_guard lock(mu_);
    ready_.push_back(std::move(set));
    ready_cv_.notify_one();
  }
}

PreparedSnapshotMemory::Set PreparedSnapshotMemory::take() {
  std::unique_lock lock(mu_);
  if (untaken_ == 0) return {};
  ready_cv_.wait(lock, [&] { return !ready_.empty(); });
  Set set = std::move(ready_.front());
  ready_.pop_front();
  --untaken_;
  space_cv_.notify_one();
  return set;
}

}  // namespace ws
