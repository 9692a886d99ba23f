#include "server/slot_pool.h"

#include "server/api_error.h"

namespace ws::server {

SlotPool::SlotPool(const Model& model, const Tokenizer& tok, PrefixCache* cache, const EngineOptions& options,
                   int n_slots, int threads, StepLoopOptions steps, int queue_limit)
    : threads_(std::make_unique<ThreadPool>(threads)),
      loop_(std::make_unique<StepLoop>(model, *threads_, steps)),
      queue_limit_(queue_limit) {
  for (int i = 0; i < n_slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->id = i;
    s->engine = std::make_unique<Engine>(*loop_, tok, cache, options, *threads_);
    slots_.push_back(std::move(s));
  }
}

SlotPool::Lease::~Lease() {
  if (slot_) pool_->release(slot_);
}

SlotPool::Lease SlotPool::acquire(int slot_id, const std::function<bool()>& client_gone) {
  if (slot_id >= size())
    throw bad_request("slot " + std::to_string(slot_id) + " does not exist: this server has " +
                          std::to_string(size()) + " (--parallel)",
                      "id_slot", "invalid_value");
  std::unique_lock<std::mutex> lock(mu_);
  auto free = [&] { return slot_id < 0 ? n_busy_ < size() : !slots_[size_t(slot_id)]->busy; };
  if (!free() && n_waiting_ >= queue_limit_)
    throw ApiError(503,
                   "the server is busy: " + (slot_id < 0 ? "all " + std::to_string(size()) + " slots are" :
                                                           "slot " + std::to_string(slot_id) + " is") +
                       " in use and " + std::to_string(n_waiting_) + " requests are waiting (--queue " +
                       std::to_string(queue_limit_) + "); retry later",
                   "unavailable_error", "", "server_busy");
  ++n_waiting_;
  // A client that hangs up while waiting gives its place back within a poll interval.
  constexpr auto kPoll = std::chrono::milliseconds(50);
  while (!cv_.wait_for(lock, kPoll, free)) {
    if (client_gone && client_gone()) {
      --n_waiting_;
      throw ApiError(499, "the client closed the connection while waiting for a slot", "invalid_request_error", "",
                     "client_closed_request");
    }
  }
  --n_waiting_;
  for (auto& s : slots_) {
    if (!s->busy && (slot_id < 0 || s->id == slot_id)) {
      s->busy = true;
      ++n_busy_;
      return Lease(this, s.get());
    }
  }
  throw std::logic_error("slot accounting is inconsistent");  // unreachable: free() held
}

std::vector<SlotPool::SlotInfo> SlotPool::info() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SlotInfo> out;
  // An idle slot's engine runs nothing while the lock is held (a lease needs it first).
  for (const auto& s : slots_)
    out.push_back({s->id, s->busy, s->busy ? std::vector<Token>{} : s->engine->last_sequence()});
  return out;
}

void SlotPool::release(Slot* slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot->busy = false;
    --n_busy_;
  }
  cv_.notify_all();  // waiters for one particular slot may be among them
}

int SlotPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_busy_;
}

int SlotPool::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_waiting_;
}

}  // namespace ws::server
